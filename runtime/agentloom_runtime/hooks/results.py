"""What a hook handler returns. There is no around(next), no short-circuit and no access
to the underlying action: a hook can only let the stage continue, replace writable
top-level fields of the payload, or reject (where the point allows it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True, slots=True)
class Continue:
    """Leave the payload as it is."""


@dataclass(frozen=True, slots=True)
class PatchInput:
    """Replace top-level fields of a before-stage payload."""

    fields: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class PatchOutput:
    """Replace top-level fields of an after-stage payload."""

    fields: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class Reject:
    """Stop the action before it starts. ``hook_id`` is filled in by the manager."""

    reason: str
    hook_id: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "hook_id": self.hook_id}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reject:
        return cls(reason=str(data.get("reason", "")), hook_id=str(data.get("hook_id", "")))


HookResult = Continue | PatchInput | PatchOutput | Reject
RESULT_TYPES: tuple[type, ...] = (Continue, PatchInput, PatchOutput, Reject)
