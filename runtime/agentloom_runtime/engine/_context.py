"""The step context: what every step unit receives (journal, modules, host ports, emit).

A step unit is a function of one ``StepContext`` and the frame it works on. It mutates
the typed head through ``ctx.head`` and ends with one named ``ctx.commit(point)``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from agentloom_runtime._json import storable
from agentloom_runtime.checkpoint.journal import Journal
from agentloom_runtime.contracts import CommandMarkers, ContextManager, RunStatus
from agentloom_runtime.errors import AgentLoomError, CheckpointConflict
from agentloom_runtime.events import Emit, EngineTopic
from agentloom_runtime.tools import ToolRuntime

from ._modules import RuntimeModules
from ._state import CommitPoint, Frame, Head

if TYPE_CHECKING:  # pydantic stays off the engine's import path
    from agentloom_runtime.snapshot import AgentSnapshot

logger = logging.getLogger(__name__)


class BlockRun(AgentLoomError):
    """Raised inside a step to stop the run with a typed error (blocked by default);
    ``Engine.step`` catches it, so it never reaches a host. It takes the carried error's
    code, message and details."""

    def __init__(self, error: AgentLoomError, status: RunStatus = "blocked") -> None:
        super().__init__(error.message, details=error.details)
        self.code = error.code
        self.error = error
        self.status = status


@dataclass(frozen=True)
class HostPorts:
    """What the host lends the engine: workspaces per instance, command markers and
    trusted services for tool handlers."""

    workspace: Callable[[str], Any] | None = None
    commands: CommandMarkers | None = None
    services: Mapping[str, Any] = field(default_factory=dict)


class StepContext:
    def __init__(self, journal: Journal, modules: RuntimeModules, snapshot: AgentSnapshot,
                 tools: ToolRuntime, host: HostPorts, emit: Emit) -> None:
        self.journal = journal
        self.modules = modules
        self.snapshot = snapshot
        self.tools = tools
        self.host = host
        self._emit = emit
        self.call_ids: dict[str, set[str]] = {}  # per instance, see _action._seen_ids

    @property
    def head(self) -> Head:
        return cast(Head, self.journal.head)

    @property
    def context(self) -> ContextManager:
        return self.modules.context

    @property
    def run_id(self) -> str:
        return self.journal.run_id

    def frame(self, instance: str) -> Frame:
        return self.head["frames"][instance]

    def active(self) -> Frame:
        return self.frame(self.head["stack"][-1])

    def tools_next(self) -> bool:
        """Whether the next step is tool work of the current cycle (a queued or returned
        call, a tool or command operation, a closing frame), not a model call."""
        op = self.head["op"]
        if op is not None:
            return bool(op["kind"] in ("tool", "command"))
        return "closing" in self.head or any(
            c["state"] in ("queued", "returned") for c in self.active()["pending"])

    def commit(self, point: CommitPoint) -> int:
        return self.journal.commit(point)

    def emit(self, topic: EngineTopic, data: Mapping[str, Any]) -> None:
        """Observation only: a failing observer never breaks a step; text is storable."""
        try:
            self._emit(topic, storable(dict(data)))
        except Exception:
            logger.warning("event observer failed on %s", topic, exc_info=True)

    def new_request_id(self, frame: Frame) -> tuple[str, str]:
        """(request_id, call_id): both unique within the run."""
        self.head["next_request"] += 1
        n = self.head["next_request"]
        return f"{self.run_id}.{frame['instance']}.{n}", f"call_{n}"

    def system_prompt(self, frame: Frame, prompt: str | None = None) -> str:
        """The prompt, the strategy's rules, then the sections of the tools this
        instance may use (``ToolDefinition.prompt``), in catalog order."""
        from ._frames import frame_view, tool_allowed

        base = self.snapshot.prompt if prompt is None else prompt
        rules = self.modules.strategy.instructions(frame_view(frame))
        sections = [d.prompt(self.tools.config, frame["template"])
                    for d in self.tools.visible(frame["instance"])
                    if tool_allowed(frame, d.name)]
        return "\n\n".join(part for part in (base, rules, *sections) if part).strip()


def now() -> float:
    return round(time.time(), 3)


def in_flight(head: Head, record: Mapping[str, Any], what: str) -> None:
    """An operation started in the *current* execution belongs to a step that may still
    be running (a duplicate or concurrent invocation): do nothing. Only a resume (a new
    execution) may decide that its fate is unknown."""
    if record.get("execution") == head["execution"]:
        raise CheckpointConflict(
            f"{what} of run {head['run_id']} is in flight in this execution; a step that "
            "died here is continued by resuming the run", details={"run_id": head["run_id"]})

