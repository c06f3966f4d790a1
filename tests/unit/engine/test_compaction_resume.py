"""Crash/resume around compaction: summary call sent, result saved, snapshot committed.
Source records are never rewritten; no side effect runs twice."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from support.engine import (
    Crash,
    CrashingStore,
    SideEffects,
    build_engine,
    drive,
    make_snapshot,
    records,
    saved_head,
)

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.engine import Engine
from agentloom_runtime.testing import FunctionModel, ScriptedModel

ROUNDS = 14
TASK = "mail everyone " + "with care " * 40
SNAPSHOT = make_snapshot(model={"model": "m", "context_window": 9000,
                                "max_output_tokens": 512, "safety_margin_tokens": 64},
                         context_policy={"context_ratio": 0.5, "target_ratio": 0.3})
EXPECTED = [f"user{k}@example.com" for k in range(ROUNDS)]


def mailer(request: ModelRequest) -> ModelResponse:
    """Deterministic from the request's messages, so compaction cannot confuse it."""
    if request.purpose == "verification":
        return ScriptedModel.verdict("complete")
    sent = [int(n) for m in request.messages
            for n in re.findall(r"user(\d+)@", str(m.get("content")))]
    if request.purpose == "compaction":
        return ModelResponse(content=f"Mails sent so far: user0 .. user{max(sent)}@example.com.")
    k = max(sent) + 1 if sent else 0
    if k >= ROUNDS:
        return ScriptedModel.answer(f"sent {ROUNDS} mails")
    return ScriptedModel.call("send_mail", {"to": f"user{k}@example.com"}, id=f"c{k}")


def build(store: Any, effects: SideEffects, run_id: str | None = None,
          model: FunctionModel | None = None) -> Engine:
    """The snapshot's own (budget) compaction policy, as in production."""
    return build_engine(store=store, snapshot=SNAPSHOT, model=model or FunctionModel(mailer),
                        tools=effects.tools(), run_id=run_id, compaction="default")


async def reference() -> tuple[CrashingStore, str, Any, SideEffects, FunctionModel]:
    store, effects, model = CrashingStore(InMemoryCheckpointStore()), SideEffects(), \
        FunctionModel(mailer)
    engine = build(store, effects, model=model)
    run_id = await engine.start(TASK)
    result = await drive(engine)
    return store, run_id, result, effects, model


REFERENCE_COMMITS = asyncio.run(reference())[0].commits


async def test_reference_compacts_and_keeps_sources() -> None:
    store, run_id, result, effects, model = await reference()
    assert result.status == "completed"
    assert effects.calls == EXPECTED
    assert "compaction" in [r.purpose for r in model.requests]
    snaps = store.inner.read(run_id, "snap:main")
    assert snaps, "the view was compacted"
    metrics = snaps[0].body["metrics"]
    assert metrics["estimate_after"] < metrics["estimate_before"]
    assert len(records(store.inner, run_id, "tool_result")) == ROUNDS, \
        "source records are never summarised away"


def test_the_sweep_covers_every_commit_of_the_reference_run() -> None:
    assert REFERENCE_COMMITS > 2 * ROUNDS  # the sweep below crashes after each one


@pytest.mark.parametrize("crash_after", range(1, REFERENCE_COMMITS))
async def test_crash_anywhere_including_compaction(crash_after: int) -> None:
    inner, effects = InMemoryCheckpointStore(), SideEffects()
    engine = build(CrashingStore(inner, crash_after), effects)
    with pytest.raises(Crash):
        await engine.start(TASK, run_id="r")
        await drive(engine)
    resumed = build(inner, effects, "r")
    await resumed.begin_execution(retry_unknown_models=True)
    result = await drive(resumed)
    if result.error_code == "tool_outcome_unknown":
        # the crash hit between "started" and the result: never re-run blindly
        assert saved_head(inner, "r")["op"]["kind"] == "tool"
        assert len(effects.calls) == len(set(effects.calls))
        return
    assert result.status == "completed", resumed.error
    assert effects.calls == EXPECTED, "every mail exactly once"
    assert len(records(inner, "r", "tool_result")) == ROUNDS
