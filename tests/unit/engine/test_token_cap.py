"""The run's token cap (issue 17): checked before the call that could cross it (its
estimated input plus its output limit), never after; a default cap in every version,
over every execution, so resuming cannot spend without end; a run started before the
default resumes under it."""

from __future__ import annotations

import pytest
from support.engine import (
    SMALL_OUTPUT,
    SideEffects,
    build_engine,
    drive,
    estimated,
    make_snapshot,
    saved_head,
)

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.context.estimators import Utf8BytesEstimator
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.engine import ExecutionLimits
from agentloom_runtime.errors import ResumeMismatch
from agentloom_runtime.snapshot import DEFAULT_RUN_TOKENS, parse_snapshot
from agentloom_runtime.testing import ScriptedModel


def counting(request: ModelRequest) -> ModelResponse:
    """Never done: every action counts words again (a fresh call id each time)."""
    step = sum(1 for m in request.messages if m.get("role") == "assistant")
    return ScriptedModel.call("count_words", {"text": "a b c"}, id=f"c{step}")


def used_by(request: ModelRequest, completion: int = 10) -> int:
    return Utf8BytesEstimator().estimate(request.messages, request.tools) + completion


async def test_a_token_cap_stops_before_the_call_that_would_exceed_it() -> None:
    """The issue's case: a cap of 130 where each call uses 120 was left at 240 — the
    second call was sent because 120 < 130. Now the second call is checked with its
    estimated input and output limit and is not sent."""
    model = {"model": "m", "max_output_tokens": SMALL_OUTPUT}
    reference = estimated(counting)
    engine = build_engine(snapshot=make_snapshot(model=model), model=reference,
                          tools=SideEffects().tools())
    await engine.start("count the words")
    await engine.step()
    first = used_by(reference.requests[0])
    cap = first + first // 12 + SMALL_OUTPUT  # 130 for a call of 120 (plus its reserve)

    capped = estimated(counting)
    engine = build_engine(snapshot=make_snapshot(model=model, limits={"max_tokens": cap}),
                          model=capped, tools=SideEffects().tools())
    await engine.start("count the words")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("blocked", "budget_exceeded")
    assert len(capped.requests) == 1, "the call that would cross the cap is not sent"
    assert engine.usage().total_tokens == first <= cap
    assert engine.way_out() == "raise_budget"
    assert engine.error is not None
    message = engine.error["message"]
    assert "the next action call was not sent" in message
    assert f"tokens: {first:,} used of {cap:,}" in message
    assert f"+ {SMALL_OUTPUT:,} output limit" in message and "max_tokens of at least" \
        in message


async def test_the_default_token_cap_holds_across_resumes() -> None:
    """A version that sets no cap still has one; each resume starts the call budget
    again, but the run's tokens add up over every execution until the cap blocks it
    with the way out of a raised budget — resuming cannot spend without end."""
    snapshot = make_snapshot(limits={"max_model_calls": 4})
    assert snapshot.limits.max_tokens == DEFAULT_RUN_TOKENS
    model, store = estimated(counting), InMemoryCheckpointStore()
    engine = build_engine(store=store, snapshot=snapshot, model=model,
                          tools=SideEffects().tools())
    run_id = await engine.start("count the words of " + "a long text " * 20_000)
    executions = 1
    while (await drive(engine)).error_code == "budget_exceeded" \
            and engine.way_out() == "resume" and executions < 40:
        await engine.begin_execution()  # the model-call budget starts again
        executions += 1
    assert engine.way_out() == "raise_budget", engine.error
    assert executions > 2, "the cap spans executions"
    used = engine.usage().total_tokens
    assert used <= DEFAULT_RUN_TOKENS
    assert used == sum(used_by(r) for r in model.requests)
    assert saved_head(store, run_id)["execution"] == executions

    made = len(model.requests)
    await engine.begin_execution()  # a plain resume blocks again without a call
    assert (await drive(engine)).error_code == "budget_exceeded"
    assert engine.way_out() == "raise_budget" and len(model.requests) == made


async def test_a_run_started_before_the_default_cap_resumes_under_it() -> None:
    """Its saved limits have no max_tokens (the old bindings): it attaches with the
    default cap instead of a ResumeMismatch; any other changed limit still refuses."""
    store, snapshot = InMemoryCheckpointStore(), make_snapshot()
    old = ExecutionLimits(max_tokens=None)
    assert "max_tokens" not in old.to_dict()
    engine = build_engine(store=store, snapshot=snapshot, limits=old,
                          script=[ScriptedModel.answer("42")])
    run_id = await engine.start("Q answer")
    assert engine.usage().max_tokens is None
    await engine.step()

    resumed = build_engine(store=store, snapshot=snapshot, run_id=run_id,
                           script=[ScriptedModel.verdict("complete")])
    assert resumed.usage().max_tokens == DEFAULT_RUN_TOKENS
    assert (await drive(resumed)).status == "completed"

    with pytest.raises(ResumeMismatch, match=r"limits: the limits differ \(max_iterations\)"):
        build_engine(store=store, snapshot=make_snapshot(limits={"max_iterations": 5}),
                     run_id=run_id)


def test_a_version_without_a_token_cap_gets_the_default_on_load() -> None:
    base = {"agent_id": "a", "model": {"model": "m"}}
    assert parse_snapshot(base).limits.max_tokens == DEFAULT_RUN_TOKENS
    stored = {**base, "limits": {"max_model_calls": 96, "max_tokens": None,
                                 "max_cost": None}}  # as versions were published before
    assert parse_snapshot(stored).limits.max_tokens == DEFAULT_RUN_TOKENS
    assert parse_snapshot({**base, "limits": {"max_tokens": 500}}).limits.max_tokens == 500
    assert parse_snapshot(base).model_dump()["limits"]["max_tokens"] == DEFAULT_RUN_TOKENS
