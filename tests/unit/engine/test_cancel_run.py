"""Cancelling a run needs no engine: a run whose modules changed can still be stopped.
The engines here never call the model (``build_engine``'s default fails on any call)."""

from __future__ import annotations

import pytest
from support.engine import SideEffects, build_engine

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.engine import cancel_run, read_run
from agentloom_runtime.errors import CheckpointConflict, ConfigError, ResumeMismatch


async def test_a_run_whose_bindings_changed_can_still_be_cancelled() -> None:
    store = InMemoryCheckpointStore()
    engine = build_engine(store=store, tools=SideEffects().tools())
    run_id = await engine.start("q")
    with pytest.raises(ResumeMismatch):
        build_engine(store=store, tools=SideEffects().tools()[:1], run_id=run_id)
    summary = cancel_run(store, run_id, "the tool it was started with is gone")
    assert (summary.status, summary.way_out) == ("cancelled", "new_question")
    assert summary.error is not None and summary.error["code"] == "run_cancelled"


async def test_a_driver_loses_its_next_commit_after_a_cancel() -> None:
    store = InMemoryCheckpointStore()
    engine = build_engine(store=store, tools=SideEffects().tools())
    run_id = await engine.start("q")
    cancel_run(store, run_id)
    with pytest.raises(CheckpointConflict):
        await engine.step()
    summary = read_run(store, run_id)
    assert summary is not None and summary.status == "cancelled"


async def test_an_ended_or_unknown_run_is_refused() -> None:
    store = InMemoryCheckpointStore()
    engine = build_engine(store=store, tools=SideEffects().tools())
    run_id = await engine.start("q")
    cancel_run(store, run_id)
    with pytest.raises(ConfigError, match="already cancelled"):
        cancel_run(store, run_id)
    with pytest.raises(ConfigError, match="does not exist"):
        cancel_run(store, "nope")
