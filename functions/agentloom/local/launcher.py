"""The embedded run launcher: a worker thread that loops ``Engine.step()``.

``LocalDriving`` drives a job with the engine the run host assembles
(``agentloom.platform.host``) and the run driver the CLI uses (``agentloom.local.runs``):
the session lease, the history from the platform's session stream, the engine's main view
offered to the completing commit, the steps; each step's records, usage and the run's
reusable view are written in the step's own checkpoint commit by the store's companion
(``SessionCommits``).

``LocalRunLauncher`` owns one background thread with its own event loop; each job is a
task on it. ``stop`` cancels the task (an in-flight model call is abandoned, an
in-flight command's sandbox killed) and waits for its driver to let go. ``close`` stops
every task: their runs stay resumable (``interrupted``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

from agentloom.local.runs import RunDriver
from agentloom.platform.domain import RunState
from agentloom.platform.errors import Conflict
from agentloom.platform.host import RunHost, scope_of
from agentloom.platform.launcher import RunJob
from agentloom.platform.lease import Driver, this_process
from agentloom_runtime.errors import AgentLoomError

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
