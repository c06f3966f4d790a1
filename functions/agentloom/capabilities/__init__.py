"""Capabilities: the kinds of space resources a version binds (docs/contract.md#capabilities) —
Skills, MCP tools, knowledge bases — behind one seam.

A ``Capability`` takes part in two moments, and only these:

- **publish** (``AdminService.publish``): ``pin`` checks that the draft's references to
  the space's resources of its kind exist and freezes them into the version (content
  hashes, published schemas), so editing a resource never changes an old version; an
  error is an ``Invalid`` naming the draft field.
- **engine build** (every host: the embedded worker, the CLI, the step Lambda):
  ``tools`` returns the trusted ``ToolDefinition`` s the bound resources add for one
  run, with their handlers; the engine never branches on a capability's name; and
  ``services``: trusted objects those handlers (or the built-in tools) read from
  ``ToolContext.services`` — e.g. the skill mounts ``workspace_command`` binds; and
  ``credentials``: the secret values the bound resources send (MCP credentials), which
  the host gives to its redactor like the model key. Derive from ``CapabilityBase`` for
  the defaults (none).

``Capabilities`` is the ordered set a host wires once and passes to both places.
``LazyCapability`` builds one on first use (a host wires all three, a run loads only the
kinds its snapshot binds: a Lambda's cold start does not import the MCP SDK for a run
without MCP tools); ``Capabilities.find`` returns the one of a given type, built.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from agentloom_runtime.errors import ConfigError
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.tool_contracts import ToolDefinition


@dataclass(frozen=True)
class RunScope:
    """Where a run's tools act: its space, agent version, session and run."""

    space_id: str
    agent_id: str
    version: int
    session_id: str
    run_id: str


class Capability(Protocol):
    kind: str  # "skills", "mcp", "knowledge" — used in error messages and docs only

    def pin(self, space_id: str, config: Mapping[str, Any]) -> dict[str, Any]:
        """The draft configuration with this kind's references checked and frozen."""
        ...

    def tools(self, snapshot: AgentSnapshot, scope: RunScope) -> list[ToolDefinition]:
        """The tools the snapshot's bound resources of this kind add to a run."""
        ...

    def services(self, snapshot: AgentSnapshot, scope: RunScope) -> dict[str, Any]:
        """Trusted services for the run's tool handlers (``ToolContext.services``)."""
        ...

    def credentials(self, snapshot: AgentSnapshot, scope: RunScope) -> list[str]:
        """The secret values the snapshot's bound resources of this kind send (for the
        host's redactor: never shown in a record, an answer or an event)."""
        ...


class CapabilityBase:
    """Defaults for a ``Capability``'s optional parts: no services, no credentials."""

    def services(self, snapshot: AgentSnapshot, scope: RunScope) -> dict[str, Any]:
        return {}

    def credentials(self, snapshot: AgentSnapshot, scope: RunScope) -> list[str]:
        return []


C = TypeVar("C")


@dataclass(eq=False)
class LazyCapability:
    """A ``Capability`` of ``kind`` built by ``build`` when first needed: at a publish
    (``pin``), or for a run whose snapshot ``binds`` this kind (``tools``, ``services``,
    ``credentials``; for any other run the answers are the defaults — none — which the
    built capability gives too when nothing of its kind is bound). ``binds`` must be
    conservative: True whenever the built capability could answer something."""

    kind: str
    build: Callable[[], Capability]
    binds: Callable[[AgentSnapshot], bool]
    _built: Capability | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def built(self) -> Capability:
        with self._lock:
            if self._built is None:
                self._built = self.build()
            return self._built

    def pin(self, space_id: str, config: Mapping[str, Any]) -> dict[str, Any]:
        return self.built().pin(space_id, config)

    def tools(self, snapshot: AgentSnapshot, scope: RunScope) -> list[ToolDefinition]:
        return self.built().tools(snapshot, scope) if self.binds(snapshot) else []

    def services(self, snapshot: AgentSnapshot, scope: RunScope) -> dict[str, Any]:
        return self.built().services(snapshot, scope) if self.binds(snapshot) else {}

    def credentials(self, snapshot: AgentSnapshot, scope: RunScope) -> list[str]:
        return self.built().credentials(snapshot, scope) if self.binds(snapshot) else []


@dataclass(frozen=True)
class Capabilities:
    items: tuple[Capability, ...] = ()

    @classmethod
    def of(cls, items: Iterable[Capability]) -> Capabilities:
        return cls(tuple(items))

    def find(self, kind: type[C]) -> C | None:
        """The capability of that type (a lazy one of its ``kind`` built), or None."""
        for capability in self.items:
            if (isinstance(capability, LazyCapability)
                    and capability.kind == getattr(kind, "kind", None)):
                capability = capability.built()
            if isinstance(capability, kind):
                return capability
        return None

    def pin(self, space_id: str, config: Mapping[str, Any]) -> dict[str, Any]:
        pinned = dict(config)
        for capability in self.items:
            pinned = capability.pin(space_id, pinned)
        return pinned

    def tools(self, snapshot: AgentSnapshot, scope: RunScope) -> list[ToolDefinition]:
        return [tool for capability in self.items
                for tool in capability.tools(snapshot, scope)]

    def credentials(self, snapshot: AgentSnapshot, scope: RunScope) -> list[str]:
        return [value for capability in self.items
                for value in capability.credentials(snapshot, scope)]

    def services(self, snapshot: AgentSnapshot, scope: RunScope) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for capability in self.items:
            for name, service in capability.services(snapshot, scope).items():
                if name in merged:
                    raise ConfigError(f"two capabilities provide the service {name!r}")
                merged[name] = service
        return merged


# What a snapshot binds, for a ``LazyCapability``'s ``binds`` (the AWS and embedded sets).
def binds_skills(snapshot: AgentSnapshot) -> bool:
    return bool(snapshot.skills) or any(t.skills for t in snapshot.subagents)


def binds_mcp(snapshot: AgentSnapshot) -> bool:
    return bool(snapshot.mcp_tools)


def binds_knowledge(snapshot: AgentSnapshot) -> bool:
    return bool(snapshot.knowledge_bases) or any(t.knowledge_bases
                                                 for t in snapshot.subagents)
