"""How this machine drives runs. The local driver — a loop of ``Engine.step()`` until
the run is done (in AWS, Step Functions plays this role, one Lambda invocation per
step): commands go to a ``StepCommandRunner`` and their outcome into the next step; an
``observer`` (``agentloom.observability.Observer``) wraps each step (its span, duration
and usage).

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

``serve``'s launcher is here too: ``LocalRunLauncher`` owns one background thread with
its own event loop; each job is a task on it, driven by ``LocalDriving`` with the engine
the run host assembles (``agentloom.platform.host``) and the run driver above. ``stop``
cancels the task (an in-flight model call is abandoned, an in-flight command's sandbox
killed) and waits for its driver to let go. ``close`` stops every task: their runs stay
resumable (``interrupted``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from agentloom.observability import Observer
from agentloom.platform.domain import RunState
from agentloom.platform.errors import Conflict
from agentloom.platform.host import RunHost, scope_of
from agentloom.platform.launcher import RunJob
from agentloom.platform.lease import Driver, this_process
from agentloom.platform.tracker import RunTracker
from agentloom_runtime.contracts import StepCommandRunner, StepResult
from agentloom_runtime.engine import Engine, RunSummary, read_run
from agentloom_runtime.errors import AgentLoomError, CheckpointConflict, PersistenceError


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


# -- serve's launcher: a worker thread whose event loop drives the jobs ---------------

log = logging.getLogger(__name__)


class LocalDriving:
    """Drives jobs on this machine: the host's engine, the steps (``RunDriver``, the
    CLI's driver too)."""

    def __init__(self, host: RunHost) -> None:
        self.host = host
        self.tracker = host.tracker
        self.driver = RunDriver(host.tracker)

    async def execute(self, job: RunJob) -> None:
        """Drive the job's run (the session service took its lease, naming this process):
        a new question starts from the session's history, a resume begins a new
        execution, a continue drives on."""
        engine, workspaces = self.host.engine(scope_of(job.run), job.snapshot,
                                              attach=job.kind != "ask")
        try:
            await self.host.begin(engine, job)
            await self.driver.drive(engine, job.run.session_id, runner=workspaces.runner())
        finally:
            await engine.close()


class LocalRunLauncher:
    """One worker thread, one event loop, a task per driven run."""

    def __init__(self, host: RunHost) -> None:
        self.jobs = LocalDriving(host)
        self.tracker = host.tracker
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name="agentloom-run-worker", daemon=True)
        self._thread.start()
        self._lock = threading.Lock()
        self._driving: set[str] = set()
        self._tasks: dict[str, asyncio.Task[None]] = {}  # touched on the loop only
        self._closing = False
        self._holder = this_process()

    def launch(self, job: RunJob) -> None:
        run_id = job.run.run_id
        with self._lock:
            if self._closing:
                raise Conflict("the server is stopping", code="server_stopping")
            if run_id in self._driving:
                raise Conflict(f"run {run_id} is being driven", code="run_running",
                               details={"run_id": run_id})
            self._driving.add(run_id)
        # call_soon_threadsafe keeps order: a later stop() finds the task
        self._loop.call_soon_threadsafe(self._start, job)

    def _start(self, job: RunJob) -> None:
        self._tasks[job.run.run_id] = self._loop.create_task(self._run(job))

    async def _run(self, job: RunJob) -> None:
        run = job.run
        absent: tuple[RunState, dict[str, str]] | None = None
        try:
            await self.jobs.execute(job)
        except asyncio.CancelledError:
            absent = ("failed", {"code": "server_stopped", "message": "the server stopped "
                                 "before the run started"}) if self._closing else (
                "cancelled", {"code": "run_cancelled", "message": "cancelled before it "
                              "started"})
        except AgentLoomError as err:
            log.warning("run %s: %s (%s)", run.run_id, err.code, err.message)
            absent = ("failed", {"code": err.code, "message": err.message})
        except Exception:
            log.exception("run %s: the driver failed", run.run_id)
            absent = ("failed", {"code": "driver_failed",
                                 "message": "the run's driver failed; see the server log"})
        finally:
            self._tasks.pop(run.run_id, None)
            try:
                self.tracker.stopped(run.session_id, run.run_id, absent=absent)
            finally:
                with self._lock:
                    self._driving.discard(run.run_id)

    def stop(self, run_id: str, *, timeout: float = 30.0) -> bool:
        if not self.driving(run_id):
            return False
        future = asyncio.run_coroutine_threadsafe(self._stop(run_id), self._loop)
        return future.result(timeout)

    async def _stop(self, run_id: str) -> bool:
        task = self._tasks.get(run_id)
        if task is None:
            return False
        task.cancel()
        await asyncio.wait({task})
        return True

    def holder(self) -> Driver:
        return self._holder

    def driving(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._driving

    def close(self, timeout: float = 30.0) -> None:
        with self._lock:
            if self._closing:
                return
            self._closing = True
        if self._loop.is_running():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._stop_all(), self._loop).result(timeout)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._loop.close()

    async def _stop_all(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
