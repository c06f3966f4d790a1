"""The context never wedges a run (issue 17): a compaction that keeps failing over the
hard budget backs off and blocks with its reason instead of spending the call budget on
every execution; a task longer than the head's preview is kept whole by compaction, in
the main instance and in a sub-agent."""

from __future__ import annotations

from typing import Any

from support.engine import (
    COMPACTING,
    MAILED,
    SideEffects,
    build_engine,
    drive,
    mailing,
    make_snapshot,
    saved_head,
)

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.testing import FunctionModel, ScriptedModel
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

LONG_TASK = "mail everyone on the list, " + "with care and in order " * 40  # > 400 chars
BIG_RESULT = "word " * 1_900  # over COMPACTING's effective budget (8,424) on its own


async def _dump(context: ToolContext, arguments: dict[str, Any]) -> Any:
    return BIG_RESULT


DUMP = ToolDefinition(name="dump", description="a large output",
                      parameters={"type": "object", "additionalProperties": False},
                      handler=_dump, implementation_id="dump/v1", read_only=True)


class Summaries:
    """One dump call, then an answer; summary calls fail (a tool call is no summary)
    until ``healed``."""

    def __init__(self) -> None:
        self.healed = False

    def __call__(self, request: ModelRequest) -> ModelResponse:
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        if request.purpose == "compaction":
            return (ModelResponse(content="The dump returned many words.") if self.healed
                    else ScriptedModel.call("dump", {}, id="s1"))
        if any(m.get("role") == "tool" or "many words" in str(m.get("content"))
               for m in request.messages):
            return ScriptedModel.answer("done")
        return ScriptedModel.call("dump", {}, id="d1")


def purposes(model: FunctionModel) -> list[str]:
    return [r.purpose for r in model.requests]


async def test_a_compaction_that_keeps_failing_over_the_hard_budget_blocks_early_with_its_reason(
        ) -> None:
    """Before: 95 of 96 calls were summaries in the first execution and 96 more on every
    resume (the backoff was skipped over the hard budget), then ``the run used its 96
    model calls``. Now one attempt per execution, a block naming the reason, and a
    resume that really moves the run on once the summaries work."""
    store, summaries = InMemoryCheckpointStore(), Summaries()
    engine_kw: dict[str, Any] = {"store": store, "tools": [DUMP],
                                 "snapshot": make_snapshot(**COMPACTING),
                                 "compaction": "default"}
    model = FunctionModel(summaries)
    engine = build_engine(model=model, **engine_kw)
    run_id = await engine.start("dump it")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("blocked", "budget_exceeded")
    assert purposes(model) == ["action", "compaction"], "one attempt, then the block"
    message = engine.error["message"] if engine.error else ""
    assert "over the effective input budget 8424" in message
    assert "returned no summary" in message, "the block names the compaction's reason"
    assert "A resume makes one more attempt" in message and "agentloom" not in message
    assert engine.way_out() == "resume"

    again = FunctionModel(summaries)
    resumed = build_engine(model=again, run_id=run_id, **engine_kw)
    await resumed.begin_execution()
    assert (await drive(resumed)).error_code == "budget_exceeded"
    assert purposes(again) == ["compaction"], "a resume makes one more attempt, no more"
    memory = saved_head(store, run_id)["frames"]["main"]["compaction_memory"]
    assert memory["failures"] == 2

    summaries.healed = True
    healed = FunctionModel(summaries)
    finished = build_engine(model=healed, run_id=run_id, **engine_kw)
    await finished.begin_execution()
    assert (await drive(finished)).status == "completed", finished.error
    assert purposes(healed)[0] == "compaction" and store.read(run_id, "snap:main")


async def test_a_view_over_the_hard_budget_that_cannot_be_compacted_blocks_for_a_new_question(
        ) -> None:
    """What must stay (here the question itself) fills the budget: no summary can help,
    so the run stops at once with ``ContextOverBudget``, whose way out is a new question
    (a resume would stop the same way; before, the message said "resume")."""
    model = FunctionModel(Summaries())
    engine = build_engine(model=model, snapshot=make_snapshot(**COMPACTING),
                          compaction="default")
    await engine.start("a long question " * 700)
    result = await drive(engine)
    assert (result.status, result.error_code) == ("blocked", "budget_exceeded")
    assert model.requests == [], "nothing was sent"
    assert engine.error is not None and engine.error["type"] == "ContextOverBudget"
    assert "leave no room" in engine.error["message"]
    assert engine.way_out() == "new_question"


def shows_task(request: ModelRequest, task: str) -> bool:
    return any(m.get("role") == "user" and m.get("content") == task
               for m in request.messages)


async def test_a_task_longer_than_the_head_preview_survives_compaction() -> None:
    """The head keeps a 400-character preview of a long task; compaction used to match
    the preview against the view, found no task message and summarised the task away."""
    store, effects = InMemoryCheckpointStore(), SideEffects()
    model = FunctionModel(mailing)
    engine = build_engine(store=store, model=model, tools=effects.tools(),
                          snapshot=make_snapshot(**COMPACTING), compaction="default")
    run_id = await engine.start(LONG_TASK)
    assert (await drive(engine)).status == "completed", engine.error
    assert effects.calls == MAILED
    assert store.read(run_id, "snap:main"), "the view was compacted"
    actions = [r for r in model.requests if r.purpose == "action"]
    assert all(shows_task(r, LONG_TASK) for r in actions), "every action sees the task"
    summaries = [r for r in model.requests if r.purpose == "compaction"]
    assert summaries and all("Current task:\nmail everyone" in r.messages[1]["content"]
                             for r in summaries)


def delegating(request: ModelRequest) -> ModelResponse:
    """Main delegates the mailing with a long task; the child mails (``mailing``)."""
    if request.instance == "main" and request.purpose == "action":
        if any(m.get("role") == "tool" for m in request.messages):
            return ScriptedModel.answer("the mailer finished")
        return ScriptedModel.call("delegate_task", {"subagent_id": "mailer",
                                                    "task": LONG_TASK}, id="d1")
    return mailing(request)


async def test_a_delegated_task_longer_than_the_head_preview_survives_compaction() -> None:
    store, effects = InMemoryCheckpointStore(), SideEffects()
    model = FunctionModel(delegating)
    snapshot = make_snapshot(**COMPACTING, subagents=[
        {"id": "mailer", "name": "Mailer", "duty": "send mail", "tools": ["send_mail"]}])
    engine = build_engine(store=store, model=model, tools=effects.tools(),
                          snapshot=snapshot, compaction="default")
    run_id = await engine.start("have the mailer mail everyone")
    assert (await drive(engine)).status == "completed", engine.error
    assert effects.calls == MAILED
    assert store.read(run_id, "snap:sub-1"), "the child's view was compacted"
    child = [r for r in model.requests if r.instance == "sub-1" and r.purpose == "action"]
    assert child and all(shows_task(r, LONG_TASK) for r in child)
