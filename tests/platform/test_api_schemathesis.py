"""schemathesis against the generated OpenAPI document on a running server on 127.0.0.1
(the ``api`` fixture: the same resolver and server as ``agentloom serve``), as the space
owner with a bearer token: for every operation, generated requests get no 5xx and no
response that violates the document (status code, content type, headers, body schema).

A bounded number of examples per operation keeps it fast; the ids in paths are mostly
random, so most answers are 4xx — the point is that each is one the document declares
and that nothing crashes. A seeded space, agent and session make some ids real.

schemathesis' pytest plugin (``from_fixture``) breaks on pytest 9 (it reads
``request.node._nodeid``), so each operation's strategy is driven with hypothesis here.
``test_the_document_declares_every_status`` checks the declarations themselves: a 2xx
(with a body schema unless 204) and the gate's errors on every operation, 400/413 where
there is a body, and no identity on the public paths.
"""

from __future__ import annotations

from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")

import httpx  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from schemathesis import checks  # noqa: E402

from agentloom.api._resolver import PUBLIC_PATHS  # noqa: E402
from agentloom.api.openapi import openapi_document  # noqa: E402
from agentloom.models import ModelDiscovery  # noqa: E402

from .conftest import ALICE, Api  # noqa: E402

EXAMPLES = 4  # per operation and kind of request (about 35 operations)


# every schemathesis check (`--checks all`) but positive_data_acceptance: the API rightly
# answers 422 to schema-valid input that breaks a rule the schema cannot say (an agent's
# config and a model spec are free-form objects validated by their own models; a count
# sent as 42.0 is a JSON Schema integer but not a JSON integer, which inputs require)
CHECKS = [checks.not_a_server_error, checks.status_code_conformance,
          checks.content_type_conformance, checks.response_headers_conformance,
          checks.response_schema_conformance, checks.negative_data_rejection,
          checks.ignored_auth, checks.missing_required_header, checks.unsupported_method,
          checks.allow_header_conformance, checks.use_after_free,
          checks.ensure_resource_availability]


def offline_discovery() -> ModelDiscovery:
    """Discovery that reaches no network: every host resolves to a public address (never dialled)
    and the transport answers a model list (the address checks still apply)."""
    async def resolve(host: str, port: int) -> list[str]:
        return ["93.184.215.14"]

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": [{"id": "gpt-4o-mini"}]})

    return ModelDiscovery(resolver=resolve, transport=httpx.MockTransport(answer))


def test_no_5xx_and_no_schema_violations(api: Api) -> None:
    from schemathesis import GenerationMode

    api.platform.admin.discovery = offline_discovery()
    session = api.platform.sessions.create_session(ALICE, api.space_id, api.agent_id)
    known = {"space_id": api.space_id, "agent_id": api.agent_id,
             "session_id": session.session_id, "user_id": "bob", "version": 1}
    schema = schemathesis.openapi.from_dict(openapi_document())
    headers = {"Authorization": f"Bearer {api.tokens['alice']}"}
    failures: list[str] = []
    operations = 0
    calls: list[int] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        names = [p.name for p in operation.path_parameters]
        real = {n: known[n] for n in names if n in known}
        strategy = st.one_of(
            operation.as_strategy(),  # random ids: mostly 404s, each declared
            operation.as_strategy(path_parameters=real) if real else st.nothing(),
            operation.as_strategy(GenerationMode.NEGATIVE),  # invalid input: 4xx
        ) if not operation.path.endswith("/events") else operation.as_strategy(
            query={"wait": 0})  # no 20 s long polls

        @given(case=strategy)
        @settings(max_examples=EXAMPLES * 3, deadline=None, derandomize=True,
                  suppress_health_check=list(HealthCheck), database=None)
        def check(case: Any) -> None:
            response = case.call_and_validate(base_url=api.url, headers=headers,
                                              checks=CHECKS)
            calls.append(response.status_code)

        try:
            check()
        except (Exception, BaseExceptionGroup) as err:  # collected, reported below
            failures.append(f"{operation.method.upper()} {operation.path}: "
                            f"{type(err).__name__}: {str(err)[:1500]}")
    assert operations >= 30 and len(calls) >= operations * EXAMPLES, len(calls)
    assert any(200 <= c < 300 for c in calls) and any(400 <= c < 500 for c in calls)
    assert not failures, "\n\n".join(failures)


def test_the_document_declares_every_status() -> None:
    document = openapi_document()
    gaps = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            declared = operation["responses"]
            ok = [c for c in declared if c.startswith("2")]
            wanted = {"422", "503"} | ({"400", "413"} if "requestBody" in operation else set())
            if path not in PUBLIC_PATHS:
                wanted.add("401")
            elif operation.get("security") != []:
                gaps.append(f"{method.upper()} {path}: not declared public")
            gaps += [f"{method.upper()} {path}: {c}" for c in sorted(wanted - set(declared))]
            if not ok:
                gaps.append(f"{method.upper()} {path}: no 2xx")
            for code in ok:  # a JSON body or an event stream (AG-UI); an MCP 202 is empty
                content = declared[code].get("content", {})
                empty = code == "204" or (code == "202" and path.endswith("/mcp")
                                          and content == {})
                if not empty and not any("schema" in content.get(kind, {}) for kind in (
                        "application/json", "text/event-stream")):
                    gaps.append(f"{method.upper()} {path}: {code} without a schema")
            for code, response in declared.items():
                schema = response.get("content", {}).get("application/json", {}).get("schema")
                if code[0] in "45" and schema != ERROR_OUT and not _mcp_error(path, schema):
                    gaps.append(f"{method.upper()} {path}: {code} is not ErrorOut")
    assert not gaps, gaps


ERROR_OUT = {"$ref": "#/components/schemas/ErrorOut"}


def _mcp_error(path: str, schema: Any) -> bool:
    """The MCP server routes (routes_mcp_server): the transport sets the HTTP status of
    a JSON-RPC error (400, 404 at 2026-07-28) and takes a notification with 202 and no
    body, so their 400/404 are ErrorOut (the gate, the services) or a JSON-RPC reply."""
    return path.endswith("/mcp") and isinstance(schema, dict) and \
        schema.get("anyOf") == [ERROR_OUT, {"$ref": "#/components/schemas/McpReplyOut"}]
