"""The authorization matrix, through a real server on 127.0.0.1: every route × (no
token, a user of another space, another member for session content, a role too low) →
the right status, and no data in the answer.

The space belongs to alice (owner), with bob (member) and carol (admin); eve belongs to
another space. alice has a session with a completed run whose question, answer and
agent prompt are the secrets that must never appear in an answer to anyone else.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from .conftest import ALICE, Api

Wait = Callable[..., Any]
SECRET_QUESTION = "Q the secret plan for 2027"
SECRET_PROMPT = "You answer questions."


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # {S} space, {A} agent, {E} session, {R} run, {C} model connection
    need: str  # any | member | admin | creator | creator_or_admin
    body: dict[str, Any] | None = None


ROUTES = [
    Route("GET", "/me", "any"),
    Route("POST", "/spaces", "any", {"name": "Mine"}),
    Route("GET", "/spaces", "any"),
    Route("GET", "/spaces/{S}", "member"),
    Route("GET", "/spaces/{S}/members", "member"),
    Route("PUT", "/spaces/{S}/members/dave", "admin", {"role": "member"}),
    Route("DELETE", "/spaces/{S}/members/bob", "admin"),
    Route("POST", "/spaces/{S}/agents", "admin",
          {"name": "X", "config": {"model": {"model": "m"}}}),
    Route("GET", "/spaces/{S}/agents", "member"),
    Route("GET", "/spaces/{S}/agents/{A}", "member"),
    Route("GET", "/spaces/{S}/agents/{A}/draft", "admin"),
    Route("PUT", "/spaces/{S}/agents/{A}/draft", "admin",
          {"config": {"model": {"model": "m"}}}),
    Route("POST", "/spaces/{S}/agents/{A}/publish", "admin", {}),
    Route("GET", "/spaces/{S}/agents/{A}/versions", "member"),
    Route("GET", "/spaces/{S}/agents/{A}/versions/1", "member"),
    Route("POST", "/spaces/{S}/sessions", "member", {"agent_id": "{A}"}),
    Route("GET", "/spaces/{S}/sessions", "member"),
    Route("GET", "/spaces/{S}/runs", "admin"),
    Route("POST", "/spaces/{S}/runs/{R}/cancel", "admin", {}),
    Route("POST", "/spaces/{S}/runs/{R}/resume", "admin",
          {"raise_budget": {"max_tokens": 1000}}),
    Route("POST", "/spaces/{S}/models/connections", "admin",
          {"name": "X", "spec": {"provider": "openai_compatible",
                                 "base_url": "http://127.0.0.1:9/v1", "model_id": "m"}}),
    Route("GET", "/spaces/{S}/models/connections", "admin"),
    Route("GET", "/spaces/{S}/models/connections/{C}", "admin"),
    Route("PUT", "/spaces/{S}/models/connections/{C}", "admin",
          {"spec": {"provider": "openai_compatible", "base_url": "http://127.0.0.1:9/v1",
                    "model_id": "m"}}),
    Route("POST", "/spaces/{S}/models/discover", "admin",
          {"provider": "openai_compatible", "base_url": "http://127.0.0.1:9/v1",
           "resource_id": "{C}"}),
    Route("GET", "/sessions/{E}", "creator"),
    Route("GET", "/sessions/{E}/messages", "creator"),
    # the creator or an admin of the space deletes a session (test_session_delete)
    Route("DELETE", "/sessions/{E}", "creator_or_admin"),
    Route("POST", "/sessions/{E}/runs", "creator", {"question": "Q intruder"}),
    Route("GET", "/sessions/{E}/runs", "creator"),
    Route("GET", "/sessions/{E}/runs/{R}", "creator"),
    Route("POST", "/sessions/{E}/runs/{R}/resume", "creator", {}),
    # raising needs admin as well as the session (a member creator: test_api_budget)
    Route("POST", "/sessions/{E}/runs/{R}/resume", "creator",
          {"raise_budget": {"max_tokens": 1000}}),
    Route("POST", "/sessions/{E}/runs/{R}/resolve", "creator", {"verdict": "send_again"}),
    Route("POST", "/sessions/{E}/runs/{R}/inputs", "creator", {"text": "more"}),
    Route("POST", "/sessions/{E}/runs/{R}/cancel", "creator", {}),
    Route("GET", "/sessions/{E}/runs/{R}/events", "creator"),
    Route("POST", "/sessions/{E}/runs/{R}/replay", "creator", {}),
    # knowledge bases ({K}) and their documents ({D}): agentloom.api.routes_knowledge
    Route("POST", "/spaces/{S}/knowledge/bases", "admin",
          {"name": "X", "connection_id": "{C}", "document_model": "m"}),
    Route("GET", "/spaces/{S}/knowledge/bases", "member"),
    Route("GET", "/spaces/{S}/knowledge/bases/{K}", "member"),
    Route("DELETE", "/spaces/{S}/knowledge/bases/{K}", "admin"),
    Route("POST", "/spaces/{S}/knowledge/bases/{K}/reindex", "admin"),
    Route("POST", "/spaces/{S}/knowledge/bases/{K}/documents", "admin",
          {"name": "x.txt", "text": "intruder"}),
    Route("GET", "/spaces/{S}/knowledge/bases/{K}/documents", "member"),
    Route("GET", "/spaces/{S}/knowledge/bases/{K}/documents/{D}", "member"),
    Route("DELETE", "/spaces/{S}/knowledge/bases/{K}/documents/{D}", "admin"),
    Route("POST", "/spaces/{S}/knowledge/search", "member",
          {"query": "plan", "knowledge_bases": ["{K}"]}),
    Route("GET", "/sessions/{E}/runs/{R}/citations", "creator"),
    # skills: agentloom.api.routes_skills (the world imports "hello")
    Route("POST", "/spaces/{S}/skills", "admin",
          {"git": {"url": "https://example.invalid/x", "revision": "main"}}),
    Route("GET", "/spaces/{S}/skills", "member"),
    Route("GET", "/spaces/{S}/skills/hello", "member"),
    Route("DELETE", "/spaces/{S}/skills/hello", "admin"),
    # MCP resources ({M}): agentloom.api.routes_mcp
    Route("POST", "/spaces/{S}/mcp/resources", "admin",
          {"name": "X", "spec": {"transport": "sse", "url": "http://127.0.0.1:9/sse"}}),
    Route("GET", "/spaces/{S}/mcp/resources", "member"),
    Route("GET", "/spaces/{S}/mcp/resources/{M}", "member"),
    Route("PUT", "/spaces/{S}/mcp/resources/{M}", "admin", {"revision": 1, "name": "Y"}),
    Route("DELETE", "/spaces/{S}/mcp/resources/{M}", "admin"),
    Route("POST", "/spaces/{S}/mcp/resources/{M}/discover", "admin"),
    # the LangGraph API shape (agentloom.api.langgraph): {T} alice's thread, {Q} its run
    Route("POST", "/spaces/{S}/agents/{A}/langgraph/threads", "member", {}),
    Route("GET", "/spaces/{S}/agents/{A}/langgraph/threads/{T}", "creator"),
    Route("GET", "/spaces/{S}/agents/{A}/langgraph/threads/{T}/state", "creator"),
    Route("POST", "/spaces/{S}/agents/{A}/langgraph/threads/{T}/runs", "creator",
          {"input": {"messages": [{"type": "human", "content": "Q intruder"}]}}),
    Route("GET", "/spaces/{S}/agents/{A}/langgraph/threads/{T}/runs", "creator"),
    Route("GET", "/spaces/{S}/agents/{A}/langgraph/threads/{T}/runs/{Q}", "creator"),
    Route("POST", "/spaces/{S}/agents/{A}/langgraph/threads/{T}/runs/{Q}/cancel", "creator"),
    Route("POST", "/spaces/{S}/agents/{A}/langgraph/threads/{T}/runs/wait", "creator",
          {"input": {"messages": [{"type": "human", "content": "Q intruder"}]}}),
    Route("POST", "/spaces/{S}/agents/{A}/langgraph/threads/{T}/runs/stream", "creator",
          {"input": {"messages": [{"type": "human", "content": "Q intruder"}]}}),
    Route("GET", "/spaces/{S}/agents/{A}/langgraph/threads/{T}/runs/{Q}/stream", "creator"),
    Route("GET", "/spaces/{S}/agents/{A}/langgraph/threads/{T}/runs/{Q}/join", "creator"),
    # AG-UI (agentloom.api.agui): a member runs the agent in a thread of their own
    Route("POST", "/spaces/{S}/agents/{A}/ag-ui", "member",
          {"threadId": "t-intruder", "runId": "r-1",
           "messages": [{"id": "m-1", "role": "user", "content": "Q intruder"}]}),
    # A2A (agentloom.api.a2a): the card and the JSON-RPC endpoint are the space's members';
    # the tasks behind it are their creator's (test_a2a_tasks_are_the_creators_alone)
    Route("GET", "/spaces/{S}/agents/{A}/a2a/.well-known/agent-card.json", "member"),
    Route("POST", "/spaces/{S}/agents/{A}/a2a", "member",
          {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "{R}"}}),
    # AgentLoom as an MCP server: agentloom.api.routes_mcp_server (a session's content
    # is refused inside the tools: tests/platform/test_mcp_server.py)
    Route("POST", "/spaces/{S}/agents/{A}/mcp", "member",
          {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    Route("POST", "/spaces/{S}/mcp", "member",
          {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": "run_status", "arguments": {"session_id": "{E}",
                                                           "run_id": "{R}"}}}),
]

A2A_CALLS = [  # (method, params) a member who is not the creator sends about alice's run
    ("GetTask", {"id": "{R}"}),
    ("CancelTask", {"id": "{R}"}),
    ("SubscribeToTask", {"id": "{R}"}),
    ("SendMessage", {"message": {"messageId": "m1", "taskId": "{R}",
                                 "parts": [{"text": "Q intruder"}]}}),
    ("SendMessage", {"message": {"messageId": "m2", "contextId": "{E}",
                                 "parts": [{"text": "Q intruder"}]}}),
]


@pytest.fixture
def platform(open_platform: Callable[[], Any], tmp_path: Any, model: Any) -> Iterator[Any]:
    """The conftest's platform with the knowledge capability (its routes need it)."""
    from agentloom.capabilities import Capabilities
    from agentloom.knowledge.wiring import embedded_knowledge
    from agentloom.local.embedded import EmbeddedPlatform
    from agentloom.mcp import embedded_capability
    from agentloom.skills.wiring import embedded_skills

    home = tmp_path / "home"
    home.mkdir()
    made = EmbeddedPlatform.open(home, model_factory=model.factory, capabilities=Capabilities
                                 .of([embedded_knowledge(home, allow_loopback=True),
                                      embedded_skills(home),
                                      embedded_capability(home)]))
    yield made
    model.open()
    made.close()


