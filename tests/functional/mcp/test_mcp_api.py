"""MCP through the platform API on a real server (embedded platform, SQLite file): an
admin registers a resource with a credential, discovers its tools, binds one in the
draft, publishes (the schema is pinned), and a member's run calls the tool on a real
MCP server and completes. The credential is never returned nor stored in clear."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from functional.mcp.conftest import tool_then_answer
from functional.mcp.servers import TOKEN, Running, serve

from agentloom.api.app import build_app
from agentloom.api.client import Client
from agentloom.api.server import ApiServer
from agentloom.capabilities import Capabilities
from agentloom.local.embedded import EmbeddedPlatform
from agentloom.mcp import McpPolicy, embedded_capability
from agentloom.platform.identity import Principal
from agentloom_runtime.contracts import ModelGateway, ModelRequest
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.testing import FunctionModel, ScriptedModel

ALICE = Principal("alice", "token")
ModelFactory = Callable[[AgentSnapshot], ModelGateway]


class World:
    def __init__(self, platform: EmbeddedPlatform, url: str, tokens: dict[str, str],
                 space_id: str, mcp: Running) -> None:
        self.platform, self.url, self.tokens = platform, url, tokens
        self.space_id, self.mcp = space_id, mcp

    def call(self, method: str, path: str, user: str = "alice",
             body: dict[str, Any] | None = None) -> httpx.Response:
        return httpx.request(method, f"{self.url}/api/v1/spaces/{self.space_id}{path}",
                             json=body, timeout=30,
                             headers={"Authorization": f"Bearer {self.tokens[user]}"})


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with _world(tmp_path, lambda s: tool_then_answer("calc_add", {"a": 40, "b": 2})) as w:
        yield w


@contextmanager
def _world(tmp_path: Path, model: ModelFactory) -> Iterator[World]:
    home = tmp_path / "home"
    capability = embedded_capability(home, McpPolicy(allow_loopback=True))
    platform = EmbeddedPlatform.open(home, model_factory=model,
                                     capabilities=Capabilities.of([capability]))
    server = ApiServer(build_app(platform.admin, platform.sessions, platform.tokens),
                       platform.sessions).start()
    tokens = {u: platform.tokens.issue(u)[1] for u in ("alice", "bob", "eve")}
    space = platform.admin.create_space(ALICE, "Team")
    platform.admin.set_member(ALICE, space.space_id, "bob", "member")
    try:
        with serve("http", auth=True) as mcp:
            yield World(platform, server.url, tokens, space.space_id, mcp)
    finally:
        server.close()
        platform.close()
        capability.service.platform.close()


def _wait_done(client: Client, session_id: str, run_id: str) -> Any:
    import time

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        view = client.run(session_id, run_id)
        if view.status not in ("queued", "running") and not view.driven:
            return view
        time.sleep(0.05)
    raise AssertionError("the run did not stop")


def test_register_discover_publish_and_run(world: World) -> None:
    made = world.call("POST", "/mcp/resources", body={
        "name": "Calculator", "spec": {"transport": "streamable_http", "url": world.mcp.url,
                                       "alias_prefix": "calc"},
        "credential": {"kind": "bearer", "value": TOKEN}})
    assert made.status_code == 201, made.text
    resource = made.json()
    assert resource["has_credential"] is True and TOKEN not in made.text
    rid = resource["resource_id"]
    tools = world.call("POST", f"/mcp/resources/{rid}/discover")
    assert tools.status_code == 200, tools.text
    add = next(t for t in tools.json()["items"] if t["name"] == "add")
    assert add["read_only_hint"] is True and add["schema_digest"].startswith("sha256:")
    # members see resources (no credential), only admins change or discover
    assert world.call("GET", f"/mcp/resources/{rid}", "bob").status_code == 200
    assert world.call("POST", f"/mcp/resources/{rid}/discover", "bob").status_code == 403
    assert world.call("GET", "/mcp/resources", "eve").status_code == 404
    listing = world.call("GET", "/mcp/resources", "bob")
    assert TOKEN not in listing.text and listing.json()["items"][0]["resource_id"] == rid

    admin = world.platform.admin
    agent, _ = admin.create_agent(ALICE, world.space_id, "Calc", {
        "prompt": "You add.", "model": {"model": "m"},
        "mcp_tools": [{"resource_id": rid, "tool": "add"}]})
    version, created = admin.publish(ALICE, world.space_id, agent.agent_id)
    assert created
    snapshot = AgentSnapshot.model_validate(version.snapshot)
    binding = snapshot.mcp_tools[0]
    assert binding.alias == "calc_add" and binding.schema_digest == add["schema_digest"]

    bob = Client(world.url, world.tokens["bob"])
    try:
        session = bob.create_session(world.space_id, agent.agent_id)
        run = bob.ask(session.session_id, "what is 40 + 2?")
        view = _wait_done(bob, session.session_id, run.run_id)
    finally:
        bob.close()
    assert view.status == "completed", view
    assert "42" in str(view.answer)
    assert ("add", {"a": 40, "b": 2}) in world.mcp.state.calls
    raw = b"".join(p.read_bytes() for p in world.platform.home.glob("agentloom.sqlite3*"))
    assert TOKEN.encode() not in raw


def test_update_delete_and_errors(world: World) -> None:
    made = world.call("POST", "/mcp/resources", body={
        "name": "X", "spec": {"transport": "sse", "url": "http://a.example/sse"}})
    rid = made.json()["resource_id"]
    bad = world.call("POST", "/mcp/resources", body={
        "name": "X", "spec": {"transport": "sse"}})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_field"
    stale = world.call("PUT", f"/mcp/resources/{rid}", body={"revision": 9, "name": "Y"})
    assert stale.status_code == 409
    assert stale.json()["error"]["code"] == "mcp_resource_changed"
    ok = world.call("PUT", f"/mcp/resources/{rid}", body={
        "revision": 1, "credential": {"kind": "header", "name": "X-Key", "value": "v1"}})
    assert ok.status_code == 200 and ok.json()["credential_name"] == "X-Key"
    assert "v1" not in ok.text
    assert world.call("DELETE", f"/mcp/resources/{rid}", "bob").status_code == 403
    assert world.call("DELETE", f"/mcp/resources/{rid}").status_code == 204
    assert world.call("GET", f"/mcp/resources/{rid}").status_code == 404
    unknown = world.call("GET", "/mcp/resources/mcp_0123456789abcdef0123")
    assert unknown.json()["error"]["code"] == "mcp_resource_not_found"
    # an unreachable server: discovery answers 502 without the server's body
    down = world.call("POST", "/mcp/resources", body={
        "name": "down", "spec": {"transport": "streamable_http",
                                 "url": "http://127.0.0.1:9/mcp", "timeout_seconds": 2}})
    failed = world.call("POST", f"/mcp/resources/{down.json()['resource_id']}/discover")
    assert failed.status_code == 502 and failed.json()["error"]["code"] == "mcp_server_failed"
    # publishing a draft that names a missing tool names the field
    admin = world.platform.admin
    agent, _ = admin.create_agent(ALICE, world.space_id, "A", {
        "model": {"model": "m"}, "mcp_tools": [{"resource_id": "mcp_0123456789abcdef0123",
                                                "tool": "add"}]})
    from agentloom.platform.errors import Invalid
    with pytest.raises(Invalid) as refused:
        admin.publish(ALICE, world.space_id, agent.agent_id)
    assert refused.value.details["fields"][0]["field"] == "config.mcp_tools.0.resource_id"


def test_a_credential_the_server_echoes_never_reaches_messages_answers_or_history(
        tmp_path: Path) -> None:
    """Issue 17: an MCP resource's sealed credential is given to the redactor like a
    model connection's key: a server (then the model) echoing it puts "[redacted]" in
    the run's answer, GET …/messages, the events and the next question's history."""
    requests: list[ModelRequest] = []  # of the second question (no tool call)
    echo = tool_then_answer("whoami", {})

    def model(snapshot: AgentSnapshot) -> ModelGateway:
        def reply(request: ModelRequest) -> Any:
            if not requests and "and now?" not in json.dumps(request.messages):
                return echo.fn(request)
            requests.append(request)
            return (ScriptedModel.verdict("complete") if request.purpose == "verification"
                    else ScriptedModel.answer("nothing new"))
        return FunctionModel(reply)

    with _world(tmp_path, model) as world:
        rid = world.call("POST", "/mcp/resources", body={
            "name": "Echo", "spec": {"transport": "streamable_http", "url": world.mcp.url},
            "credential": {"kind": "bearer", "value": TOKEN}}).json()["resource_id"]
        admin = world.platform.admin
        agent, _ = admin.create_agent(ALICE, world.space_id, "Echo", {
            "prompt": "You echo.", "model": {"model": "m"},
            "mcp_tools": [{"resource_id": rid, "tool": "whoami"}]})
        admin.publish(ALICE, world.space_id, agent.agent_id)
        alice = Client(world.url, world.tokens["alice"])
        try:
            session = alice.create_session(world.space_id, agent.agent_id).session_id
            first = alice.ask(session, "who am I?")
            view = _wait_done(alice, session, first.run_id)
            assert view.status == "completed", view
            assert "the tool said: Bearer [redacted]" in str(view.answer)
            second = _wait_done(alice, session, alice.ask(session, "and now?").run_id)
            assert second.status == "completed", second
            texts = [alice.request("GET", f"/sessions/{session}/messages").text,
                     alice.events(session, first.run_id).model_dump_json(),
                     json.dumps([r.messages for r in requests], default=str),
                     str(view.answer)]
        finally:
            alice.close()
    assert "Bearer [redacted]" in texts[0] and "Bearer [redacted]" in texts[2]
    assert all(TOKEN not in text for text in texts)
