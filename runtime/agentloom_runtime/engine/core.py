"""State and helpers shared by the engine's step families (model steps, tool steps)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from agentloom_runtime.checkpoint.store import BaseCheckpointStore
from agentloom_runtime.contracts import JSON, RunStatus, StepKind, StepNext
from agentloom_runtime.errors import AgentLoomError, ConfigError

from .frames import frame_view
from .journal import Journal

Emit = Callable[[str, Mapping[str, Any]], None]
logger = logging.getLogger(__name__)


class BlockRun(Exception):
    """Raised inside a step to stop the run as blocked with a typed error."""

    def __init__(self, error: AgentLoomError, status: RunStatus = "blocked") -> None:
        super().__init__(error.message)
        self.error = error
        self.status = status


class EngineCore:
    """Attributes and helpers every step family uses; the families add the steps."""

    def __init__(self, *, store: BaseCheckpointStore, modules: Any, bindings: JSON,
                 snapshot: Any, tools: Any, emit: Emit | None = None,
                 workspace: Callable[[str], Any] | None = None,
                 commands: Any = None, services: Mapping[str, Any] | None = None) -> None:
        self.store = store
        self.modules = modules
        self.bindings = bindings
        self.snapshot = snapshot
        self.tools = tools
        self.context = modules.context
        self.limits = modules.limits
        self._emit: Emit = emit or (lambda topic, data: None)
        self.workspace = workspace
        self.commands = commands
        self.services = dict(services or {})
        self.j: Journal | None = None
        self._closed = False
        self._active: asyncio.Task[Any] | None = None

    # -- attach ---------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self._journal().run_id

    @property
    def head(self) -> dict[str, Any]:
        return self._journal().head

    @property
    def version(self) -> int:
        return self._journal().version

    def _journal(self) -> Journal:
        if self.j is None:
            raise ConfigError("no run attached: call start() or attach()")
        return self.j

    def active_frame(self) -> dict[str, Any]:
        head = self.head
        frame: dict[str, Any] = head["frames"][head["stack"][-1]]
        return frame

    def finish_frame(self, frame: dict[str, Any], status: RunStatus, answer: str | None,
                     reason: str = "") -> None:
        """Close a frame; a child's result closes the parent's pending call; the main
        frame's end is the run's end. The caller commits."""
        frame["status"] = status
        frame["outcome"] = {"status": status, "answer": answer, "reason": reason}
        frame["candidate"] = None
        if self.after_point(frame) is not None:
            self.head["closing"] = frame["instance"]  # the next step runs the after-stage
            return
        self.complete_close(frame)

    def after_point(self, frame: dict[str, Any]) -> str | None:
        """The after-stage a finished frame still has to pass, if any binding matches."""
        point = "run.after" if frame["parent"] is None else "subagent.after"
        hooks = self.modules.hooks
        if hooks is None or not self.has_hooks(point, frame["instance"]):
            return None
        return point

    def has_hooks(self, point: str, instance: str, **fields: Any) -> bool:
        raise NotImplementedError

    def complete_close(self, frame: dict[str, Any]) -> None:
        status: RunStatus = frame["outcome"]["status"]
        answer, reason = frame["outcome"]["answer"], frame["outcome"]["reason"]
        head = self.head
        if frame["parent"] is None:
            head["status"] = status
            head["outcome"] = frame["outcome"]
            self.emit("run.finished", {"run_id": head["run_id"], "status": status,
                                       "answer": answer, "reason": reason})
            return
        head["stack"].pop()
        self.close_delegation(frame)

    def _snapshot_data(self) -> JSON:
        snap = self.snapshot
        data: JSON = snap.model_dump(mode="json") if hasattr(snap, "model_dump") else dict(snap)
        return data

    def _system_prompt(self, frame: dict[str, Any], prompt: str | None = None) -> str:

        base = self.snapshot.prompt if prompt is None else prompt
        rules = self.modules.strategy.instructions(frame_view(frame))
        return f"{base}\n\n{rules}".strip()

    def emit(self, topic: str, data: Mapping[str, Any]) -> None:
        """Observation only: a failing observer never breaks a step."""
        try:
            self._emit(topic, data)
        except Exception:
            logger.warning("event observer failed on %s", topic, exc_info=True)

    # provided by the step families ---------------------------------------------------------

    async def _advance(self, command_result: Mapping[str, Any] | None, *,
                       resuming: bool = False) -> tuple[StepKind, StepNext]:
        raise NotImplementedError

    def close_delegation(self, child: dict[str, Any]) -> None:
        raise NotImplementedError

    async def _resume_tool(self, op: dict[str, Any]) -> tuple[StepKind, StepNext]:
        raise NotImplementedError

    async def _resume_command(self, op: dict[str, Any], result: Any
                              ) -> tuple[StepKind, StepNext]:
        raise NotImplementedError

    def tool_allowed(self, frame: dict[str, Any], name: str, allowed: Any = None) -> bool:
        raise NotImplementedError
