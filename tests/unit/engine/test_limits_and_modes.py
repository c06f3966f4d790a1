from __future__ import annotations

from support.engine import SideEffects, drive, make_snapshot

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.context import NoCompaction
from agentloom_runtime.engine import ExecutionLimits, create_engine
from agentloom_runtime.testing import ScriptedModel
from agentloom_runtime.testing.keyed import KeyedScriptModel


def looping_model(n: int) -> KeyedScriptModel:
    return KeyedScriptModel([ScriptedModel.call("count_words", {"text": "x"}, id=f"c{i}")
                             for i in range(n)])


async def test_call_budget_per_execution_and_total_kept_across_resume() -> None:
    store = InMemoryCheckpointStore()
    limits = ExecutionLimits(max_model_calls=5, max_iterations=64)

    def build(run_id=None):
        return create_engine(make_snapshot(), save=store, model_gateway=looping_model(50),
                             tools=SideEffects().tools(), compaction_policy=NoCompaction(),
                             limits=limits, checkpoint=run_id)

    engine = build()
    run_id = await engine.start("loop")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("blocked", "budget_exceeded")
    head = store.load_head(run_id).body
    assert (head["calls"], head["total_calls"]) == (5, 5)
    resumed = build(run_id)
    await resumed.begin_execution()
    result = await drive(resumed)
    head = store.load_head(run_id).body
    assert result.error_code == "budget_exceeded"
    assert (head["calls"], head["total_calls"], head["execution"]) == (5, 10, 2)


async def test_iteration_limit_per_instance_and_a_resume_gets_a_fresh_budget() -> None:
    store = InMemoryCheckpointStore()

    def build(run_id=None):
        return create_engine(make_snapshot(), save=store, model_gateway=looping_model(50),
                             tools=SideEffects().tools(), compaction_policy=NoCompaction(),
                             limits=ExecutionLimits(max_model_calls=96, max_iterations=3),
                             checkpoint=run_id)

    engine = build()
    run_id = await engine.start("loop")
    kinds = []
    while (result := await engine.step()).next != "done":
        kinds.append(result.kind)
    assert result.error_code == "budget_exceeded"
    assert kinds.count("action") == 3
    assert engine.way_out() == "resume"
    resumed = build(run_id)
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
    engine = create_engine(make_snapshot(mode="plan"), model_gateway=model,
                           tools=effects.tools(), compaction_policy=NoCompaction())
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
    engine = create_engine(make_snapshot(), model_gateway=model,
                           tools=SideEffects().tools(), compaction_policy=NoCompaction())
    await engine.start("task")
    result = await drive(engine)
    assert result.status == "blocked"
    feedback = model.requests[2].messages[-1]
    assert feedback["role"] == "user" and "count the words" in feedback["content"]
    assert engine.outcome().reason == "cannot be done"


async def test_supplement_waits_for_a_safe_boundary() -> None:
    model = ScriptedModel([
        ScriptedModel.call("count_words", {"text": "a b"}, id="c1"),
        ScriptedModel.answer("ok"),
        ScriptedModel.verdict("complete"),
    ])
    engine = create_engine(make_snapshot(), model_gateway=model,
                           tools=SideEffects().tools(), compaction_policy=NoCompaction())
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

    class Closing:
        def __init__(self, name: str, module_id: str) -> None:
            self.name, self.module_id = name, module_id

        def checkpoint_config(self):
            return {}

        async def aclose(self):
            closed.append(self.name)

    from agentloom_runtime.completion import EvidenceReviewPolicy
    from agentloom_runtime.strategies import ReactStrategy

    class S(ReactStrategy, Closing):
        pass

    class C(EvidenceReviewPolicy, Closing):
        pass

    model = ScriptedModel()
    shared = Closing("shared", "shared/v1")
    strategy = S("strategy", "react/v1")
    completion = C("completion", "evidence-review/v1")

    async def model_close():
        closed.append("model")

    model.aclose = model_close  # type: ignore[method-assign]
    engine = create_engine(make_snapshot(), model_gateway=model, strategy=strategy,
                           completion_policy=completion, compaction_policy=shared,
                           hooks=shared)
    await engine.close()
    await engine.close()
    assert closed == ["strategy", "completion", "shared", "model"]


async def test_close_cancels_a_step_in_flight_and_waits() -> None:
    import asyncio

    started = asyncio.Event()
    cleaned: list[bool] = []

    class Hanging(KeyedScriptModel):
        async def invoke(self, request):
            started.set()
            try:
                await asyncio.sleep(60)
            finally:
                cleaned.append(True)

    engine = create_engine(make_snapshot(), model_gateway=Hanging([]),
                           tools=SideEffects().tools(), compaction_policy=NoCompaction())
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
    engine = create_engine(make_snapshot(), model_gateway=model,
                           tools=SideEffects().tools(), compaction_policy=NoCompaction())
    await engine.start("task")
    await engine.step()  # the candidate "first answer"
    engine.queue_input("please add the detail")
    assert (await drive(engine)).status == "completed"
    assert engine.outcome().answer == "answer with the extra detail"
    assert model.requests[1].messages[-1] == {"role": "user",
                                              "content": "please add the detail"}


async def test_a_supplement_posted_during_a_step_does_not_break_it() -> None:
    import asyncio

    from agentloom_runtime.checkpoint import InMemoryCheckpointStore

    gate = asyncio.Event()
    effects = SideEffects()
    tools = effects.tools()
    mail = tools[0]

    async def slow_mail(context, arguments):
        await gate.wait()
        return await mail.handler(context, arguments)

    import dataclasses

    store = InMemoryCheckpointStore()
    model = ScriptedModel([
        ScriptedModel.call("send_mail", {"to": "ops@example.com"}, id="m1"),
        ScriptedModel.answer("sent"),
        ScriptedModel.verdict("complete"),
    ])
    engine = create_engine(make_snapshot(), save=store, model_gateway=model,
                           tools=[dataclasses.replace(mail, handler=slow_mail), tools[1]],
                           compaction_policy=NoCompaction())
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
