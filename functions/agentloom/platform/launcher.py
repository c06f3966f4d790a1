"""The ports between the session service and whatever drives runs.

- ``RunLauncher``: starts driving a run asynchronously (a new question, a resume, the
  continuation after a verdict) and stops the driver of a run. Embedded:
  ``LocalRunLauncher`` (a worker thread with its own event loop looping
  ``Engine.step()``); AWS: Step Functions ``StartExecution`` / ``StopExecution`` (the
  orchestration issue).
- ``RunEngines``: the engine operations the API performs itself, on a run that no one is
  driving or safely beside its driver: read what the engine knows (answer, what is
  unknown, pending calls), record an operator's verdict, queue a supplement, record a
  cancellation.

A ``ModelFactory`` builds the model gateway of a published snapshot; the server passes
it in (tests inject ``FunctionModel`` / ``KeyedScriptModel``; ``serve`` reads the key
from the environment variable the snapshot's ``api_key_ref`` names).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from agentloom.platform.domain import Run
from agentloom.platform.lease import Driver
from agentloom_runtime.contracts import ModelGateway, PendingToolCall, UnknownOperation, Verdict
from agentloom_runtime.engine import RaiseBudget
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.tool_contracts import ToolDefinition

if TYPE_CHECKING:
    from agentloom_runtime.hooks import HookRegistry

ModelFactory = Callable[[AgentSnapshot], ModelGateway]
JobKind = Literal["ask", "resume", "continue"]


@dataclass(frozen=True)
class RunJob:
    """What a driver is asked to do: ``ask`` starts the run with ``question``;
    ``resume`` begins a new execution (with its options) and drives it; ``continue``
    drives a run whose verdict was just recorded."""

    kind: JobKind
    run: Run
    snapshot: AgentSnapshot
    question: str | None = None
    retry_unknown_models: bool = False
    confirm_hooks: bool = False
    raise_budget: RaiseBudget | None = None  # an operator's raise, with ``resume``


@dataclass(frozen=True)
class EngineDetail:
    answer: str | None = None
    reason: str = ""
    unknown: UnknownOperation | None = None
    pending: list[PendingToolCall] = field(default_factory=list)
    note: str | None = None  # why something could not be read


class RunLauncher(Protocol):
    def launch(self, job: RunJob) -> None:
        """Start driving (returns at once). ``Conflict`` if the run is being driven."""
        ...

    def stop(self, run_id: str, *, timeout: float = 30.0) -> bool:
        """Stop the driver of ``run_id`` (an in-flight command is killed) and wait until it
        let go; False when nothing here drives it."""
        ...

    def driving(self, run_id: str) -> bool: ...

    def holder(self) -> Driver:
        """Who the session lease names as the driver of the runs this launcher starts
        (``agentloom.platform.lease``)."""
        ...

    def close(self) -> None:
        """Stop every driver; their runs stay resumable (interrupted)."""
        ...


class RunEngines(Protocol):
    def detail(self, run: Run, snapshot: AgentSnapshot) -> EngineDetail: ...

    def resolve(self, run: Run, snapshot: AgentSnapshot, verdict: Verdict) -> None:
        """Record the verdict (``Conflict`` nothing_to_resolve, ``Invalid``
        verdict_not_applicable)."""
        ...

    def queue_input(self, run: Run, snapshot: AgentSnapshot, text: str) -> int: ...

    def cancel(self, run: Run, snapshot: AgentSnapshot, reason: str) -> bool:
        """Record the cancellation; False when the run never started (no checkpoint)."""
        ...

    def replay_parts(self, run: Run, snapshot: AgentSnapshot
                     ) -> tuple[list[ToolDefinition], HookRegistry | None]:
        """What a replay of ``run`` with ``snapshot`` shows the model as its runs do: the
        host's tool definitions (their handlers are never called) and the hook handlers
        (``agentloom.platform.replay``)."""
        ...
