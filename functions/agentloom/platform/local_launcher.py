"""The embedded run driver: engines on this machine and a worker that loops
``Engine.step()``.

``LocalEngines`` assembles an engine for a run the way the embedded app does (SQLite
checkpoints, a local workspace per instance, the bubblewrap sandbox for commands — a
clear ``sandbox_unavailable`` result when it cannot run, never the host shell — and the
agent's trusted hooks), with the model gateway from the server's ``ModelFactory``. It
drives a job with the run driver the CLI uses (``agentloom.local.runs.RunDriver``): the
session lease, the history from the platform's session stream, the engine's main view
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
import os
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from agentloom.capabilities import Capabilities, RunScope
from agentloom.local.operator import hook_registry
from agentloom.local.redaction import Redactor
from agentloom.local.runs import RunDriver
from agentloom.local.sessions import agent_binding
from agentloom.local.workspaces import LocalWorkspaces
from agentloom.observability import Observer
from agentloom.platform.domain import Run, RunState
from agentloom.platform.errors import Conflict, Invalid
from agentloom.platform.launcher import EngineDetail, ModelFactory, RunJob
from agentloom.platform.tracker import RunTracker
from agentloom_runtime.checkpoint.store import BaseCheckpointStore
from agentloom_runtime.contracts import Verdict
from agentloom_runtime.engine import Engine, create_engine, read_run
from agentloom_runtime.errors import AgentLoomError, CheckpointConflict
from agentloom_runtime.snapshot import AgentSnapshot

log = logging.getLogger(__name__)
T = TypeVar("T")
CANCEL_ATTEMPTS = 5


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code (a request thread)."""
    return asyncio.run(coro)


