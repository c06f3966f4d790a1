"""The run host: the one place an engine is assembled for a run, from ports.

Every host — ``agentloom serve``'s worker, the CLI, the step and API Lambdas — builds its
engines here (``RunHost.engine``: the only ``create_engine`` call of the platform), so a
change to how a run is wired is made once. What differs between hosts is a port of
``HostPorts``, filled by an adapter package (``agentloom.local``, ``agentloom.aws``):

- ``tracker``: the platform store, the checkpoint store with the session commits
  attached, the redactor (``RunTracker``);
- ``workspaces``: a session's workspaces (``RunWorkspaces``: a local directory with the
  bubblewrap sandbox, or the EFS volume with commands on Fargate; ``SessionWorkspaces``
  holds what both share — the instance directories of one session, resolved from host
  identity only, the file tools the snapshot asks for, the command markers in the
  session's lock directory);
- ``models``: the model gateway of a snapshot (``ModelFactory``; a host may also hand one
  gateway to a single engine);
- ``capabilities``: the tools and services of the bound Skills, MCP tools and knowledge
  bases (``Capabilities``);
- ``hooks``: the trusted hook handlers of an agent (``HookLoader``);
- ``observe``: how a run's steps are observed (``ObserverFactory``: one observer per run
  on one machine, a relay per invocation for a warm Lambda engine);
- ``events``: where a run's events go (by default the platform's event log; the CLI's
  transcript).

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
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from agentloom.capabilities import Capabilities, RunScope
from agentloom.observability import Observer, Relay
from agentloom.platform.domain import Run
from agentloom.platform.errors import Conflict, Invalid
from agentloom.platform.launcher import EngineDetail, ModelFactory, RunJob
from agentloom.platform.tracker import RunTracker
from agentloom_runtime.contracts import ModelGateway, StepCommandRunner, Verdict
from agentloom_runtime.engine import Engine, cancel_run, create_engine, read_run
from agentloom_runtime.errors import AgentLoomError, ConfigError
from agentloom_runtime.events import Emit
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.tool_contracts import ToolDefinition
from agentloom_runtime.workspace import (
    InstanceWorkspace,
    MarkerStore,
    WorkspaceProvider,
    WorkspaceStorage,
    file_tools,
)
from agentloom_runtime.workspace.commands import MarkerLiveness

if TYPE_CHECKING:
    from agentloom_runtime.hooks import HookRegistry

T = TypeVar("T")
CANCEL_ATTEMPTS = 20
HookLoader = Callable[[AgentSnapshot], "HookRegistry | None"]


# -- the run's workspaces (a port; the layout both adapters share) ----------------------


class BoundRun(Protocol):
    """What workspaces read of the engine they serve: its run id."""

    @property
    def run_id(self) -> str: ...


class RunWorkspaces(Protocol):
    """What the run host needs of a run's workspaces."""

    provider: WorkspaceProvider

    def for_instance(self, instance: str) -> WorkspaceStorage: ...

    def tools(self) -> list[ToolDefinition]: ...

    def services(self) -> dict[str, Any]: ...

    def markers(self) -> MarkerStore | None:
        """The engine's command port (None: no commands run from this host)."""
        ...

    def bind(self, engine: BoundRun) -> None: ...

    def runner(self) -> StepCommandRunner | None: ...


WorkspacesFactory = Callable[[AgentSnapshot, str], RunWorkspaces]  # (snapshot, session)


