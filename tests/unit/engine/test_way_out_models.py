"""Ways out of a model call of unknown outcome (issue 9): the request was saved as sent
and the process died before a response was saved. ``send_again`` re-sends it under the
same operation id; ``treat_as_failed`` fails the run (an action) or abandons the
compaction (a summary call). Also: the call-budget block and the replay after a
multi-call compaction that failed part-way."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from support.engine import NO_COMPACTION, Crash, CrashWhen, SideEffects, build_engine, drive

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.context import CompactionFailureMemory, CompactionPolicyBase
from agentloom_runtime.contracts import (
    CompactionPolicy,
    CompactionResult,
    ContextInput,
    ModelCall,
    ModelRequest,
    ModelResponse,
    Verdict,
)
from agentloom_runtime.engine import ExecutionLimits, read_run
from agentloom_runtime.errors import (
    ConfigError,
    ModelError,
    ModelOutcomeUnknown,
    ModelTransportError,
)
from agentloom_runtime.testing import FunctionModel, ScriptedModel

RUN = "r"
MAILS = 6


def sent(purpose: str, *, after_failed_compaction: bool = False
         ) -> Callable[[dict[str, Any]], bool]:
    def when(head: dict[str, Any]) -> bool:
        op = head.get("op")
        if not (op and op["kind"] == "model" and op["phase"] == "sent"
                and op["purpose"] == purpose):
            return False
        memory = head["frames"]["main"].get("compaction_memory") or {}
        return not after_failed_compaction or memory.get("failures", 0) > 0
    return when


def mailer(fail: tuple[int, ...] = ()) -> FunctionModel:
    """Mails u0..u{MAILS-1} one by one, judged from the addresses in the request (also in
    summaries), so compaction and re-sends cannot confuse it. ``fail`` lists the
    compaction calls (1-based, over the model's life) that fail before being sent."""
    def reply(request: ModelRequest) -> ModelResponse:
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        seen = [int(n) for m in request.messages
                for n in re.findall(r"u(\d+)@", str(m.get("content")))]
        if request.purpose == "compaction":
            if purposes(model).count("compaction") in fail:  # this call is recorded
                raise ModelTransportError("connection refused", details={"sent": False})
            return ModelResponse(content="mailed " + ", ".join(
                f"u{n}@example.com" for n in sorted(set(seen))))
        k = max(seen) + 1 if seen else 0
        if k >= MAILS:
            return ScriptedModel.answer(f"mailed {MAILS}")
        return ScriptedModel.call("send_mail", {"to": f"u{k}@example.com"}, id=f"c{k}")

    model = FunctionModel(reply)
    return model


def purposes(model: FunctionModel) -> list[str]:
    return [r.purpose for r in model.requests]


class TwoPartSummary(CompactionPolicyBase):
    """Only ``compact()``: after every 3 tool results, summarise the body in two calls.
    A failed call ends the attempt (recorded in the memory); after a failure it does
    not try again."""

    module_id = "two-part-summary/v1"

    async def compact(self, context: ContextInput, call: ModelCall, *,
                      memory: CompactionFailureMemory | None = None
                      ) -> CompactionResult | None:
        messages = list(context.messages)
        tools = [m for m in messages if m.get("role") == "tool"]
        if len(tools) < 3 or messages[-1].get("role") != "tool":
            return None
        if memory is not None and memory.failures:
            return None
        head, body = messages[:2], messages[2:]
        summary = ""
        for part, chunk in enumerate((body[: len(body) // 2], body[len(body) // 2:]), 1):
            text = "\n".join(str(m.get("content") or m.get("tool_calls")) for m in chunk)
            request = ModelRequest(messages=[{"role": "user", "content": (
                f"Summary so far: {summary}\nPart {part}:\n{text}")}],
                purpose="compaction", instance=context.instance)
            try:
                summary = (await call(request)).content or ""
            except ModelOutcomeUnknown:
                raise
            except ModelError as err:
                if memory is not None:
                    memory.record_failure(f"summary part {part} failed: {err.code}")
                return None
        return CompactionResult(messages=[*head, {"role": "user",
                                                  "content": f"[summary] {summary}"}],
                                summary=summary)


EXPECTED = [f"u{k}@example.com" for k in range(MAILS)]


def head_of(store: InMemoryCheckpointStore) -> dict[str, Any]:
    loaded = store.load_head(RUN)
    assert loaded is not None
    return loaded.body


def call_metadata(store: InMemoryCheckpointStore, op_id: str) -> dict[str, Any]:
    """A model call's saved metadata (op id, attempts): in the assistant record it
    produced, or in its ``ops`` entry."""
    for entry in store.read(RUN, "src:main"):
        call = entry.body.get("call") or {}
        if call.get("op_id") == op_id:
            return dict(call)
    return next(e.body for e in store.read(RUN, "ops") if e.body.get("op_id") == op_id)


async def crashed(when: Callable[[dict[str, Any]], bool], *,
                  policy: CompactionPolicy = NO_COMPACTION, model: Any = None
                  ) -> tuple[InMemoryCheckpointStore, SideEffects]:
    inner, effects = InMemoryCheckpointStore(), SideEffects()
    engine = build_engine(store=CrashWhen(inner, when), model=model or mailer(),
                          tools=effects.tools(), compaction=policy)
    with pytest.raises(Crash):
        await engine.start("mail everyone", run_id=RUN)
        await drive(engine)
    return inner, effects


async def blocked(inner: InMemoryCheckpointStore, effects: SideEffects, model: Any,
                  policy: CompactionPolicy = NO_COMPACTION):
    engine = build_engine(store=inner, model=model, tools=effects.tools(), run_id=RUN,
                          compaction=policy)
    await engine.begin_execution()
    result = await drive(engine)
    assert (result.status, result.error_code) == ("blocked", "model_outcome_unknown")
    message = (engine.error or {})["message"]
    assert "sent again" in message and "agentloom" not in message  # hosts name commands
    return engine


async def test_unknown_action_call_send_again_resends_under_the_same_id() -> None:
    inner, effects = await crashed(sent("action"))
    model = mailer()
    engine = await blocked(inner, effects, model)
    unknown = engine.unknown()
    assert unknown is not None
    assert (unknown.kind, unknown.purpose, unknown.attempts) == ("model", "action", 1)
    assert set(unknown.verdicts) == {"send_again", "treat_as_failed"}
    assert model.requests == [], "blocked: nothing was sent on a guess"
    again = build_engine(store=inner, model=model, tools=effects.tools(), run_id=RUN)
    await again.resolve(Verdict("send_again", by="ops"))
    assert (await drive(again)).status == "completed"
    assert effects.calls == EXPECTED
    assert call_metadata(inner, unknown.operation_id)["attempts"] == 2, \
        "the same operation, sent a second time"
    [verdict] = [e.body for e in inner.read(RUN, "verdicts")]
    assert (verdict["verdict"], verdict["kind"], verdict["by"]) == ("send_again", "model", "ops")


async def test_unknown_action_call_treat_as_failed_fails_the_run_with_a_reason() -> None:
    inner, effects = await crashed(sent("action"))
    model = mailer()
    await blocked(inner, effects, model)
    engine = build_engine(store=inner, model=model, tools=effects.tools(), run_id=RUN)
    await engine.resolve(Verdict("treat_as_failed", by="ops", note="provider outage"))
    assert engine.status == "failed"
    outcome = engine.outcome()
    assert outcome is not None and outcome.status == "failed"
    assert "treated model call" in outcome.reason and "provider outage" in outcome.reason
    assert model.requests == [], "nothing was sent"
    assert (await engine.step()).next == "done"
    summary = read_run(inner, RUN)
    assert summary is not None and summary.status == "failed" and summary.in_flight is None
    assert engine.way_out() == "new_question", "a failed run is over, like a completed one"
    again = build_engine(store=inner, model=model, tools=effects.tools(), run_id=RUN)
    with pytest.raises(ConfigError, match="failed"):
        await again.begin_execution()


@pytest.mark.parametrize("kind", ["ran", "did_not_run", "run_again"])
async def test_a_tool_verdict_on_a_model_call_is_a_config_error(kind: str) -> None:
    inner, effects = await crashed(sent("action"))
    await blocked(inner, effects, mailer())
    engine = build_engine(store=inner, model=mailer(), tools=effects.tools(), run_id=RUN)
    with pytest.raises(ConfigError, match="does not apply"):
        await engine.resolve(Verdict(kind, by="ops"))  # type: ignore[arg-type]
    assert inner.read(RUN, "verdicts") == []


async def test_unknown_summary_call_treat_as_failed_goes_on_without_compaction() -> None:
    inner, effects = await crashed(sent("compaction"), policy=TwoPartSummary())
    model = mailer()
    await blocked(inner, effects, model, TwoPartSummary())
    snaps = len(inner.read(RUN, "snap:main"))
    engine = build_engine(store=inner, model=model, tools=effects.tools(), run_id=RUN,
                          compaction=TwoPartSummary())
    await engine.resolve(Verdict("treat_as_failed", by="ops"))
    assert engine.status == "running"
    first = await engine.step()
    assert first.kind == "action", "the abandoned compaction is not tried again at once"
    assert len(inner.read(RUN, "snap:main")) == snaps, "the view was not replaced"
    memory = head_of(inner)["frames"]["main"]["compaction_memory"]
    assert memory["failures"] == 1 and "operator" in memory["last_reason"]
    assert (await drive(engine)).status == "completed"
    assert effects.calls == EXPECTED


@pytest.mark.parametrize("way", ["resolve", "retry_unknown_models"])
async def test_a_failed_multi_call_compaction_then_an_unknown_action_replays_correctly(
        way: str) -> None:
    """Summary part 1 answered, part 2 failed (the attempt ends its step); the next
    action call is sent and the process dies. Re-sending it must not replay the summary
    call saved in the failed attempt (that was ``ResumeMismatch`` forever)."""
    inner, effects = await crashed(sent("action", after_failed_compaction=True),
                                   policy=TwoPartSummary(), model=mailer(fail=(2,)))
    head = head_of(inner)
    assert head["frames"]["main"]["compaction_memory"]["failures"] == 1
    model = mailer()
    engine = build_engine(store=inner, model=model, tools=effects.tools(), run_id=RUN,
                          compaction=TwoPartSummary())
    if way == "resolve":
        await engine.begin_execution()
        assert (await drive(engine)).error_code == "model_outcome_unknown"
        await engine.resolve(Verdict("send_again", by="ops"))
    else:
        await engine.begin_execution(retry_unknown_models=True)
    result = await drive(engine)
    assert result.status == "completed", engine.error
    assert effects.calls == EXPECTED, "every mail exactly once"
    assert purposes(model)[0] == "action", "the unknown action call was the one re-sent"


async def test_a_policy_implementing_only_compact_works() -> None:
    store, effects, model = InMemoryCheckpointStore(), SideEffects(), mailer()
    engine = build_engine(store=store, model=model, tools=effects.tools(),
                          compaction=TwoPartSummary())
    run_id = await engine.start("mail everyone")
    assert (await drive(engine)).status == "completed"
    assert effects.calls == EXPECTED
    assert purposes(model).count("compaction") >= 2
    snaps = store.read(run_id, "snap:main")
    assert snaps and snaps[0].body["messages"][-1]["content"].startswith("[summary] mailed")
    assert engine.main_view().compacted


async def test_the_call_budget_block_moves_on_with_resume() -> None:
    store, effects, model = InMemoryCheckpointStore(), SideEffects(), mailer()
    limits = ExecutionLimits(max_model_calls=4, max_iterations=64)
    engine = build_engine(store=store, model=model, tools=effects.tools(), limits=limits)
    run_id = await engine.start("mail everyone")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("blocked", "budget_exceeded")
    assert engine.way_out() == "resume" and engine.unknown() is None
    for _ in range(3):  # each execution has a fresh budget of 4 calls
        resumed = build_engine(store=store, model=model, tools=effects.tools(), run_id=run_id,
                               limits=limits)
        await resumed.begin_execution()
        result = await drive(resumed)
        if result.status == "completed":
            break
        assert result.error_code == "budget_exceeded"
    assert result.status == "completed"
    assert effects.calls == EXPECTED


async def test_a_sent_request_without_a_response_blocks_as_unknown_with_resolve_as_way_out(
        ) -> None:
    """Issue 17: a transport error after the request was sent stops the run on the
    unknown outcome itself (way out ``resolve``), not on a transport error whose
    ``resume`` only leads there: one verdict moves it on."""
    lost = [True]

    def reply(request: ModelRequest) -> ModelResponse:
        if lost.pop() if lost else False:
            raise ModelTransportError("the model request was sent but no response was "
                                      "received (ReadError)",
                                      details={"sent": True, "reason": "ReadError"})
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        return ScriptedModel.answer("done")

    store, model = InMemoryCheckpointStore(), FunctionModel(reply)
    engine = build_engine(store=store, model=model)
    await engine.start("answer", run_id=RUN)
    result = await drive(engine)
    assert (result.status, result.error_code) == ("blocked", "model_outcome_unknown")
    assert engine.way_out() == "resolve"
    unknown = engine.unknown()
    assert unknown is not None and unknown.verdicts == ("send_again", "treat_as_failed")
    message = (engine.error or {})["message"]
    assert "was sent but no response was received (ReadError)" in message
    assert f"`agentloom resolve {RUN} --send-again`" in message
    await engine.resolve(Verdict("send_again", by="ops"))
    assert (await drive(engine)).status == "completed"
    assert len(model.requests) == 3  # the request, sent again, and the review
