"""What a client that gets the request wrong receives from a running server (the ``api``
fixture: the resolver behind ``agentloom serve``'s HTTP server, raw sockets through
``http.client`` so the content type, the method and the headers are the test's own):
always a 4xx with the API's error envelope and a stable code, never a 500, an HTML page
or a success. Also the OpenAPI document served by the server, the events long poll that
answers at once when nothing can follow, and the field an invalid cursor names."""

from __future__ import annotations

import http.client
import json
import time
from typing import Any
from urllib.parse import urlsplit

import pytest

from agentloom.api.openapi import openapi_document
from agentloom.platform.errors import Invalid

from .conftest import ALICE, Api, stopped_view


def call(api: Api, method: str, path: str, body: str | bytes | None = None, *,
         user: str | None = "alice", content_type: str | None = "application/json",
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
    """One request on its own connection; the status, the headers and the JSON body."""
    url = urlsplit(api.url)
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
    sent = dict(headers or {})
    if user is not None:
        sent["Authorization"] = f"Bearer {api.tokens[user]}"
    if content_type is not None:
        sent["Content-Type"] = content_type
    try:
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        raw = response.read()
        got = {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()
    assert got.get("content-type", "").startswith("application/json"), (method, path, raw[:200])
    return response.status, got, json.loads(raw) if raw else None


def code_of(body: Any) -> str:
    assert set(body) == {"error"} and {"code", "message"} <= set(body["error"]), body
    return str(body["error"]["code"])


def fields_of(body: Any) -> list[str]:
    return [f["field"] for f in body["error"]["details"]["fields"]]


def test_a_body_that_is_not_declared_json_is_415_on_every_route(api: Api) -> None:
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    posts = [(f"/api/v1/sessions/{session.session_id}/runs", {"question": "Q hi"}),
             (f"/api/v1/spaces/{api.space_id}/sessions", {"agent_id": api.agent_id}),
             (f"/api/v1/spaces/{api.space_id}/knowledge/bases",
              {"name": "kb", "connection_id": "c", "document_model": "m"})]
    for path, body in posts:
        for content_type in ("text/plain", None, "application/x-www-form-urlencoded"):
            status, _, answer = call(api, "POST", path, json.dumps(body),
                                     content_type=content_type)
            assert (status, code_of(answer)) == (415, "unsupported_media_type"), (
                path, content_type, answer)
    # the media type is case-insensitive and may carry parameters
    status, _, answer = call(api, "POST", posts[1][0], json.dumps(posts[1][1]),
                             content_type="Application/JSON; charset=utf-8")
    assert status == 201, answer
    assert len(alice.runs(session.session_id)) == 0


def test_json_nested_too_deep_is_400_not_500(api: Api) -> None:
    for depth in (10_000, 65):
        status, _, answer = call(api, "POST", "/api/v1/spaces", "[" * depth + "]" * depth)
        assert (status, code_of(answer)) == (400, "json_too_deep"), depth
    nested: Any = "x"
    for _ in range(62):
        nested = {"a": nested}
    status, _, answer = call(api, "POST", "/api/v1/spaces",
                             json.dumps({"name": "deep but fine", "extra": nested}))
    assert status == 422 and fields_of(answer) == ["body.extra"]  # the model's own rule


def test_an_integer_of_100000_digits_is_422_naming_the_field(api: Api) -> None:
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    run = alice.ask(session.session_id, "Q digits")
    path = f"/api/v1/sessions/{session.session_id}/runs/{run.run_id}/resolve"
    status, _, answer = call(api, "POST", path,
                             '{"verdict": "ran", "exit_code": ' + "9" * 100_000 + "}")
    assert (status, code_of(answer)) == (422, "invalid_field")
    assert fields_of(answer) == ["body.exit_code"]
    status, _, answer = call(api, "POST", path, '{"verdict": "ran", "exit_code": 1e999}')
    assert status == 422 and fields_of(answer) == ["body.exit_code"]
    status, _, answer = call(api, "POST", path, '{"verdict": "ran", "exit_code": NaN}')
    assert (status, code_of(answer)) == (400, "malformed_json")  # not JSON


def test_an_exit_code_that_is_no_exit_status_or_signal_is_422(api: Api) -> None:
    """Issue 17: the runtime's rule (0..255, or -1..-64 for a signal), the same as the
    CLI's; nothing is recorded."""
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    run = alice.ask(session.session_id, "Q exit codes")
    path = f"/api/v1/sessions/{session.session_id}/runs/{run.run_id}/resolve"
    for code in (256, -65, -255):
        status, _, answer = call(api, "POST", path,
                                 json.dumps({"verdict": "ran", "exit_code": code}))
        assert (status, code_of(answer)) == (422, "invalid_field"), code
        assert fields_of(answer) == ["body.exit_code"]


def test_a_json_array_where_an_object_is_expected_is_422(api: Api) -> None:
    for body in ('[{"name": "x"}]', '"x"', "42", "null"):
        status, _, answer = call(api, "POST", "/api/v1/spaces", body)
        assert (status, code_of(answer)) == (422, "invalid_field"), body
        assert fields_of(answer) == ["body"]
    assert api.client("alice").spaces()[0].space.name == "Team"
    assert len(api.client("alice").spaces()) == 1


def test_a_method_no_route_has_is_405_with_allow(api: Api) -> None:
    for method in ("TRACE", "OPTIONS", "PATCH", "DELETE"):
        status, headers, answer = call(api, method, "/api/v1/spaces")
        assert (status, code_of(answer)) == (405, "method_not_allowed"), method
        assert headers["allow"] == "GET, POST"
    url = urlsplit(api.url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    connection.request("HEAD", f"/api/v1/spaces/{api.space_id}",
                       headers={"Authorization": f"Bearer {api.tokens['alice']}"})
    response = connection.getresponse()
    assert (response.status, response.getheader("Allow"), response.read()) == (405, "GET", b"")
    connection.close()
    # an unknown path stays 404, a method HTTP does not know is 501 — JSON either way
    status, _, answer = call(api, "TRACE", "/api/v1/nothing")
    assert (status, code_of(answer)) == (404, "route_not_found")
    status, _, answer = call(api, "BREW", "/api/v1/spaces")
    assert (status, code_of(answer)) == (501, "method_not_implemented")
    # nothing is revealed to an anonymous caller
    status, headers, answer = call(api, "TRACE", "/api/v1/spaces", user=None)
    assert status == 401 and "allow" not in headers


def test_the_server_serves_its_openapi_document_without_a_token(api: Api) -> None:
    for path in ("/openapi.json", "/api/v1/openapi.json"):
        status, _, document = call(api, "GET", path, user=None, content_type=None)
        assert status == 200 and document == openapi_document(), path
    assert "/api/v1/openapi.json" not in openapi_document()["paths"]


def test_an_idempotency_key_over_200_characters_is_400(api: Api) -> None:
    session = api.client("alice").create_session(api.space_id, api.agent_id)
    path = f"/api/v1/sessions/{session.session_id}/runs"
    for key in ("k" * 300, "with space"):
        status, _, answer = call(api, "POST", path, json.dumps({"question": "Q k"}),
                                 headers={"Idempotency-Key": key})
        assert (status, code_of(answer)) == (400, "invalid_idempotency_key"), key
    assert api.client("alice").runs(session.session_id) == []


def test_a_negative_cursor_names_the_field_it_came_from(api: Api) -> None:
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    run = alice.ask(session.session_id, "Q cursor")
    path = f"/api/v1/sessions/{session.session_id}/runs/{run.run_id}/events"
    sse = {"Accept": "text/event-stream"}
    for headers, query, field in (
            ({**sse, "Last-Event-ID": "-5"}, "", "header.last-event-id"),
            ({**sse, "Last-Event-ID": "five"}, "?after=3", "header.last-event-id"),
            (sse, "?after=-5", "query.after"),
            ({}, "?after=-5", "query.after")):  # the long poll: the route's own validation
        status, _, answer = call(api, "GET", path + query, content_type=None,
                                 headers=headers)
        assert (status, code_of(answer)) == (422, "invalid_field"), (headers, query)
        assert fields_of(answer) == [field]
    for kwargs, field in (({"after": -1}, "after"), ({"wait": 21.0}, "wait"),
                          ({"limit": 0}, "limit")):  # the service names its own arguments
        with pytest.raises(Invalid) as refused:
            api.platform.sessions.events(ALICE, session.session_id, run.run_id, **kwargs)
        assert [f["field"] for f in refused.value.details["fields"]] == [field]


def test_a_long_poll_past_the_end_of_a_stopped_run_answers_at_once(api: Api) -> None:
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    run = alice.ask(session.session_id, "Q finish")
    stopped_view(alice, session.session_id, run.run_id)
    last = alice.events(session.session_id, run.run_id, after=0, wait=0)
    assert last.done
    for after in (last.next_after, last.next_after + 100):
        started = time.monotonic()
        page = alice.events(session.session_id, run.run_id, after=after, wait=3)
        took = time.monotonic() - started
        assert page.done and page.items == [] and took < 1.0, (after, took)