class LocalEngines:
    def __init__(self, home: Path, checkpoints: BaseCheckpointStore, tracker: RunTracker,
                 model_factory: ModelFactory,
                 capabilities: Capabilities | None = None) -> None:
        self.home = home
        self.capabilities = capabilities or Capabilities()
        self.checkpoints = checkpoints
        self.tracker = tracker
        self.model_factory = model_factory
        self.redactor: Redactor = tracker.redactor
        self.driver = RunDriver(tracker)

    def engine(self, run: Run, snapshot: AgentSnapshot, *,
               attach: bool) -> tuple[Engine, LocalWorkspaces]:
        self.redactor.add(os.environ.get(snapshot.model.api_key_ref or "", ""))
        workspaces = LocalWorkspaces(self.home / "workspaces", snapshot, run.session_id)

        def emit(topic: str, data: Any) -> None:
            self.tracker.event(run.run_id, topic, data)

        observer = Observer.for_run(run_id=run.run_id, session_id=run.session_id,
                                    space_id=run.space_id, snapshot=snapshot, forward=emit)
        scope = RunScope(space_id=run.space_id, agent_id=run.agent_id,
                         version=run.version, session_id=run.session_id, run_id=run.run_id)
        engine = create_engine(
            snapshot, workspace=workspaces.for_instance, emit=observer.emit,
            save=self.checkpoints,
            checkpoint=run.run_id if attach else None,
            model_gateway=self.model_factory(snapshot),
            tools=[*workspaces.tools(), *self.capabilities.tools(snapshot, scope)],
            workspace_provider=workspaces.provider, commands=workspaces.commands,
            services={**workspaces.services(), **self.capabilities.services(snapshot, scope)},
            hook_registry=hook_registry(snapshot))
        workspaces.bind(engine)
        observer.watch(engine)
        return engine, workspaces

    # -- what the API does itself (a request thread) -------------------------------------

    def detail(self, run: Run, snapshot: AgentSnapshot) -> EngineDetail:
        return run_sync(self._detail(run, snapshot))

    async def _detail(self, run: Run, snapshot: AgentSnapshot) -> EngineDetail:
        try:
            engine, _ = self.engine(run, snapshot, attach=True)
        except AgentLoomError as err:
            return EngineDetail(note=f"the engine cannot read this run here: {err.message}")
        try:
            outcome = engine.outcome()
            unknown = engine.unknown() if engine.way_out() == "resolve" else None
            return EngineDetail(answer=outcome.answer if outcome else None,
                                reason=outcome.reason if outcome else "",
                                unknown=unknown, pending=engine.pending())
        finally:
            await engine.close()

    def resolve(self, run: Run, snapshot: AgentSnapshot, verdict: Verdict) -> None:
        run_sync(self._resolve(run, snapshot, verdict))

    async def _resolve(self, run: Run, snapshot: AgentSnapshot, verdict: Verdict) -> None:
        engine, _ = self.engine(run, snapshot, attach=True)
        try:
            unknown = engine.unknown()
            if unknown is None:
                raise Conflict(f"run {run.run_id} is not blocked on an unknown outcome "
                               f"(status {engine.status}); nothing to resolve",
                               code="nothing_to_resolve",
                               details={"way_out": engine.way_out()})
            if verdict.kind not in unknown.verdicts:
                raise Invalid(f"the verdict {verdict.kind!r} does not apply to a "
                              f"{unknown.kind} of unknown outcome; use one of: "
                              f"{', '.join(unknown.verdicts)}", code="verdict_not_applicable",
                              details={"verdicts": list(unknown.verdicts)})
            await engine.resolve(verdict)
        finally:
            await engine.close()

    def queue_input(self, run: Run, snapshot: AgentSnapshot, text: str) -> int:
        return run_sync(self._queue_input(run, snapshot, text))

    async def _queue_input(self, run: Run, snapshot: AgentSnapshot, text: str) -> int:
        engine, _ = self.engine(run, snapshot, attach=True)
        try:
            return engine.queue_input(text)
        finally:
            await engine.close()

    def cancel(self, run: Run, snapshot: AgentSnapshot, reason: str) -> bool:
        return run_sync(self._cancel(run, snapshot, reason))

    async def _cancel(self, run: Run, snapshot: AgentSnapshot, reason: str) -> bool:
        if read_run(self.checkpoints, run.run_id) is None:
            return False
        for attempt in range(CANCEL_ATTEMPTS):
            engine, _ = self.engine(run, snapshot, attach=True)
            try:
                if engine.way_out() == "new_question":
                    return True  # it ended meanwhile: nothing to cancel
                await engine.cancel(reason)
                return True
            except CheckpointConflict:
                if attempt == CANCEL_ATTEMPTS - 1:
                    raise
            finally:
                await engine.close()
        return True  # pragma: no cover

    # -- driving (the worker's loop) -----------------------------------------------------

    async def execute(self, job: RunJob) -> None:
        """Drive the job's run under the session's lease (``agentloom.local.runs``, the
        driver the CLI uses too): a new question starts from the session's history, a
        resume begins a new execution, a continue drives on."""
        run, snapshot, sid = job.run, job.snapshot, job.run.session_id
        ask = job.kind == "ask"
        async with self.driver.leased(sid, run.run_id, new=ask,
                                      agent=agent_binding(snapshot) if ask else None):
            engine, workspaces = self.engine(run, snapshot, attach=not ask)
            try:
                if ask:
                    await self.driver.start(engine, job.question or "", run_id=run.run_id,
                                            session=sid,
                                            labels={"session": sid, "space": run.space_id,
                                                    "user": run.user_id})
                elif job.kind == "resume":
                    await engine.begin_execution(
                        retry_unknown_models=job.retry_unknown_models,
                        confirm_hooks=job.confirm_hooks, raise_budget=job.raise_budget)
                await self.driver.drive(engine, sid, runner=workspaces.runner())
            finally:
                await engine.close()


class LocalRunLauncher:
    """One worker thread, one event loop, a task per driven run."""

    def __init__(self, engines: LocalEngines) -> None:
        self.engines = engines
        self.tracker = engines.tracker
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name="agentloom-run-worker", daemon=True)
        self._thread.start()
        self._lock = threading.Lock()
        self._driving: set[str] = set()
        self._tasks: dict[str, asyncio.Task[None]] = {}  # touched on the loop only
        self._closing = False

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
            await self.engines.execute(job)
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
