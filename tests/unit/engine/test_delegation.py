"""Delegation: two children, a crash in the middle of a child, and resume."""

from __future__ import annotations

import asyncio

import pytest
from support.engine import (
    SUBS,
    Crash,
    CrashingStore,
    SideEffects,
    build_engine,
    by_instance,
    drive,
    make_snapshot,
    records,
    saved_head,
)

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.testing import FunctionModel, ScriptedModel

SNAPSHOT = make_snapshot(subagents=SUBS)


async def reference_commits() -> int:
    store = CrashingStore(InMemoryCheckpointStore())
    engine = build_engine(store=store, snapshot=SNAPSHOT, model=FunctionModel(by_instance),
                          tools=SideEffects().tools())
    await engine.start("count then mail")
    assert (await drive(engine)).status == "completed"
    return store.commits


REFERENCE_COMMITS = asyncio.run(reference_commits())


async def test_two_children_complete_and_close_parent_calls() -> None:
    store, effects = InMemoryCheckpointStore(), SideEffects()
    engine = build_engine(store=store, snapshot=SNAPSHOT, model=FunctionModel(by_instance),
                          tools=effects.tools())
    run_id = await engine.start("count then mail")
    result = await drive(engine)
    assert result.status == "completed"
    head = saved_head(store, run_id)
    assert head["delegations"] == 2 and set(head["frames"]) == {"main", "sub-1", "sub-2"}
    results = records(store, run_id, "tool_result")
    assert ['"3 words"' in r["message"]["content"] for r in results] == [True, False]
    assert effects.calls == ["ops@example.com"]
    # child internals stay in the child's records
    assert not any(r["name"] == "count_words" for r in results)


@pytest.mark.parametrize("crash_after", range(1, REFERENCE_COMMITS))
async def test_crash_anywhere_in_a_delegation_resumes_without_a_new_slot(
        crash_after: int) -> None:
    inner, effects = InMemoryCheckpointStore(), SideEffects()
    engine = build_engine(store=CrashingStore(inner, crash_after), snapshot=SNAPSHOT,
                          model=FunctionModel(by_instance), tools=effects.tools())
    with pytest.raises(Crash):
        await engine.start("count then mail", run_id="r")
        await drive(engine)
    resumed = build_engine(store=inner, snapshot=SNAPSHOT, model=FunctionModel(by_instance),
                           tools=effects.tools(), run_id="r")
    await resumed.begin_execution(retry_unknown_models=True)
    result = await drive(resumed)
    head = saved_head(inner, "r")
    if result.status == "blocked":
        assert result.error_code == "tool_outcome_unknown"
        return
    assert result.status == "completed"
    assert head["delegations"] == 2, "resume reused the saved child instance"
    assert effects.calls == ["ops@example.com"]


async def test_delegation_limit_and_unknown_template() -> None:
    model = ScriptedModel([
        ScriptedModel.call("delegate_task", {"subagent_id": "nobody", "task": "x"}, id="d1"),
        ScriptedModel.answer("ok"),
        ScriptedModel.verdict("complete"),
    ])
    engine = build_engine(snapshot=SNAPSHOT, model=model,
                          tools=SideEffects().tools())
    await engine.start("task")
    assert (await drive(engine)).status == "completed"
    assert "subagent_not_found" in model.requests[1].messages[-1]["content"]


async def test_a_child_gets_only_its_templates_tools() -> None:
    seen: dict[str, set[str]] = {}

    def recorder(request: ModelRequest) -> ModelResponse:
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        seen[request.instance] = {t["function"]["name"] for t in request.tools}
        if request.instance == "main" and "d1" not in str(request.messages):
            return ScriptedModel.call("delegate_task", {"subagent_id": "bare",
                                                        "task": "think"}, id="d1")
        return ScriptedModel.answer("done")

    subs = [{"id": "bare", "name": "Bare", "duty": "think only"}]
    engine = build_engine(snapshot=make_snapshot(subagents=subs),
                          model=FunctionModel(recorder), tools=SideEffects().tools())
    await engine.start("delegate")
    assert (await drive(engine)).status == "completed"
    assert seen["sub-1"] == {"update_plan", "read_result"}
    assert {"send_mail", "count_words", "delegate_task"} <= seen["main"]
