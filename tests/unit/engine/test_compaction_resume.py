"""Crash/resume around compaction: summary call sent, result saved, snapshot committed.
Source records are never rewritten; no side effect runs twice."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.engine import (
    COMPACTING,
    MAILED,
    MAILS,
    Crash,
    CrashingStore,
    SideEffects,
    build_engine,
    drive,
    mailing,
    make_snapshot,
    records,
    saved_head,
)

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.testing import FunctionModel

TASK = "mail everyone " + "with care " * 40
EXPECTED = MAILED

# The snapshot's own (budget) compaction policy, as in production.
ENGINE: dict[str, Any] = {"snapshot": make_snapshot(**COMPACTING), "compaction": "default"}


async def reference() -> tuple[CrashingStore, str, Any, SideEffects, FunctionModel]:
    store, effects, model = CrashingStore(InMemoryCheckpointStore()), SideEffects(), \
        FunctionModel(mailing)
    engine = build_engine(store=store, model=model, tools=effects.tools(), **ENGINE)
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
    assert len(records(store.inner, run_id, "tool_result")) == MAILS, \
        "source records are never summarised away"


def test_the_sweep_covers_every_commit_of_the_reference_run() -> None:
    assert REFERENCE_COMMITS > 2 * MAILS  # the sweep below crashes after each one


@pytest.mark.parametrize("crash_after", range(1, REFERENCE_COMMITS))
async def test_crash_anywhere_including_compaction(crash_after: int) -> None:
    inner, effects = InMemoryCheckpointStore(), SideEffects()
    engine = build_engine(store=CrashingStore(inner, crash_after), model=FunctionModel(mailing),
                          tools=effects.tools(), **ENGINE)
    with pytest.raises(Crash):
        await engine.start(TASK, run_id="r")
        await drive(engine)
    resumed = build_engine(store=inner, model=FunctionModel(mailing), tools=effects.tools(),
                           run_id="r", **ENGINE)
    await resumed.begin_execution(retry_unknown_models=True)
    result = await drive(resumed)
    if result.error_code == "tool_outcome_unknown":
        # the crash hit between "started" and the result: never re-run blindly
        assert saved_head(inner, "r")["op"]["kind"] == "tool"
        assert len(effects.calls) == len(set(effects.calls))
        return
    assert result.status == "completed", resumed.error
    assert effects.calls == EXPECTED, "every mail exactly once"
    assert len(records(inner, "r", "tool_result")) == MAILS
