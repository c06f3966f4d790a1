"""Runs that call tools on a real MCP server (scripted model, the production engine):
an answered call, a crash after the call was sent (unknown outcome → blocked → the
operator's verdict), a trusted read-only tool re-run with ``uncertain=True``, a hanging
tool (failure result, the run goes on), and a server whose schema changed after publish
(refused at the call, and by the tool-catalog check at resume)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from functional.mcp.conftest import Env
from functional.mcp.conftest import tool_then_answer as model
from functional.mcp.servers import Running, change_lookup, restore_lookup, serve
from support.engine import Crash, build_engine, drive

from agentloom.capabilities import RunScope
from agentloom.mcp import McpCapability
from agentloom.mcp.service import run_sync
from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import Verdict
from agentloom_runtime.errors import ResumeMismatch
from agentloom_runtime.snapshot import AgentSnapshot, parse_snapshot
from agentloom_runtime.testing import FunctionModel
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

RUN = "run-1"


@pytest.fixture
def server() -> Iterator[Running]:
    with serve("http") as running:
        yield running


@dataclasses.dataclass
class Agent:
    snapshot: AgentSnapshot
    capability: McpCapability
    space_id: str
    seen: list[bool] = dataclasses.field(default_factory=list)  # ToolContext.uncertain

    def tools(self, crash_after_call: bool = False) -> list[ToolDefinition]:
        defs = self.capability.tools(self.snapshot, RunScope(
            self.space_id, "a", 1, "ses", RUN))

        def wrap(d: ToolDefinition) -> ToolDefinition:
            async def handler(context: ToolContext, arguments: dict[str, Any]) -> Any:
                self.seen.append(context.uncertain)
                value = await d.handler(context, arguments)
                if crash_after_call:
                    raise Crash("the process dies after the call was answered")
                return value
            return dataclasses.replace(d, handler=handler)  # the fingerprint stays
        return [wrap(d) for d in defs]


def publish(env: Env, url: str, tool: str, *, trust: bool = False, **spec: Any) -> Agent:
    resource = env.service.create(env.admin_principal, env.space_id, "srv", {
        "transport": "streamable_http", "url": url, "trust_annotations": trust, **spec})
    capability = McpCapability(env.service)
    pinned = capability.pin(env.space_id, {"mcp_tools": [
        {"resource_id": resource.resource_id, "tool": tool}]})
    snapshot = parse_snapshot({"agent_id": "a", "space_id": env.space_id,
                               "model": {"model": "scripted"}, **pinned})
    return Agent(snapshot, capability, env.space_id)


def engine(agent: Agent, store: InMemoryCheckpointStore, fn: FunctionModel, *,
           attach: bool = False, crash: bool = False) -> Any:
    return build_engine(store=store, model=fn, tools=agent.tools(crash),
                        snapshot=agent.snapshot, run_id=RUN if attach else None)


async def test_a_run_calls_an_mcp_tool_and_completes(env: Env, server: Running) -> None:
    agent = publish(env, server.url, "add")
    binding = agent.snapshot.mcp_tools[0]
    assert binding.alias == "add" and binding.read_only_hint
    assert binding.parameters is not None and binding.schema_digest.startswith("sha256:")
    store = InMemoryCheckpointStore()
    run = engine(agent, store, model("add", {"a": 20, "b": 22}))
    await run.start("add 20 and 22", run_id=RUN)
    result = await drive(run)
    assert result.status == "completed"
    outcome = run.outcome()
    assert outcome is not None and "42" in outcome.answer
    assert server.state.calls == [("add", {"a": 20, "b": 22})]
    definition = agent.tools()[0]
    assert definition.tool_id == f"mcp:{binding.resource_id}:add"
    assert definition.resume_inflight is False  # hints not trusted by this resource


async def test_crash_after_a_side_effecting_call_blocks_until_resolved(
        env: Env, server: Running) -> None:
    agent = publish(env, server.url, "send_mail")
    store = InMemoryCheckpointStore()
    fn = model("send_mail", {"to": "ops@example.com"})
    run = engine(agent, store, fn, crash=True)
    with pytest.raises(Crash):
        await run.start("mail ops", run_id=RUN)
        await drive(run)
    assert server.state.calls == [("send_mail", {"to": "ops@example.com"})]
    resumed = engine(agent, store, fn, attach=True)
    await resumed.begin_execution()
    result = await drive(resumed)
    assert result.status == "blocked" and result.error_code == "tool_outcome_unknown"
    unknown = resumed.unknown()
    assert unknown is not None and unknown.tool == "send_mail"
    assert resumed.way_out() == "resolve"
    assert len(server.state.calls) == 1  # never re-run blindly
    again = engine(agent, store, fn, attach=True)
    await again.resolve(Verdict("ran", by="ops", note="the mail server shows it sent"))
    result = await drive(again)
    assert result.status == "completed"
    assert len(server.state.calls) == 1


@pytest.mark.parametrize("trust", [True, False])
async def test_read_only_tool_reruns_uncertain_only_when_trusted(
        env: Env, server: Running, trust: bool) -> None:
    agent = publish(env, server.url, "add", trust=trust)
    assert agent.tools()[0].resume_inflight is trust
    store = InMemoryCheckpointStore()
    fn = model("add", {"a": 1, "b": 2})
    run = engine(agent, store, fn, crash=True)
    with pytest.raises(Crash):
        await run.start("add", run_id=RUN)
        await drive(run)
    resumed = engine(agent, store, fn, attach=True)
    resumed_seen = agent.seen
    await resumed.begin_execution()
    result = await drive(resumed)
    if trust:
        assert result.status == "completed"
        assert resumed_seen == [False, True]  # the second attempt is told it may repeat
        assert [c[0] for c in server.state.calls] == ["add", "add"]
    else:
        assert result.status == "blocked" and result.error_code == "tool_outcome_unknown"
        assert [c[0] for c in server.state.calls] == ["add"]


async def test_a_hanging_tool_fails_and_the_run_goes_on(env: Env, server: Running) -> None:
    agent = publish(env, server.url, "hang", timeout_seconds=0.5)
    store = InMemoryCheckpointStore()
    run = engine(agent, store, model("hang", {}))
    await run.start("wait", run_id=RUN)
    result = await drive(run)
    assert result.status == "completed"
    outcome = run.outcome()
    assert outcome is not None and "mcp_timeout" in outcome.answer


async def test_changed_schema_blocks_the_call(env: Env, server: Running) -> None:
    agent = publish(env, server.url, "lookup")
    change_lookup(server.server, server.state)
    store = InMemoryCheckpointStore()
    fn = model("lookup", {"key": "k"})
    run = engine(agent, store, fn)
    await run.start("look up k", run_id=RUN)
    result = await drive(run)
    assert result.status == "blocked" and result.error_code == "mcp_schema_changed"
    assert server.state.calls == []  # the call was not sent
    # the way out: while the change is seen, a resume is refused by the catalog check;
    # restore the server, list it again (discovery), resume, and say it did not run
    with pytest.raises(ResumeMismatch):
        engine(agent, store, fn, attach=True)
    restore_lookup(server.server, server.state)
    resource = env.service.resource(env.space_id, agent.snapshot.mcp_tools[0].resource_id)
    assert resource is not None
    run_sync(env.service.list_tools(resource))
    resumed = engine(agent, store, fn, attach=True)
    await resumed.begin_execution()
    result = await drive(resumed)
    assert result.error_code == "tool_outcome_unknown"
    again = engine(agent, store, fn, attach=True)
    await again.resolve(Verdict("run_again", by="ops", note="refused before sending"))
    assert (await drive(again)).status == "completed"
    assert server.state.calls == [("lookup", {"key": "k"})]


async def test_changed_schema_is_refused_at_resume(env: Env, server: Running) -> None:
    agent = publish(env, server.url, "lookup")
    store = InMemoryCheckpointStore()
    fn = model("lookup", {"key": "k"})
    run = engine(agent, store, fn, crash=True)
    with pytest.raises(Crash):
        await run.start("look up k", run_id=RUN)
        await drive(run)
    change_lookup(server.server, server.state)
    resource = env.service.resource(env.space_id, agent.snapshot.mcp_tools[0].resource_id)
    assert resource is not None
    run_sync(env.service.list_tools(resource))  # discovery sees the new schema
    with pytest.raises(ResumeMismatch) as refused:
        resumed = engine(agent, store, fn, attach=True)
        await resumed.begin_execution()
    assert "tool catalog" in refused.value.message and "lookup" in refused.value.message


async def test_a_large_result_is_shown_through_the_reference(env: Env,
                                                             server: Running) -> None:
    agent = publish(env, server.url, "big")
    store = InMemoryCheckpointStore()
    run = engine(agent, store, model("big", {"size": 60_000}))
    await run.start("get a lot", run_id=RUN)
    assert (await drive(run)).status == "completed"
    [shown] = [m for m in run.main_view().messages if m.get("role") == "tool"]
    assert len(shown["content"]) < 30_000 and "read_result" in shown["content"]
    assert "of 60000 characters" in shown["content"]  # stored once, not twice
