"""The API's contract: the committed OpenAPI document is the generated one; the Lambda
handler answers real API Gateway HTTP API (payload 2.0) events with identity from the
JWT authorizer's claims; the gate and the error shapes (400 / 401 / 404 / 413 / 422)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloom.api.app import build_app
from agentloom.api.openapi import render
from agentloom.handlers import api as lambda_api
from agentloom.local.embedded import EmbeddedPlatform
from agentloom.platform.identity import JwtClaims

DOCS = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_the_committed_openapi_document_is_current() -> None:
    assert DOCS.read_text() == render(), (
        "docs/openapi.json is stale: run `python -m agentloom.api.openapi > docs/openapi.json`")


def test_every_route_declares_its_errors_with_the_error_model() -> None:
    document = json.loads(render())
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            if path.endswith("/health"):
                continue
            for code in ("401", "422"):
                content = operation["responses"][code]["content"]["application/json"]
                assert content["schema"]["$ref"].endswith("/ErrorOut"), (method, path)


def event(method: str, path: str, *, sub: str | None = "alice", body: Any = None,
          raw: str | None = None, encoded: bool = False,
          headers: dict[str, str] | None = None) -> dict[str, Any]:
    """An HTTP API payload 2.0 event as API Gateway sends it behind a JWT authorizer."""
    context: dict[str, Any] = {
        "accountId": "123456789012", "apiId": "api", "domainName": "api.example.com",
        "domainPrefix": "api", "requestId": "req", "routeKey": "$default",
        "stage": "$default", "time": "01/Jan/2026:00:00:00 +0000", "timeEpoch": 0,
        "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                 "sourceIp": "192.0.2.1", "userAgent": "test"}}
    if sub is not None:
        context["authorizer"] = {"jwt": {"claims": {"sub": sub, "iss": "https://issuer"},
                                         "scopes": None}}
    text = raw if raw is not None else (json.dumps(body) if body is not None else None)
    return {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
            "headers": {"content-type": "application/json", **(headers or {})},
            "requestContext": context, "body": text, "isBase64Encoded": encoded}


@pytest.fixture
def handler(tmp_path: Path) -> Iterator[Any]:
    platform = EmbeddedPlatform.open(tmp_path / "home")
    lambda_api.configure(build_app(platform.admin, platform.sessions, JwtClaims()))
    try:
        yield lambda_api.handler
    finally:
        lambda_api.configure(None)
        platform.close()


def _answer(response: dict[str, Any]) -> tuple[int, Any]:
    return response["statusCode"], json.loads(response["body"]) if response["body"] else None


def test_the_lambda_handler_takes_identity_from_jwt_claims(handler: Any) -> None:
    status, body = _answer(handler(event("POST", "/api/v1/spaces", body={"name": "Team"}),
                                   None))
    assert status == 201 and body["role"] == "owner"
    assert body["space"]["created_by"] == "alice"
    status, body = _answer(handler(event("GET", "/api/v1/me"), None))
    assert status == 200 and body["user_id"] == "alice" and len(body["spaces"]) == 1
    status, body = _answer(handler(event("GET", "/api/v1/me", sub=None), None))
    assert status == 401 and body["error"]["code"] == "no_identity"
    space = json.loads(handler(event("GET", "/api/v1/spaces"), None)["body"])["items"][0]
    sid = space["space"]["space_id"]
    status, body = _answer(handler(event("GET", f"/api/v1/spaces/{sid}", sub="mallory"), None))
    assert status == 404 and body["error"]["code"] == "space_not_found"
    # a bearer header does not count behind the authorizer: the claims do
    status, _ = _answer(handler(event("GET", "/api/v1/me", sub=None,
                                      headers={"authorization": "Bearer agl_x"}), None))
    assert status == 401


def test_the_gate_and_the_error_shapes(handler: Any) -> None:
    status, body = _answer(handler(event("POST", "/api/v1/spaces", raw="{not json"), None))
    assert (status, body["error"]["code"]) == (400, "malformed_json")
    status, body = _answer(handler(event("POST", "/api/v1/spaces", body={"nom": "x"}), None))
    assert (status, body["error"]["code"]) == (422, "invalid_field")
    fields = [f["field"] for f in body["error"]["details"]["fields"]]
    assert "body.name" in fields and "body.nom" in fields
    big = base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()
    status, body = _answer(handler(event("POST", "/api/v1/spaces", raw=big, encoded=True),
                                   None))
    assert (status, body["error"]["code"]) == (413, "request_too_large")
    latin = base64.b64encode('{"name": "caf\xe9"}'.encode("latin-1")).decode()
    status, body = _answer(handler(event("POST", "/api/v1/spaces", raw=latin, encoded=True),
                                   None))
    assert (status, body["error"]["code"]) == (400, "invalid_encoding")
    status, body = _answer(handler(event("GET", "/api/v1/nothing"), None))
    assert (status, body["error"]["code"]) == (404, "route_not_found")
    status, body = _answer(handler(event("GET", "/api/v1/nothing", sub=None), None))
    assert status == 401  # nothing is revealed to an anonymous caller
    status, body = _answer(handler(event("GET", "/api/v1/health", sub=None), None))
    assert (status, body) == (200, {"status": "ok"})


def test_a_question_too_long_is_413_and_a_bad_limit_is_422(handler: Any) -> None:
    sid = _answer(handler(event("POST", "/api/v1/spaces", body={"name": "T"}), None))[1][
        "space"]["space_id"]
    agent = _answer(handler(event("POST", f"/api/v1/spaces/{sid}/agents", body={
        "name": "A", "config": {"model": {"model": "m"}}}), None))[1]["agent"]
    status, body = _answer(handler(event("POST", f"/api/v1/spaces/{sid}/agents/"
                                          f"{agent['agent_id']}/publish", body={}), None))
    assert status == 201 and body["version"]["version"] == 1
    session = _answer(handler(event("POST", f"/api/v1/spaces/{sid}/sessions",
                                    body={"agent_id": agent["agent_id"]}), None))[1]
    path = f"/api/v1/sessions/{session['session_id']}"
    status, body = _answer(handler(event("POST", f"{path}/runs",
                                         body={"question": "x" * 100_001}), None))
    assert (status, body["error"]["code"]) == (413, "input_too_large")
    bad = event("GET", f"{path}/messages")
    bad["queryStringParameters"] = {"limit": "201"}
    status, body = _answer(handler(bad, None))
    assert status == 422 and body["error"]["details"]["fields"][0]["field"] == "query.limit"
    status, body = _answer(handler(event("POST", f"{path}/runs", body={"question": "Q x"}),
                                   None))
    assert status == 201 or (status, body["error"]["code"]) == (503, "launcher_unavailable")
