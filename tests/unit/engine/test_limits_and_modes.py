from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from support.engine import SideEffects, build_engine, drive, make_snapshot, saved_head

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.completion import EvidenceReviewPolicy
from agentloom_runtime.context import NoCompaction
from agentloom_runtime.contracts import ModelRequest, ModelResponse, RunOutcome
from agentloom_runtime.engine import Engine, ExecutionLimits
from agentloom_runtime.hooks import HookManager, HookRegistry
from agentloom_runtime.strategies import ReactStrategy
from agentloom_runtime.testing import FunctionModel, ScriptedModel
from agentloom_runtime.testing.keyed import KeyedScriptModel
from agentloom_runtime.tool_contracts import ToolContext


def looping_model(n: int) -> KeyedScriptModel:
    return KeyedScriptModel([ScriptedModel.call("count_words", {"text": "x"}, id=f"c{i}")
                             for i in range(n)])


async def test_call_budget_per_execution_and_total_kept_across_resume() -> None:
    store = InMemoryCheckpointStore()
    limits = ExecutionLimits(max_model_calls=5, max_iterations=64)

    engine = build_engine(store=store, model=looping_model(50), tools=SideEffects().tools(),
                          limits=limits)
    run_id = await engine.start("loop")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("blocked", "budget_exceeded")
    head = saved_head(store, run_id)
    assert (head["calls"], head["total_calls"]) == (5, 5)
    resumed = build_engine(store=store, model=looping_model(50), tools=SideEffects().tools(),
                           limits=limits, run_id=run_id)
    await resumed.begin_execution()
    result = await drive(resumed)
    head = saved_head(store, run_id)
    assert result.error_code == "budget_exceeded"
    assert (head["calls"], head["total_calls"], head["execution"]) == (5, 10, 2)


async def test_iteration_limit_per_instance_and_a_resume_gets_a_fresh_budget() -> None:
    store = InMemoryCheckpointStore()

    limits = ExecutionLimits(max_model_calls=96, max_iterations=3)
    engine = build_engine(store=store, model=looping_model(50), tools=SideEffects().tools(),
                          limits=limits)
    run_id = await engine.start("loop")
    kinds = []
    while (result := await engine.step()).next != "done":
        kinds.append(result.kind)
    assert result.error_code == "budget_exceeded"
    assert kinds.count("action") == 3
    assert engine.way_out() == "resume"
    resumed = build_engine(store=store, model=looping_model(50), tools=SideEffects().tools(),
                           limits=limits, run_id=run_id)
    await resumed.begin_execution()
    kinds = []
    while (result := await resumed.step()).next != "done":
        kinds.append(result.kind)
    assert result.error_code == "budget_exceeded"
    assert kinds.count("action") == 3, "the resumed execution had its own 3 iterations"


async def test_plan_mode_offers_only_before_plan_tools_until_a_plan_exists() -> None:
    model = ScriptedModel([
        ScriptedModel.call("send_mail", {"to": "x@example.com"}, id="c1"),
        ScriptedModel.answer("done without a plan"),
        ScriptedModel.call("update_plan", {"steps": [
            {"id": "1", "title": "mail", "status": "completed"}]}, id="c2"),
        ScriptedModel.answer("done"),
        ScriptedModel.verdict("complete"),
    ])
    effects = SideEffects()
    engine = build_engine(snapshot=make_snapshot(mode="plan"), model=model,
                          tools=effects.tools())
    await engine.start("task")
    result = await drive(engine)
    assert result.status == "completed"
    first_tools = {t["function"]["name"] for t in model.requests[0].tools}
    assert "send_mail" not in first_tools and "update_plan" in first_tools
    assert effects.calls == [], "a tool outside before_plan was refused"
    # the candidate without a plan was sent back, not reviewed
    assert [r.purpose for r in model.requests] == ["action"] * 4 + ["verification"]
    later_tools = {t["function"]["name"] for t in model.requests[3].tools}
    assert "send_mail" in later_tools


async def test_review_continue_feeds_back_and_blocked_stops() -> None:
    model = ScriptedModel([
        ScriptedModel.answer("first try"),
        ScriptedModel.verdict("continue", "missing numbers", "count the words"),
        ScriptedModel.answer("second try"),
        ScriptedModel.verdict("blocked", "cannot be done"),
    ])
    engine = build_engine(model=model, tools=SideEffects().tools())
    await engine.start("task")
    result = await drive(engine)
    assert result.status == "blocked"
    feedback = model.requests[2].messages[-1]
    assert feedback["role"] == "user" and "count the words" in feedback["content"]
    assert outcome(engine).reason == "cannot be done"


