"""What a handler may see: a deep-frozen config, the scope of the operation and its own
identity. No keys, connections, engine, loop or environment. Hooks are trusted Python
with process rights; this narrows the interface, it is not a sandbox."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from agentloom_runtime.hook_contracts import HookScope

__all__ = ["HookContext", "HookScope"]


class HookContext:
    """Read-only view handed to one handler call."""

    __slots__ = ("_config", "_deadline", "_hook_id", "_hook_version", "_mono_deadline",
                 "_scope")

    def __init__(self, *, hook_id: str, hook_version: str, config: Mapping[str, Any],
                 scope: HookScope, monotonic_deadline: float, deadline: float) -> None:
        self._hook_id = hook_id
        self._hook_version = hook_version
        self._config = config
        self._scope = scope
        self._mono_deadline = monotonic_deadline
        self._deadline = deadline

    @property
    def hook_id(self) -> str:
        return self._hook_id

    @property
    def hook_version(self) -> str:
        return self._hook_version

    @property
    def point(self) -> str:
        return self._scope.point

    @property
    def config(self) -> Mapping[str, Any]:
        """The binding's config, deep-frozen (mappings are read-only, lists are tuples)."""
        return self._config

    @property
    def scope(self) -> HookScope:
        return self._scope

    @property
    def deadline(self) -> float:
        """Wall-clock epoch seconds, for display only: never compute a budget from it."""
        return self._deadline

    def remaining_seconds(self) -> float:
        """Seconds left on the event loop's monotonic clock (binding or stage, the
        earlier); 0.0 once spent."""
        return max(0.0, self._mono_deadline - asyncio.get_running_loop().time())

    def __repr__(self) -> str:
        return (f"HookContext(hook_id={self._hook_id!r}, hook_version={self._hook_version!r}, "
                f"point={self._scope.point!r})")
