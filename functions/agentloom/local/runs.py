"""One run driver for both embedded hosts: the CLI (``LocalApp``) and ``agentloom
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

import contextlib

from agentloom.local.driver import CommandRunner, drive
from agentloom.observability import Observer
from agentloom.platform.tracker import RunTracker
from agentloom_runtime.contracts import StepResult
from agentloom_runtime.engine import Engine, RunSummary, read_run
from agentloom_runtime.errors import CheckpointConflict, PersistenceError


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

    async def drive(self, engine: Engine, session: str, *, runner: CommandRunner | None,
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
