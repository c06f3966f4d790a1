"""Crash the engine after every durable save point of a representative run (action call,
tool call, plan update, completion review) and resume it in a fresh engine."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.engine import (
    Crash,
    CrashingStore,
    SideEffects,
    drive,
    records,
    representative_engine,
    saved_head,
)

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import RunOutcome, Verdict


def kinds(store: InMemoryCheckpointStore, run_id: str) -> list[str]:
    return [r["kind"] for r in records(store, run_id)]


async def reference() -> tuple[int, RunOutcome | None, dict[str, Any], list[str]]:
    store = CrashingStore(InMemoryCheckpointStore())
    effects = SideEffects()
    engine = representative_engine(store, effects)
    run_id = await engine.start("count the words and mail ops")
    result = await drive(engine)
    assert result.status == "completed"
    assert effects.calls == ["ops@example.com"]
    return (store.commits, engine.outcome(), saved_head(store.inner, run_id),
            kinds(store.inner, run_id))


async def test_reference_run_commits_each_phase() -> None:
    _, outcome, head, saved = await reference()
    assert outcome is not None and outcome.answer == "Counted 3 words and mailed ops."
    assert [s["status"] for s in head["frames"]["main"]["plan"]] == ["completed"] * 2
    assert saved.count("tool_result") == 4


REFERENCE_COMMITS = asyncio.run(reference())[0]


def test_the_sweep_covers_every_commit_of_the_reference_run() -> None:
    assert REFERENCE_COMMITS > 10  # the sweep below crashes after each one of them


@pytest.mark.parametrize("crash_after", range(1, REFERENCE_COMMITS))
async def test_crash_after_every_commit(crash_after: int) -> None:
    _, ref_outcome, ref_head, ref_records = await reference()
    inner = InMemoryCheckpointStore()
    effects = SideEffects()
    engine = representative_engine(CrashingStore(inner, crash_after), effects)
    with pytest.raises(Crash):
        run_id = "run-1"
        await engine.start("count the words and mail ops", run_id=run_id)
        await drive(engine)
    # a new process attaches to the same run
    resumed = representative_engine(inner, effects, run_id)
    await resumed.begin_execution()
    result = await drive(resumed)
    head = saved_head(inner, run_id)
    op = _crashed_operation(inner, run_id)
    if op == ("model", "sent"):
        # a request was sent with no saved response: blocked, never presumed
        assert result.status == "blocked"
        assert result.error_code == "model_outcome_unknown"
        retry = representative_engine(inner, effects, run_id)
        await retry.resolve(Verdict("send_again", by="test"))
        result = await drive(retry)
        head = saved_head(inner, run_id)
    elif op == ("tool", "started"):
        # send_mail may have run: never re-run blindly; the operator says it did not
        assert result.status == "blocked"
        assert result.error_code == "tool_outcome_unknown"
        assert effects.calls == []
        unknown = resumed.unknown()
        assert unknown is not None and unknown.tool == "send_mail"
        assert "ops@example.com" in (unknown.arguments or "")
        retry = representative_engine(inner, effects, run_id)
        await retry.resolve(Verdict("run_again", by="test", note="the mail server shows "
                                    "nothing was sent"))
        result = await drive(retry)
        assert result.status == "completed"
        assert effects.calls == ["ops@example.com"], "re-run exactly once, as asked"
        verdicts = [e.body for e in inner.read(run_id, "verdicts")]
        assert [(v["verdict"], v["by"]) for v in verdicts] == [("run_again", "test")]
        return
    assert result.status == "completed"
    resumed_outcome = representative_engine(inner, effects, run_id).outcome()
    assert resumed_outcome == ref_outcome
    assert head["frames"]["main"]["plan"] == ref_head["frames"]["main"]["plan"]
    assert kinds(inner, run_id) == ref_records
    assert effects.calls == ["ops@example.com"], "a side effect ran twice or never"


def _crashed_operation(store: InMemoryCheckpointStore, run_id: str) -> tuple[str, str] | None:
    """The operation in flight in the history's version right at the crash: recovered
    from the blocked head's error (the head now records the stop)."""
    op = saved_head(store, run_id).get("op")
    return (op["kind"], op["phase"]) if op else None
