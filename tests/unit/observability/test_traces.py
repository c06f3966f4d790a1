"""GenAI-named spans of a real engine run (in-memory span exporter)."""

from __future__ import annotations

import json

import pytest
from support.engine import SideEffects, build_engine

from agentloom.local.runs import drive
from agentloom.observability import Observer

from .conftest import ANSWER, QUESTION, Spans, attrs, snapshot, usage_script

RUN = "run_0190ab12cd34a1b2c3d4"


def observer(spans: Spans, snap, **kw) -> Observer:
    return Observer.for_run(run_id=RUN, session_id="ses_0190ab12cd34a1b2c3d4",
                            space_id="spc_0190ab12cd34a1b2c3d4", snapshot=snap,
                            tracer_provider=spans.provider, **kw)


async def run_observed(spans: Spans, **kw):
    snap = snapshot()
    obs = observer(spans, snap, **kw)
    engine = build_engine(script=usage_script(), tools=SideEffects().tools(), snapshot=snap,
                          emit=obs.emit)
    with obs:
        await engine.start(QUESTION, run_id=RUN)
        result = await drive(engine, observer=obs)
    return engine, result


async def test_names_attributes_and_tree(spans: Spans) -> None:
    engine, result = await run_observed(spans)
    assert result.status == "completed"
    (agent,) = spans.named("invoke_agent")
    assert agent.name == "invoke_agent Memo counter"
    assert dict(agent.attributes or {}) | {} == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "tester",
        "gen_ai.agent.name": "Memo counter", "gen_ai.agent.version": "3",
        "gen_ai.conversation.id": "ses_0190ab12cd34a1b2c3d4",
        "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-test",
        "agentloom.run.id": RUN, "agentloom.space.id": "spc_0190ab12cd34a1b2c3d4"}
    steps = spans.named("agentloom.step")
    chats = spans.named("chat ")
    tools = spans.named("execute_tool ")
    assert all(s.parent is not None and s.parent.span_id == agent.context.span_id
               for s in steps)
    step_ids = {s.context.span_id for s in steps}
    assert all(s.parent is not None and s.parent.span_id in step_ids for s in chats + tools)
    # every model call is a chat span with its own usage; the sum is the engine's
    assert [c.name for c in chats] == ["chat gpt-test"] * 6
    assert [attrs(c)["gen_ai.usage.input_tokens"] for c in chats] == [100, 200, 300,
                                                                          400, 500, 60]
    assert sum(attrs(c)["gen_ai.usage.output_tokens"] for c in chats) == \
        engine.usage().output_tokens == 156
    assert {attrs(c)["gen_ai.operation.name"] for c in chats} == {"chat"}
    assert [attrs(c)["agentloom.model.purpose"] for c in chats] == \
        ["action"] * 5 + ["verification"]
    assert all(attrs(c)["agentloom.usage.cost"] > 0 for c in chats)
    names = [attrs(t)["gen_ai.tool.name"] for t in tools]
    assert names == ["update_plan", "count_words", "send_mail", "update_plan"]
    assert all(attrs(t)["gen_ai.operation.name"] == "execute_tool" and
               attrs(t)["gen_ai.tool.call.id"].startswith(RUN) for t in tools)
    assert not any(attrs(s).get("agentloom.replayed") for s in spans.all())


async def test_no_message_content_in_any_attribute(spans: Spans, caplog) -> None:
    await run_observed(spans)
    assert "observability failed" not in caplog.text
    dumped = json.dumps([dict(s.attributes or {}) | {"name": s.name} for s in spans.all()])
    for text in (QUESTION, ANSWER, "Zanzibar", "ops@example.com", "one two"):
        assert text not in dumped


async def test_failed_tool_is_an_error_span(spans: Spans) -> None:
    from agentloom_runtime.testing import ScriptedModel

    snap = snapshot()
    obs = observer(spans, snap)
    script = [ScriptedModel.call("no_such_tool", {}, id="c1"), ScriptedModel.answer("ok"),
              ScriptedModel.verdict("complete")]
    engine = build_engine(script=script, snapshot=snap, emit=obs.emit)
    with obs:
        await engine.start(QUESTION, run_id=RUN)
        await drive(engine, observer=obs)
    (tool,) = spans.named("execute_tool")
    assert attrs(tool)["agentloom.tool.status"] == "error"
    assert tool.status.status_code.name == "ERROR"


@pytest.mark.parametrize("host", ["embedded", "lambda"])
async def test_a_command_span_covers_dispatch_and_record(spans: Spans, host, tmp_path
                                                         ) -> None:
    from support.engine import command_host

    from agentloom_runtime.testing import ScriptedModel
    from agentloom_runtime.workspace import file_tools

    runner, kw = command_host(tmp_path, RUN)
    snap = snapshot()
    obs = observer(spans, snap, host=host)
    script = [ScriptedModel.call("workspace_command", {"command": "echo hi"}, id="c1"),
              ScriptedModel.answer("ran it"), ScriptedModel.verdict("complete")]
    engine = build_engine(script=script, snapshot=snap, emit=obs.emit, tools=file_tools(),
                          **kw)
    with obs:
        await engine.start(QUESTION, run_id=RUN)
        assert (await drive(engine, runner=runner, observer=obs)).status == "completed"
    tools = spans.named("execute_tool")
    assert runner.ran == ["echo hi"]
    phases = [attrs(t).get("agentloom.tool.phase") for t in tools]
    assert phases == ([None] if host == "embedded" else ["dispatched", "recorded"])
    assert all(attrs(t)["gen_ai.tool.name"] == "workspace_command" for t in tools)
