"""Trusted hook handlers and their versions."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .context import HookContext
from .errors import HookConfigError
from .fingerprint import code_fingerprint
from .results import HookResult

HookHandler = Callable[[HookContext, dict[str, Any]], Awaitable[HookResult]]


@dataclass(frozen=True)
class HookDefinition:
    """A trusted async handler ``async (ctx, payload) -> HookResult``.

    ``replay_safe``: the handler may run again when an earlier attempt's outcome is
    unknown (no side effects, or idempotent ones). ``observation``: a failure (raise or
    timeout) is recorded as a diagnostic and the stage continues; the handler may only
    return ``Continue``. ``code_hash``: the identity of a published artifact; when
    omitted the identity is computed from the handler (see ``fingerprint``).
    """

    hook_id: str
    version: str
    handler: HookHandler
    replay_safe: bool = False
    observation: bool = False
    code_hash: str | None = None
    fingerprint: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if not self.hook_id or not isinstance(self.hook_id, str):
            raise HookConfigError("hook_id must be a non-empty string")
        if not self.version or not isinstance(self.version, str):
            raise HookConfigError(f"hook {self.hook_id}: version must be a non-empty string")
        if not _is_async(self.handler):
            raise HookConfigError(f"hook {self.hook_id}: the handler must be an async function")
        object.__setattr__(self, "fingerprint", code_fingerprint(self.handler, self.code_hash))


def _is_async(handler: Any) -> bool:
    if inspect.iscoroutinefunction(handler):
        return True
    call = getattr(handler, "__call__", None)  # noqa: B004 - an async __call__ counts
    return call is not None and inspect.iscoroutinefunction(call)


class HookRegistry:
    """Handlers by ``(hook_id, version)``; several versions of one hook may coexist."""

    def __init__(self, definitions: Iterable[HookDefinition] = ()) -> None:
        self._hooks: dict[tuple[str, str], HookDefinition] = {}
        for definition in definitions:
            self.register(definition)

    def register(self, definition: HookDefinition) -> HookDefinition:
        key = (definition.hook_id, definition.version)
        if key in self._hooks:
            raise HookConfigError(
                f"hook {definition.hook_id} version {definition.version} is already registered")
        self._hooks[key] = definition
        return definition

    def hook(self, hook_id: str, version: str, *, replay_safe: bool = False,
             observation: bool = False, code_hash: str | None = None,
             ) -> Callable[[HookHandler], HookHandler]:
        """Decorator form of ``register``."""
        def wrap(handler: HookHandler) -> HookHandler:
            self.register(HookDefinition(hook_id, version, handler, replay_safe=replay_safe,
                                         observation=observation, code_hash=code_hash))
            return handler
        return wrap

    def get(self, hook_id: str, version: str) -> HookDefinition:
        try:
            return self._hooks[(hook_id, version)]
        except KeyError:
            raise HookConfigError(
                f"hook {hook_id} version {version} is not registered") from None

    def __contains__(self, key: object) -> bool:
        return key in self._hooks

    def __iter__(self) -> Iterator[HookDefinition]:
        return iter(list(self._hooks.values()))

    def __len__(self) -> int:
        return len(self._hooks)