@pytest.fixture
def embeddings() -> Iterator[Any]:
    from unit.knowledge.builders import hashing_server

    with hashing_server() as served:
        yield served


def _skill(api: Api) -> None:
    from unit.skills.builders import hello_zip

    from agentloom.skills import SkillsCapability

    [skills] = [c for c in api.platform.admin.capabilities.items
                if isinstance(c, SkillsCapability)]
    skills.service(api.platform.store).import_zip(ALICE, api.space_id, hello_zip())


@dataclass(frozen=True)
class World:
    ids: dict[str, str]
    secrets: tuple[str, ...]


@pytest.fixture
def world(api: Api, wait: Wait, embeddings: Any) -> World:
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    run = alice.ask(session.session_id, SECRET_QUESTION)
    done = wait(lambda: (v := alice.run(session.session_id, run.run_id)).status ==
                "completed" and v, what="the run")
    api.platform.admin.create_space(ALICE.__class__("eve", "token"), "Eve's own")
    connection = api.platform.admin.create_model_connection(
        ALICE, api.space_id, "Local", {"provider": "openai_compatible",
                                       "base_url": "http://127.0.0.1:9/v1", "model_id": "m"})
    knowledge = _knowledge(api, embeddings.url)
    thread = _thread(api, alice, wait)
    _skill(api)
    return World(ids={"S": api.space_id, "A": api.agent_id, "E": session.session_id,
                      "R": run.run_id, "C": connection.connection_id, **knowledge,
                      "M": _mcp(api), **thread},
                 secrets=(SECRET_QUESTION, str(done.answer), SECRET_PROMPT))


