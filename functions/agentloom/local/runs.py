"""The local driver — a loop of ``Engine.step()`` until the run is done (in AWS, Step
Functions plays this role, one Lambda invocation per step): commands go to a
``StepCommandRunner`` and their outcome into the next step; an ``observer``
(``agentloom.observability.Observer``) wraps each step (its span, duration and usage).

One run driver for both embedded hosts: the CLI (``LocalApp``) and ``agentloom
serve`` (``LocalRunLauncher``).

Both keep a session's records in the platform store on the home's SQLite file, written
in each step's own checkpoint commit by the store's companion (``SessionCommits``): a
crash leaves a run's head and its session records together or neither, and nothing is
synced after a step. What a drive does, in order:

1. the session's lease is taken before (``agentloom.platform.lease``: by the session
   service for ``serve``, by ``LocalApp`` for the CLI) and given back by ``stopped``
   with the run's status;
2. a new question's start is the run host's (``RunHost.begin``: the run's history from
   the platform stream, then the engine's first commit);
3. ``drive``: the run marked running on the platform, the engine's main view offered to
   the completing commit as the session's reusable view (``SessionCommits.watch``), then
   ``Engine.step()`` until done. A step lost to a concurrent stop (a cancel) ends the
   drive with the stopped run's status.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from agentloom.observability import Observer
from agentloom.platform.tracker import RunTracker
from agentloom_runtime.contracts import StepCommandRunner, StepResult
from agentloom_runtime.engine import Engine, RunSummary, read_run
from agentloom_runtime.errors import CheckpointConflict, PersistenceError


class StepWatch(Protocol):
    def finished(self, result: StepResult) -> StepResult: ...


class StepObserver(Protocol):
    def step(self, engine: Engine) -> AbstractContextManager[StepWatch]: ...


class _Unwatched:
    def finished(self, result: StepResult) -> StepResult:
        return result


async def drive(engine: Engine, *, runner: StepCommandRunner | None = None, pause: float = 0.0,
                on_step: Callable[[StepResult], Awaitable[None] | None] | None = None,
                max_steps: int = 100_000,
                observer: StepObserver | None = None) -> StepResult:
    """Step until done. ``pause`` waits between steps (demos: time to interrupt)."""
    command_result: dict[str, Any] | None = None
    for _ in range(max_steps):
        watching = observer.step(engine) if observer else nullcontext(_Unwatched())
        with watching as watch:
            result = watch.finished(await engine.step(command_result=command_result))
        command_result = None
        if on_step is not None:
            maybe = on_step(result)
            if maybe is not None:
                await maybe
        if result.next == "done":
            return result
        if result.next == "command":
            command_result = await _run_command(engine, runner, result)
        if pause:
            await asyncio.sleep(pause)
    raise RuntimeError(f"the run did not finish within {max_steps} steps")


async def _run_command(engine: Engine, runner: StepCommandRunner | None,
                       result: StepResult) -> dict[str, Any]:
    if runner is None:
        return {"exit_code": None, "error": {"code": "sandbox_unavailable",
                                             "message": "no command sandbox is configured"}}
    return await runner.run(engine.command_spec(), result.instance)


def stopped_step(summary: RunSummary) -> StepResult:
    """A stopped run as the driver's last step reports it."""
    return StepResult(run_id=summary.run_id, next="done", status=summary.status,
                      instance="main", kind="none", version=summary.version,
                      error_code=summary.error["code"] if summary.error else None)


class RunDriver:
    """Watch and drive over a checkpoint store that has the tracker's
    ``SessionCommits`` attached."""

    def __init__(self, tracker: RunTracker) -> None:
        self.tracker = tracker
        self.checkpoints = tracker.checkpoints

    def stopped(self, session: str, run_id: str) -> None:
        """The run's platform status once its driver let go (``interrupted`` when it is
        still running); a store failure here never hides the run's own outcome."""
        with contextlib.suppress(PersistenceError):
            self.tracker.stopped(session, run_id)

    async def drive(self, engine: Engine, session: str, *, runner: StepCommandRunner | None,
                    pause: float = 0.0) -> StepResult:
        run_id = engine.run_id
        self.tracker.started(session, run_id)
        commits = self.tracker.commits
        if commits is not None:
            commits.watch(run_id, view=engine.main_view)
        observer = Observer.of(engine)
        try:
            return await drive(engine, runner=runner, pause=pause, observer=observer)
        except CheckpointConflict:
            summary = read_run(self.checkpoints, run_id)
            if summary is None or summary.status == "running":
                raise
            return stopped_step(summary)  # stopped by someone else: this step lost
        finally:
            if commits is not None:
                commits.unwatch(run_id)
            if observer is not None:
                observer.close()