class SessionWorkspaces:
    """One session's workspaces on a ``WorkspaceProvider``: instance directories, file
    tools, command markers. ``liveness`` lets a marker whose sandbox provably holds
    nothing stop blocking the session (None: nothing can prove it)."""

    def __init__(self, provider: WorkspaceProvider, snapshot: AgentSnapshot, session: str,
                 *, liveness: MarkerLiveness | None = None) -> None:
        self.provider = provider
        self.snapshot = snapshot
        self.session = session
        self._liveness = liveness
        self._engine: BoundRun | None = None

    def bind(self, engine: BoundRun) -> None:
        self._engine = engine

    @property
    def commands(self) -> MarkerStore:
        """Execution markers and results by request id, in the session's lock directory."""
        snap = self.snapshot
        return MarkerStore(self.provider.lock_dir(snap.space_id, snap.agent_id, self.session),
                           liveness=self._liveness)

    def markers(self) -> MarkerStore | None:
        return self.commands

    def services(self) -> dict[str, Any]:
        return {}

    def runner(self) -> StepCommandRunner | None:
        return None

    def tools(self) -> list[ToolDefinition]:
        wanted = set(self.snapshot.tools)
        return [t for t in file_tools()
                if ("workspace" in wanted and t.name != "workspace_command")
                or t.name in wanted]

    def instance(self, instance: str) -> InstanceWorkspace:
        if self._engine is None:
            raise RuntimeError("workspaces used before an engine was bound")
        snap = self.snapshot
        return self.provider.for_instance(snap.space_id, snap.agent_id, self.session,
                                          self._engine.run_id, instance)

    def for_instance(self, instance: str) -> WorkspaceStorage:
        return self.instance(instance).store()

    def session_dir(self) -> Path:
        snap = self.snapshot
        return self.provider.root.joinpath("spaces", snap.space_id, "agents", snap.agent_id,
                                           "sessions", self.session)


# -- hooks, observers -----------------------------------------------------------------


def hook_registry(snapshot: AgentSnapshot) -> HookRegistry | None:
    """The trusted handlers of the agent's hook bindings (``hooks:``), loaded from the
    hook packages (folders or zip files) its ``hook_packages:`` lists — docs/hooks.md;
    None when the agent binds no hooks and lists no packages."""
    if not snapshot.hooks and not snapshot.hook_packages:
        return None
    from agentloom_runtime.hooks import HookRegistry, load_hook_package

    bound = sorted({f"{b.hook_id}@{b.version}" for b in snapshot.hooks})
    if not snapshot.hook_packages:
        raise ConfigError(f"the agent binds hooks ({', '.join(bound)}) but lists no "
                          "hook_packages that provide them; add `hook_packages: [PATH]` "
                          "(a folder or zip file with a hooks.yaml) to the agent file")
    registry = HookRegistry()
    for path in snapshot.hook_packages:
        if not Path(path).exists():
            raise ConfigError(f"hook package {path} does not exist (hook_packages in the "
                              "agent file; a relative path is relative to that file)")
        load_hook_package(path, registry)
    missing = [f"{b.hook_id}@{b.version}" for b in snapshot.hooks
               if (b.hook_id, b.version) not in registry]
    if missing:
        provided = sorted(f"{d.hook_id}@{d.version}" for d in registry)
        raise ConfigError(f"no hook package provides {', '.join(sorted(set(missing)))}; "
                          f"the packages provide: {', '.join(provided) or 'nothing'}")
    return registry


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
    events: Callable[[str], Emit] | None = None  # run id -> its events; None: the event log
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
        self.redactor.add(os.environ.get(snapshot.model.api_key_ref or "", ""),
                          *self.capabilities.credentials(snapshot, scope))
        workspaces = ports.workspaces(snapshot, scope.session_id)
        observer = ports.observe(scope, snapshot, self._events(scope.run_id))
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

    def _events(self, run_id: str) -> Emit:
        if self.ports.events is not None:
            return self.ports.events(run_id)
        return lambda topic, data: self.tracker.event(run_id, topic, data)

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

    def replay_parts(self, run: Run, snapshot: AgentSnapshot
                     ) -> tuple[list[ToolDefinition], HookRegistry | None]:
        """The tool definitions a run of ``snapshot`` gets (the replay never calls their
        handlers) and its hook handlers: as ``engine`` assembles them, nothing opened."""
        scope = scope_of(run)
        workspaces = self.ports.workspaces(snapshot, scope.session_id)
        return ([*workspaces.tools(), *self.capabilities.tools(snapshot, scope)],
                self.ports.hooks(snapshot))

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
