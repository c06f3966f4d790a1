"""The hook manager's port and the vocabulary it speaks, for the engine: where an
operation runs (``HookScope``), the bindings of a stage and what a stage produced.
The implementation is ``agentloom_runtime.hooks.HookManager`` (``hooks/v1``), which
the engine imports only when an agent binds hooks; this module imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .contracts import Module


@dataclass(frozen=True, slots=True)
class HookScope:
    """Where an operation runs. The manager sets ``point``; ``purpose`` is the model
    request purpose (``action``, ``compaction``, ``verification``) or the embedding
    purpose (``document``, ``query``); ``tool`` is the tool name at ``tool.*``.
    ``session_id`` is the run's session (the host's ``session`` label; None for a run
    outside a session). ``operation_id`` names the durable operation the stage belongs
    to: the model call (``m<execution>-<n>``, also for ``context.prepare.*`` before its
    action call), the tool call (``t:<request_id>``, also for the hooks a tool runs and
    for ``subagent.*`` of its delegation), the compaction (``compact:<instance>:<n>``)
    or the run (``run:<run_id>`` at ``run.*``); at ``operation.*`` the payload's."""

    run_id: str = ""
    instance: str = "main"
    point: str = ""
    purpose: str | None = None
    tool: str | None = None
    space_id: str | None = None
    agent_id: str | None = None
    agent_version: str | None = None
    session_id: str | None = None
    operation_id: str | None = None


class HookStageBinding(Protocol):
    """One binding of a stage, in stage order (``hooks.ResolvedBinding``)."""

    @property
    def hook_id(self) -> str: ...

    @property
    def index(self) -> int:
        """Its position in the stage: the cursor a resumed stage starts from."""
        ...

    @property
    def replay_safe(self) -> bool: ...


class HookRejection(Protocol):
    """A hook's refusal (``hooks.Reject``)."""

    @property
    def reason(self) -> str: ...

    @property
    def hook_id(self) -> str: ...


class HookNote(Protocol):
    """A recorded, non-fatal hook failure (``hooks.HookDiagnostic``)."""

    def to_dict(self) -> dict[str, str]: ...


class HookStageOutcome(Protocol):
    """What a stage produced (``hooks.StageOutcome``)."""

    @property
    def payload(self) -> dict[str, Any]: ...

    @property
    def rejected(self) -> HookRejection | None: ...

    @property
    def diagnostics(self) -> Sequence[HookNote]: ...


BeforeBinding = Callable[[HookStageBinding, dict[str, Any]], Awaitable[None]]
"""Awaited before a binding runs, with the payload it will receive."""
AfterBinding = Callable[[HookStageBinding, int, dict[str, Any]], Awaitable[None]]
"""Awaited after a binding completed: the cursor (bindings done) and the payload."""


class HookManager(Module, Protocol):
    """``hooks/v1`` (``hooks.HookManager``): the bindings of each stage and the one stage
    loop; the engine persists around it with ``before`` / ``after``."""

    def stage(self, point: str, scope: HookScope) -> Sequence[HookStageBinding]:
        """The bindings that run at ``point`` for ``scope``, in order (deterministic, so
        a saved cursor indexes the same list)."""
        ...

    def writable(self, point: str) -> frozenset[str]:
        """The payload fields a hook at ``point`` may change."""
        ...

    def replay_required(self, binding: HookStageBinding) -> bool:
        """True when an unfinished run of ``binding`` must not be repeated blindly."""
        ...

    async def run(self, point: str, payload: dict[str, Any], scope: HookScope, *,
                  start: int = 0, before: BeforeBinding | None = None,
                  after: AfterBinding | None = None) -> HookStageOutcome:
        """Run ``point``'s stage from binding ``start``."""
        ...

    async def aclose(self) -> None: ...