def _thread(api: Api, alice: Any, wait: Wait) -> dict[str, str]:
    """alice's LangGraph thread "t-alice" with a completed run."""
    from agentloom.platform.threads import thread_session

    session = thread_session(api.platform.sessions, ALICE, api.space_id, api.agent_id,
                             "t-alice")
    run = alice.ask(session.session_id, SECRET_QUESTION)
    wait(lambda: alice.run(session.session_id, run.run_id).status == "completed",
         what="the thread's run")
    return {"T": "t-alice", "Q": run.run_id}


def _mcp(api: Api) -> str:
    from agentloom.mcp import McpCapability

    [mcp] = [c for c in api.platform.admin.capabilities.items
             if isinstance(c, McpCapability)]
    return mcp.service.create(ALICE, api.space_id, "Local", {
        "transport": "sse", "url": "http://127.0.0.1:9/sse"}).resource_id


def _knowledge(api: Api, url: str) -> dict[str, str]:
    from agentloom.knowledge import BaseSpec, KnowledgeCapability

    capability = api.platform.admin.capabilities.items[0]
    assert isinstance(capability, KnowledgeCapability)
    embedder = api.platform.admin.create_model_connection(
        ALICE, api.space_id, "Embeddings", {"provider": "openai_compatible",
                                            "base_url": url, "model_id": "m"})
    base = capability.service.create_base(ALICE, api.space_id,
                                           BaseSpec("Plans", embedder.connection_id, "m"))
    doc, _, _ = capability.service.put_document(ALICE, api.space_id, base.base_id, "p.txt",
                                                SECRET_QUESTION.encode())
    return {"K": base.base_id, "D": doc.document_id}


