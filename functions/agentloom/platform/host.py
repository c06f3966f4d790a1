"""The run host: the one place an engine is assembled for a run, from ports.

Every host — ``agentloom serve``'s worker, the CLI, the step and API Lambdas — builds its
engines here (``RunHost.engine``: the only ``create_engine`` call of the platform), so a
change to how a run is wired is made once. What differs between hosts is a port of
``HostPorts``, filled by an adapter package (``agentloom.local``, ``agentloom.aws``):

- ``tracker``: the platform store, the checkpoint store with the session commits
  attached, the redactor (``RunTracker``);
- ``workspaces``: a session's workspaces (``RunWorkspaces``: a local directory with the
  bubblewrap sandbox, or the EFS volume with commands on Fargate);
- ``models``: the model gateway of a snapshot (``ModelFactory``; a host may also hand one
  gateway to a single engine);
- ``capabilities``: the tools and services of the bound Skills, MCP tools and knowledge
  bases (``Capabilities``);
- ``hooks``: the trusted hook handlers of an agent (``HookLoader``);
- ``observe``: how a run's steps are observed (``ObserverFactory``: one observer per run
  on one machine, a relay per invocation for a warm Lambda engine);
- ``events``: where a run's events go (the platform's event log, or the CLI's transcript).

Besides assembling engines the host does the engine operations of a request thread
(``RunEngines``: detail, resolve, supplements) and begins a job's execution (``begin``: a
new question's history from the session stream, or a resume's new execution) for the
launchers. ``cancel`` assembles nothing (``cancel_run``): a run whose configuration
changed since it started can always be cancelled.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from agentloom.capabilities import Capabilities, RunScope
from agentloom.observability import Observer, Relay
from agentloom.platform.domain import Run
from agentloom.platform.errors import Conflict, Invalid
from agentloom.platform.hook_packages import HookLoader, hook_registry
from agentloom.platform.launcher import EngineDetail, ModelFactory, RunJob
from agentloom.platform.tracker import RunTracker
from agentloom.platform.workspaces import RunWorkspaces, WorkspacesFactory
from agentloom_runtime.contracts import ModelGateway, Verdict
from agentloom_runtime.engine import Engine, cancel_run, create_engine, read_run
from agentloom_runtime.errors import AgentLoomError, ConfigError
from agentloom_runtime.events import Emit
from agentloom_runtime.snapshot import AgentSnapshot

T = TypeVar("T")
CANCEL_ATTEMPTS = 20


class RunObserver(Protocol):
    def emit(self, topic: Any, data: Any) -> None: ...

    def watch(self, engine: Engine) -> None: ...


ObserverFactory = Callable[[RunScope, AgentSnapshot, Emit], RunObserver]


def observe_run(scope: RunScope, snapshot: AgentSnapshot, forward: Emit) -> RunObserver:
    """One observer for the whole run (a process that drives it to the end)."""
    return Observer.for_run(run_id=scope.run_id, session_id=scope.session_id,
                            space_id=scope.space_id, snapshot=snapshot, forward=forward)


def relay_steps(scope: RunScope, snapshot: AgentSnapshot, forward: Emit) -> RunObserver:
    """A relay: a warm engine serves many invocations, each observed alone."""
    del scope, snapshot
    return Relay(forward)


def scope_of(run: Run) -> RunScope:
    return RunScope(space_id=run.space_id, agent_id=run.agent_id, version=run.version,
                    session_id=run.session_id, run_id=run.run_id)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code (a request thread)."""
    return asyncio.run(coro)


@dataclass(frozen=True)
class HostPorts:
    tracker: RunTracker
    workspaces: WorkspacesFactory
    models: ModelFactory
    events: Callable[[str], Emit]  # run id -> where its events go
    observe: ObserverFactory = observe_run
    capabilities: Capabilities = field(default_factory=Capabilities)
    hooks: HookLoader = hook_registry


class RunHost:
    def __init__(self, ports: HostPorts) -> None:
        self.ports = ports
        self.tracker = ports.tracker
        self.checkpoints = ports.tracker.checkpoints
        self.redactor = ports.tracker.redactor
        self.capabilities = ports.capabilities

    def engine(self, scope: RunScope, snapshot: AgentSnapshot, *, attach: bool,
               model: ModelGateway | None = None) -> tuple[Engine, RunWorkspaces]:
        """An engine for the run ``scope`` names (attached to its checkpoint, or ready to
        ``start`` it), with its workspaces. ``model``: this engine's gateway instead of
        the ports' factory (the CLI's chosen model)."""
        ports = self.ports
        registry = ports.hooks(snapshot)
        self.redactor.add(os.environ.get(snapshot.model.api_key_ref or "", ""))
        workspaces = ports.workspaces(snapshot, scope.session_id)
        observer = ports.observe(scope, snapshot, ports.events(scope.run_id))
        engine = create_engine(
            snapshot, workspace=workspaces.for_instance, emit=observer.emit,
            save=self.checkpoints, checkpoint=scope.run_id if attach else None,
            model_gateway=model if model is not None else ports.models(snapshot),
            tools=[*workspaces.tools(), *self.capabilities.tools(snapshot, scope)],
            workspace_provider=workspaces.provider, commands=workspaces.markers(),
            services={**workspaces.services(), **self.capabilities.services(snapshot, scope)},
            hook_registry=registry)
        workspaces.bind(engine)
        observer.watch(engine)
        return engine, workspaces

    async def begin(self, engine: Engine, job: RunJob) -> None:
        """What a job does before its first step: a new question starts from the
        session's history (a blocked run it abandons gets its status record); a resume
        begins a new execution; a continue (after a verdict) needs nothing."""
        run = job.run
        if job.kind == "ask":
            history = self.tracker.history(run.session_id, abandon=True)
            await engine.start(job.question or "", run_id=run.run_id,
                               labels={"session": run.session_id, "space": run.space_id,
                                       "user": run.user_id},
                               history=history.messages, counters=history.counters,
                               history_watermark=history.history_watermark)
        elif job.kind == "resume":
            await engine.begin_execution(retry_unknown_models=job.retry_unknown_models,
                                         confirm_hooks=job.confirm_hooks,
                                         raise_budget=job.raise_budget)

    # -- what a request thread does itself (RunEngines) --------------------------------

    def detail(self, run: Run, snapshot: AgentSnapshot) -> EngineDetail:
        return run_sync(self._detail(run, snapshot))

    async def _detail(self, run: Run, snapshot: AgentSnapshot) -> EngineDetail:
        try:
            engine, _ = self.engine(scope_of(run), snapshot, attach=True)
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
        engine, _ = self.engine(scope_of(run), snapshot, attach=True)
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
        engine, _ = self.engine(scope_of(run), snapshot, attach=True)
        try:
            return engine.queue_input(text)
        finally:
            await engine.close()

    def cancel(self, run: Run, snapshot: AgentSnapshot, reason: str) -> bool:
        """Record the cancellation without assembling an engine (no binding has to
        match); False when the run never started. A run that ended meanwhile is left as
        it ended."""
        del snapshot
        if read_run(self.checkpoints, run.run_id) is None:
            return False
        try:
            cancel_run(self.checkpoints, run.run_id, reason, attempts=CANCEL_ATTEMPTS)
        except ConfigError as err:
            if err.details.get("code") != "run_ended":
                raise
        return True