async def test_supplement_waits_for_a_safe_boundary() -> None:
    model = ScriptedModel([
        ScriptedModel.call("count_words", {"text": "a b"}, id="c1"),
        ScriptedModel.answer("ok"),
        ScriptedModel.verdict("complete"),
    ])
    engine = build_engine(model=model, tools=SideEffects().tools())
    await engine.start("task")
    await engine.step()  # action: a pending tool group now exists
    engine.queue_input("also mention the count")
    result = await drive(engine)
    assert result.status == "completed"
    roles = [m["role"] for m in model.requests[1].messages]
    # the supplement comes after the tool result, never between call and result
    assert roles[-3:] == ["assistant", "tool", "user"]
    assert engine.main_view().counters["user_turns"] == 1


async def test_close_order_each_module_once() -> None:
    closed: list[str] = []

    class S(ReactStrategy):
        async def aclose(self) -> None:
            closed.append("strategy")

    class C(EvidenceReviewPolicy):
        async def aclose(self) -> None:
            closed.append("completion")

    class Shared(NoCompaction, HookManager):
        """One object serving as the compaction policy and the hook manager."""

        module_id = "shared/v1"

        def __init__(self) -> None:
            HookManager.__init__(self, HookRegistry(), [])

        def checkpoint_config(self) -> Any:
            return {}

        async def aclose(self) -> None:
            closed.append("shared")

    class Model(ScriptedModel):
        async def aclose(self) -> None:
            closed.append("model")

    shared = Shared()
    engine = build_engine(model=Model(), strategy=S(), completion_policy=C(),
                          compaction=shared, hooks=shared)
    await engine.close()
    await engine.close()
    assert closed == ["strategy", "completion", "shared", "model"]


async def test_close_cancels_a_step_in_flight_and_waits() -> None:
    started = asyncio.Event()
    cleaned: list[bool] = []

    async def hanging(request: ModelRequest) -> ModelResponse:
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            cleaned.append(True)
        raise AssertionError("not reached: the step is cancelled")

    engine = build_engine(model=FunctionModel(hanging), tools=SideEffects().tools())
    await engine.start("task")
    step = asyncio.create_task(engine.step())
    await started.wait()
    await engine.close()
    assert step.cancelled() and cleaned == [True]


async def test_supplement_after_a_candidate_asks_the_model_again() -> None:
    model = ScriptedModel([
        ScriptedModel.answer("first answer"),
        ScriptedModel.answer("answer with the extra detail"),
        ScriptedModel.verdict("complete"),
    ])
    engine = build_engine(model=model, tools=SideEffects().tools())
    await engine.start("task")
    await engine.step()  # the candidate "first answer"
    engine.queue_input("please add the detail")
    assert (await drive(engine)).status == "completed"
    assert outcome(engine).answer == "answer with the extra detail"
    assert model.requests[1].messages[-1] == {"role": "user",
                                              "content": "please add the detail"}


async def test_a_supplement_posted_during_a_step_does_not_break_it() -> None:
    gate = asyncio.Event()
    effects = SideEffects()
    tools = effects.tools()
    mail = tools[0]

    async def slow_mail(context: ToolContext, arguments: dict[str, Any]) -> Any:
        await gate.wait()
        return await mail.handler(context, arguments)

    store = InMemoryCheckpointStore()
    model = ScriptedModel([
        ScriptedModel.call("send_mail", {"to": "ops@example.com"}, id="m1"),
        ScriptedModel.answer("sent"),
        ScriptedModel.verdict("complete"),
    ])
    engine = build_engine(store=store, model=model,
                          tools=[dataclasses.replace(mail, handler=slow_mail), tools[1]])
    await engine.start("mail ops")
    await engine.step()  # action: send_mail pending
    step = asyncio.create_task(engine.step())  # the tool runs...
    await asyncio.sleep(0.01)
    engine.queue_input("cc the team too")  # ...while the user adds to the task
    gate.set()
    assert (await step).kind == "tool", "the running step committed its result"
    assert (await drive(engine)).status == "completed"
    assert effects.calls == ["ops@example.com"]
    assert any(m == {"role": "user", "content": "cc the team too"}
               for m in model.requests[1].messages)


def outcome(engine: Engine) -> RunOutcome:
    result = engine.outcome()
    assert result is not None, "the run has not ended"
    return result
