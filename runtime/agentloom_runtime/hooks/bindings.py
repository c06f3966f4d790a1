"""Published bindings of hooks to points, and how they match an operation.

Within one point, bindings run by ``priority`` ascending, then publication ``order``;
each point (before / after / error / finally) is ordered on its own, with no implicit
reversed exit. Default matching: ``model.chat.*`` matches purpose ``action`` only,
``model.embedding.*`` matches ``document`` / ``query``; the internal purpose
``verification`` is matched as ``completion``. ``instances`` and ``tools`` accept
``fnmatch`` patterns (``sub-*``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from types import MappingProxyType
from typing import Any

from ._point import HookPoint
from .context import HookScope
from .errors import HookConfigError
from .registry import HookDefinition

MATCH_KEYS = ("purposes", "instances", "tools")
DEFAULT_TIMEOUT = 1.0


def match_purpose(purpose: str) -> str:
    """The purpose as hooks see it: the internal ``verification`` is ``completion``."""
    return "completion" if purpose == "verification" else purpose


@dataclass(frozen=True)
class HookMatch:
    purposes: frozenset[str] | None = None
    instances: frozenset[str] | None = None
    tools: frozenset[str] | None = None

    @classmethod
    def parse(cls, data: Mapping[str, Sequence[str]] | HookMatch | None) -> HookMatch:
        if data is None:
            return cls()
        if isinstance(data, HookMatch):
            return data
        unknown = sorted(set(data) - set(MATCH_KEYS))
        if unknown:
            raise HookConfigError(f"unknown match keys {unknown}; allowed: {list(MATCH_KEYS)}")
        values: dict[str, frozenset[str]] = {}
        for key, items in data.items():
            if isinstance(items, str) or not all(isinstance(i, str) and i for i in items):
                raise HookConfigError(f"match.{key} must be a list of non-empty strings")
            values[key] = frozenset(items)
        if "purposes" in values:
            values["purposes"] = frozenset(match_purpose(p) for p in values["purposes"])
        return cls(**values)

    def to_dict(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for key in MATCH_KEYS:
            value: frozenset[str] | None = getattr(self, key)
            if value is not None:
                out[key] = sorted(value)
        return out

    def matches(self, point: HookPoint, scope: HookScope) -> bool:
        purposes = self.purposes if self.purposes is not None else point.default_purposes
        if purposes is not None and (
                scope.purpose is None or match_purpose(scope.purpose) not in purposes):
            return False
        if self.instances is not None and not _any_match(scope.instance, self.instances):
            return False
        return self.tools is None or (
            scope.tool is not None and _any_match(scope.tool, self.tools))


def _any_match(value: str, patterns: frozenset[str]) -> bool:
    return value in patterns or any(fnmatchcase(value, p) for p in patterns)


@dataclass(frozen=True)
class HookBinding:
    """A published binding. ``order`` is the publication order; when omitted the
    manager uses the binding's position in the list it receives."""

    hook_id: str
    version: str
    point: str
    priority: int = 100
    order: int | None = None
    match: Mapping[str, Sequence[str]] | HookMatch = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    config: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise HookConfigError(f"binding {self.hook_id}: priority must be an integer")
        if not isinstance(self.timeout, int | float) or isinstance(self.timeout, bool) \
                or not math.isfinite(self.timeout) or self.timeout <= 0:
            raise HookConfigError(f"binding {self.hook_id}: timeout must be a positive number")
        object.__setattr__(self, "match", HookMatch.parse(self.match))
        try:
            json.dumps(self.config, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError):
            raise HookConfigError(
                f"binding {self.hook_id}: config must be JSON data") from None

    @property
    def matcher(self) -> HookMatch:
        assert isinstance(self.match, HookMatch)
        return self.match


@dataclass(frozen=True)
class ResolvedBinding:
    """A binding joined with its definition and point, in stage order (``index``)."""

    binding: HookBinding
    definition: HookDefinition
    point: HookPoint
    order: int
    index: int = 0
    config: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def hook_id(self) -> str:
        return self.binding.hook_id

    @property
    def version(self) -> str:
        return self.binding.version

    @property
    def priority(self) -> int:
        return self.binding.priority

    @property
    def timeout(self) -> float:
        return self.binding.timeout

    @property
    def replay_safe(self) -> bool:
        return self.definition.replay_safe

    @property
    def observation(self) -> bool:
        return self.definition.observation
