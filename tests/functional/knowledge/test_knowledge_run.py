"""Issue 12, knowledge — the must-show run: an embedded platform with the knowledge
capability and a real local embeddings server; a base bound at publish; a scripted
model calls ``knowledge_search``, cites the passage it got, and the run's citations are
read through the HTTP API. Then the recovery rules around the search call: the host dies
while the query's embedding request is out → the resumed run sends it again (an
embedding request is read-only) and completes, with one set of citations."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from unit.knowledge.builders import ALICE, hashing_server

from agentloom.api.app import build_app
from agentloom.api.server import ApiServer
from agentloom.capabilities import Capabilities
from agentloom.knowledge import BaseSpec, KnowledgeCapability
from agentloom.knowledge.wiring import embedded_knowledge
from agentloom.local.embedded import EmbeddedPlatform
from agentloom.platform.errors import Invalid
from agentloom_runtime.contracts import ModelRequest, ModelResponse, ToolCall
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.testing import FunctionModel, ScriptedModel

GUIDE = ("# Refunds\n\nRefunds are paid within 14 days of the return.\n\n"
         "# Shipping\n\nParcels ship from Lisbon on weekdays.\n")


@dataclass
class Script:
    """Searches once, then answers citing the first passage's citation id."""

    requests: list[ModelRequest] = field(default_factory=list)

    def reply(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        tools = [m for m in request.messages if m.get("role") == "tool"]
        if not tools:
            return ModelResponse(tool_calls=(ToolCall("c0", "knowledge_search", json.dumps(
                {"query": "how long do refunds take", "top_k": 2})),))
        cited = re.findall(r"kb-[0-9a-f]{6}-\d+", str(tools[0].get("content")))
        return ModelResponse(content=f"Refunds are paid within 14 days [{cited[0]}].")

    def factory(self, snapshot: AgentSnapshot) -> FunctionModel:
        return FunctionModel(self.reply)


@dataclass
class World:
    platform: EmbeddedPlatform
    capability: KnowledgeCapability
    served: Any
    script: Script
    space_id: str
    base_id: str
    agent_id: str

    def session(self) -> str:
        return self.platform.sessions.create_session(ALICE, self.space_id,
                                                     self.agent_id).session_id

    def stopped(self, session_id: str, run_id: str, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            view = self.platform.sessions.run(ALICE, session_id, run_id)
            if view.status not in ("queued", "running") and not view.driven:
                return view
            time.sleep(0.02)
        raise AssertionError(f"run {run_id} did not stop")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    capability = embedded_knowledge(home, allow_loopback=True)
    script = Script()
    platform = EmbeddedPlatform.open(home, model_factory=script.factory,
                                     capabilities=Capabilities.of([capability]))
    with hashing_server() as served:
        try:
            space = platform.admin.create_space(ALICE, "Team")
            connection = platform.admin.create_model_connection(
                ALICE, space.space_id, "Embeddings", {"provider": "openai_compatible",
                                                      "base_url": served.url,
                                                      "model_id": "chat-model"})
            base = capability.service.create_base(ALICE, space.space_id, BaseSpec(
                "Policies", connection.connection_id, "hash-passage",
                query_model="hash-query", chunk_size=200, chunk_overlap=0))
            capability.service.put_document(ALICE, space.space_id, base.base_id,
                                            "policies.md", GUIDE.encode())
            agent, _ = platform.admin.create_agent(ALICE, space.space_id, "Helper", {
                "prompt": "You answer from the knowledge base.", "model": {"model": "m"},
                "knowledge_bases": [base.base_id]})
            platform.admin.publish(ALICE, space.space_id, agent.agent_id)
            yield World(platform, capability, served, script, space.space_id, base.base_id,
                        agent.agent_id)
        finally:
            served.release.set()
            platform.close()


def test_a_run_cites_a_passage_and_the_api_returns_its_citations(world: World) -> None:
    session_id = world.session()
    run, _ = world.platform.sessions.ask(ALICE, session_id, "Q refunds?")
    view = world.stopped(session_id, run.run_id)
    assert view.status == "completed", view
    query = world.served.requests[-1]
    assert query["model"] == "hash-query" and query["input"] == ["how long do refunds take"]
    tools = {t["function"]["name"] for t in world.script.requests[0].tools}
    assert "knowledge_search" in tools
    system = world.script.requests[0].messages[0]["content"]
    assert "Knowledge bases you can search with knowledge_search" in system
    assert "- Policies" in system

    app = build_app(world.platform.admin, world.platform.sessions, world.platform.tokens)
    server = ApiServer(app, world.platform.sessions).start()
    try:
        token = world.platform.tokens.issue("alice")[1]
        other = world.platform.tokens.issue("mallory")[1]
        url = f"{server.url}/api/v1/sessions/{session_id}/runs/{run.run_id}/citations"
        got = httpx.get(url, headers={"Authorization": f"Bearer {token}"})
        assert got.status_code == 200, got.text
        items = got.json()["items"]
        assert [i["rank"] for i in items] == [1, 2]
        first = items[0]
        assert first["heading"] == "Refunds" and "14 days" in first["text"]
        assert first["document"] == "policies.md" and first["knowledge_base"] == world.base_id
        assert f"[{first['citation_id']}]" in view.answer
        denied = httpx.get(url, headers={"Authorization": f"Bearer {other}"})
        assert denied.status_code == 404
        assert denied.json()["error"]["code"] == "session_not_found"
    finally:
        server.close()


def test_the_host_dies_while_the_query_embedding_is_out_then_resume_resends(
        world: World) -> None:
    session_id = world.session()
    world.served.hold.set()  # the embeddings server holds the query request
    sent = len(world.served.requests)
    run, _ = world.platform.sessions.ask(ALICE, session_id, "Q refunds?")
    deadline = time.monotonic() + 20
    while len(world.served.requests) == sent and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(world.served.requests) == sent + 1
    op = world.capability.service.store.query_op(run.run_id, f"{run.run_id}.main.1")
    assert op is not None and op[0].phase == "sent" and op[0].attempts == 1
    world.platform.launcher.stop(run.run_id)  # the step dies with the request out
    world.stopped(session_id, run.run_id)
    world.served.hold.clear()
    world.served.release.set()

    world.platform.sessions.resume(ALICE, session_id, run.run_id)
    view = world.stopped(session_id, run.run_id)
    assert view.status == "completed", view  # re-sent, not blocked: read-only
    op = world.capability.service.store.query_op(run.run_id, f"{run.run_id}.main.1")
    assert op is not None and op[0].phase == "done" and op[0].attempts == 2
    citations = world.capability.service.store.citations(run.run_id)
    assert [c.rank for c in citations] == [1, 2]


def test_publish_refuses_an_unknown_base(world: World) -> None:
    agent, _ = world.platform.admin.create_agent(ALICE, world.space_id, "Other", {
        "prompt": "p", "model": {"model": "m"}, "knowledge_bases": ["kbs_nope"]})
    with pytest.raises(Invalid) as err:
        world.platform.admin.publish(ALICE, world.space_id, agent.agent_id)
    assert err.value.code == "knowledge_base_not_found"
    assert err.value.details["fields"][0]["field"] == "knowledge_bases[0]"


def test_a_subagent_searches_only_its_templates_bases(world: World) -> None:
    """A template without bases gets a failure from knowledge_search, not main's bases."""
    capability = world.capability
    snapshot = world.platform.admin.versions(ALICE, world.space_id, world.agent_id)[0]
    frozen = AgentSnapshot.model_validate({**snapshot.snapshot, "subagents": [
        {"id": "helper", "name": "Helper", "duty": "help", "tools": ["knowledge_search"]}]})
    from agentloom.capabilities import RunScope
    from agentloom_runtime.tool_contracts import ToolContext

    tool = capability.tools(frozen, RunScope(world.space_id, world.agent_id, 1, "ses", "run_x"))[0]
    import asyncio

    from agentloom_runtime.errors import ToolError

    context = ToolContext(config={}, instance="sub-1", run_id="run_x", call_id="c",
                          request_id="r1", template="helper")
    async def call(ctx: ToolContext) -> Any:
        return await tool.handler(ctx, {"query": "refunds"})

    with pytest.raises(ToolError, match="no knowledge base is bound"):
        asyncio.run(call(context))
    main = ToolContext(config={}, instance="main", run_id="run_x", call_id="c",
                       request_id="r2")
    found = asyncio.run(call(main))
    assert found["passages"][0]["heading"] == "Refunds"