def _fill(text: str, ids: dict[str, str]) -> str:
    for key, value in ids.items():
        text = text.replace("{" + key + "}", value)
    return text


def _call(api: Api, world: World, route: Route, user: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {api.tokens[user]}"} if user else {}
    body = None if route.body is None else json.loads(_fill(json.dumps(route.body),
                                                            world.ids))
    return httpx.request(route.method, f"{api.url}/api/v1{_fill(route.path, world.ids)}",
                         json=body, headers=headers, timeout=30)


def _denied(response: httpx.Response, status: int, world: World) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert list(body) == ["error"] and {"code", "message"} <= set(body["error"])
    for secret in world.secrets:
        assert secret not in response.text


def _cases() -> list[tuple[Route, str | None, int]]:
    """(route, caller, expected status) for every denial the matrix covers."""
    cases: list[tuple[Route, str | None, int]] = []
    for route in ROUTES:
        cases.append((route, None, 401))
        if route.need != "any":
            cases.append((route, "eve", 404))  # another space: it does not exist
        if route.need == "admin":
            cases.append((route, "bob", 403))  # a member: the role is too low
        if route.need in ("creator", "creator_or_admin"):
            cases.append((route, "bob", 404))  # another member: not their session
        if route.need == "creator":
            cases.append((route, "carol", 404))  # an admin reads no one's content
    return cases


@pytest.mark.parametrize(("route", "user", "status"), _cases(),
                         ids=lambda v: v if isinstance(v, str | int) else
                         f"{v.method} {v.path}" if isinstance(v, Route) else "none")
def test_authorization_matrix(api: Api, world: World, route: Route, user: str | None,
                              status: int) -> None:
    _denied(_call(api, world, route, user), status, world)


def test_the_matrix_covers_every_route_of_the_api(api: Api) -> None:
    from agentloom.api.openapi import openapi_document

    declared = {(method.upper(), path.removeprefix("/api/v1"))
                for path, methods in openapi_document()["paths"].items()
                for method in methods if not path.endswith("/health")}
    covered = {(r.method, r.path.replace("{S}", "{space_id}").replace("{A}", "{agent_id}")
                .replace("{E}", "{session_id}").replace("{R}", "{run_id}")
                .replace("{C}", "{connection_id}").replace("{K}", "{base_id}")
                .replace("{D}", "{document_id}").replace("/skills/hello", "/skills/{name}")
                .replace("{M}", "{resource_id}").replace("{T}", "{thread_id}")
                .replace("{Q}", "{run_id}")
                .replace("/dave", "/{user_id}").replace("/bob", "/{user_id}")
                .replace("/versions/1", "/versions/{version}")) for r in ROUTES}
    assert declared == covered


def test_the_owner_and_the_creator_are_allowed(api: Api, world: World) -> None:
    """The matrix is not vacuous: the same routes answer their rightful callers."""
    for route in ROUTES:
        if route.method != "GET":
            continue
        user = "alice" if route.need in ("creator", "admin") else "bob"
        response = _call(api, world, route, user)
        assert response.status_code == 200, (route, response.text)
    operator = _call(api, world, Route("GET", "/spaces/{S}/runs", "admin"), "carol")
    assert operator.status_code == 200 and world.ids["R"] in operator.text
    for secret in world.secrets[:2]:  # the operator listing holds no content
        assert secret not in operator.text


def test_a_404_looks_the_same_for_a_real_and_an_unknown_space(api: Api,
                                                              world: World) -> None:
    headers = {"Authorization": f"Bearer {api.tokens['eve']}"}
    real = httpx.get(f"{api.url}/api/v1/spaces/{world.ids['S']}", headers=headers)
    fake = httpx.get(f"{api.url}/api/v1/spaces/spc_0123456789abcdef0123", headers=headers)
    assert real.status_code == fake.status_code == 404
    assert real.json()["error"]["code"] == fake.json()["error"]["code"]
    assert real.json()["error"]["message"].replace(world.ids["S"], "X") == \
        fake.json()["error"]["message"].replace("spc_0123456789abcdef0123", "X")


def test_tokens_that_are_not_valid(api: Api, world: World) -> None:
    for header in ("Bearer agl_not-a-token", "Basic YWxpY2U6eA==", "Bearer",
                   f"Bearer {api.tokens['alice']}x"):
        response = httpx.get(f"{api.url}/api/v1/me", headers={"Authorization": header})
        assert response.status_code == 401
    tokens = api.platform.store.tokens
    tokens.revoke("alice", tokens.of_user("alice")[0].token_id)
    response = httpx.get(f"{api.url}/api/v1/me",
                         headers={"Authorization": f"Bearer {api.tokens['alice']}"})
    assert response.status_code == 401


@pytest.mark.parametrize("user", ["bob", "carol"])
@pytest.mark.parametrize(("method", "params"), A2A_CALLS, ids=lambda v: v if
                         isinstance(v, str) else "params")
def test_a2a_tasks_are_the_creators_alone(api: Api, world: World, user: str, method: str,
                                          params: dict[str, Any]) -> None:
    """Another member (bob) or an admin (carol) reaches the endpoint, but alice's task and
    context do not exist for them: the A2A error, the same as for an unknown id, and no
    content."""
    body = {"jsonrpc": "2.0", "id": 7, "method": method,
            "params": json.loads(_fill(json.dumps(params), world.ids))}
    response = httpx.post(f"{api.url}/api/v1{_fill('/spaces/{S}/agents/{A}/a2a', world.ids)}",
                          json=body, headers={"Authorization": f"Bearer {api.tokens[user]}"},
                          timeout=30)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["id"] == 7 and "result" not in answer
    assert answer["error"]["code"] in (-32001, -32602), answer  # task / context not found
    assert answer["error"]["data"][0]["reason"] in ("task_not_found", "context_not_found")
    for secret in world.secrets:
        assert secret not in response.text
    view = api.platform.sessions.run(ALICE, world.ids["E"], world.ids["R"])
    assert view.status == "completed"  # nothing was cancelled or asked
