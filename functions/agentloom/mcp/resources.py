"""MCP resources of a space: what a server is, how to reach it, and their store.

A resource is a record ``space#{space}`` / ``mcp#{resource}`` in the platform store
(``agentloom.platform.store``), so it lives wherever the platform lives: the SQLite
file in embedded mode, the DynamoDB table on AWS (the same adapters and conformance
suite). Its credential (a bearer token, a custom header or, for stdio, an environment
variable) is sealed by the platform's ``SecretSealer`` — an envelope bound to the space
and the resource id — and is never returned, logged or put into events or snapshots.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentloom.platform.domain import Record
from agentloom.platform.store import PlatformStore
from agentloom.platform.store.items import ABSENT, Versioned, delete, put

Transport = Literal["streamable_http", "sse", "stdio"]
Protocol_ = Literal["auto", "2025-11-25", "2026-07-28"]
_HEADER = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")
_ENV = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
_PREFIX = re.compile(r"[a-z][a-z0-9_]{0,23}")
_FORBIDDEN_HEADERS = frozenset({"host", "content-length", "content-type", "connection",
                                "transfer-encoding", "mcp-session-id",
                                "mcp-protocol-version", "accept"})
MAX_TIMEOUT = 300.0
MAX_RESULT_CHARS = 4_000_000


class StdioLimits(BaseModel):
    """The sandbox limits of a stdio server (prlimit inside bubblewrap), per resource.
    ``memory_mb`` is the address space (RLIMIT_AS), not resident memory: Node and other
    V8-based servers reserve far more than they use (16384 is a good start for them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_mb: int = Field(default=1024, ge=64, le=65_536,
                           description="address space in MiB (RLIMIT_AS)")
    cpu_seconds: int = Field(default=60, ge=1, le=3_600,
                             description="CPU seconds of one session (RLIMIT_CPU)")
    pids: int = Field(default=128, ge=8, le=4_096, description="processes (RLIMIT_NPROC)")
    nofile: int = Field(default=256, ge=16, le=65_536,
                        description="open files (RLIMIT_NOFILE)")


class McpSpec(BaseModel):
    """How to reach one MCP server. ``url`` for ``streamable_http`` / ``sse``;
    ``command`` + ``args`` (+ read-only ``mounts``) for ``stdio``, run in the command
    sandbox under ``limits``. ``protocol``: ``auto`` negotiates (the stateless
    2026-07-28 core when the server offers it, else the 2025-11-25 initialize
    handshake); a revision pins it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    transport: Transport
    url: str | None = Field(default=None, max_length=2_000)
    protocol: Protocol_ = "auto"
    command: str | None = Field(default=None, max_length=500)
    args: tuple[str, ...] = Field(default=(), max_length=64)
    mounts: dict[str, str] = Field(
        default_factory=dict, max_length=8, description="stdio: host path -> mount name; "
        "each host path (an operator-allowed root) is mounted read-only at /skills/<name>.")
    limits: StdioLimits = Field(default_factory=StdioLimits,
                                description="stdio: the server's sandbox limits.")
    timeout_seconds: float = Field(default=30.0, gt=0, le=MAX_TIMEOUT)
    max_result_chars: int = Field(default=1_000_000, ge=1_000, le=MAX_RESULT_CHARS)
    trust_annotations: bool = Field(
        default=False, description="Believe the server's readOnlyHint / idempotentHint: a "
        "call of unknown outcome then runs again (uncertain) instead of blocking the run.")
    alias_prefix: str | None = Field(default=None, description="Prefix of derived aliases "
                                     "(lowercase letters, digits, _; default: none).")

    @field_validator("args")
    @classmethod
    def _args(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any("\x00" in a or len(a) > 2_000 for a in value):
            raise ValueError("each argument is at most 2000 characters without NUL")
        return value

    @field_validator("alias_prefix")
    @classmethod
    def _prefix(cls, value: str | None) -> str | None:
        if value is not None and not _PREFIX.fullmatch(value):
            raise ValueError("lowercase letters, digits and _, starting with a letter, "
                             "at most 24")
        return value

    @model_validator(mode="after")
    def _shape(self) -> McpSpec:
        if self.transport == "stdio":
            if not self.command or self.url is not None:
                raise ValueError("a stdio resource needs command (and no url)")
            if "\x00" in self.command:
                raise ValueError("command must not contain NUL")
            for name in self.mounts.values():
                if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,31}", name):
                    raise ValueError(f"mount name {name[:40]!r}: lowercase letters, digits, "
                                     "- and _")
            return self
        if self.command is not None or self.args or self.mounts \
                or self.limits != StdioLimits():
            raise ValueError(f"a {self.transport} resource takes url, not command/args/"
                             "mounts/limits")
        if not self.url:
            raise ValueError(f"a {self.transport} resource needs url")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("url must be an http(s) URL with a host")
        if parts.username or parts.password:
            raise ValueError("url must not carry credentials; use credential instead")
        if self.transport == "sse" and self.protocol == "2026-07-28":
            raise ValueError("the legacy SSE transport speaks 2025-11-25 only")
        return self


class Credential(BaseModel):
    """Write-only. ``bearer``: ``Authorization: Bearer <value>``; ``header``: the header
    ``name`` with ``value``; ``env``: stdio only, the variable ``name``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["bearer", "header", "env"]
    name: str | None = Field(default=None, max_length=64)
    value: str = Field(min_length=1, max_length=8_000)

    @model_validator(mode="after")
    def _shape(self) -> Credential:
        if "\r" in self.value or "\n" in self.value or "\x00" in self.value:
            raise ValueError("the credential value must not contain CR, LF or NUL")
        if self.kind == "bearer":
            if self.name is not None:
                raise ValueError("a bearer credential takes no name")
        elif self.kind == "header":
            if not self.name or not _HEADER.fullmatch(self.name) \
                    or self.name.lower() in _FORBIDDEN_HEADERS:
                raise ValueError("name must be a header name the MCP transport does not set")
        elif not self.name or not _ENV.fullmatch(self.name):
            raise ValueError("name must be an environment variable name (A-Z, 0-9, _)")
        return self

    def header_name(self) -> str | None:
        return {"bearer": "Authorization", "header": self.name}.get(self.kind)

    def header_value(self) -> str:
        return f"Bearer {self.value}" if self.kind == "bearer" else self.value


class McpResource(Record):
    """A stored resource. ``sealed_credential`` is never returned; ``credential_kind``
    and ``credential_name`` say what is stored (not its value)."""

    space_id: str
    resource_id: str
    name: str
    spec: McpSpec
    sealed_credential: str | None = None
    credential_kind: str | None = None
    credential_name: str | None = None
    revision: int = Field(ge=1)
    created_by: str
    created_at: float
    updated_at: float


class SecretSealer(Protocol):
    """``agentloom.platform.admin.SecretSealer``: seal/open bound to (space, id)."""

    def seal(self, space_id: str, connection_id: str, secret: str) -> str: ...

    def open(self, space_id: str, connection_id: str, sealed: str) -> str: ...


class McpResourceStore:
    """Typed reads and compare-and-set writes of resources over the platform store."""

    def __init__(self, store: PlatformStore) -> None:
        self.store = store

    @staticmethod
    def _key(space_id: str, resource_id: str) -> tuple[str, str]:
        return f"space#{space_id}", f"mcp#{resource_id}"

    def get(self, space_id: str, resource_id: str) -> Versioned[McpResource] | None:
        return self.store.items.get(*self._key(space_id, resource_id), McpResource)

    def list(self, space_id: str) -> list[McpResource]:
        return self.store.items.query(f"space#{space_id}", "mcp#", McpResource)

    def create(self, resource: McpResource) -> None:
        pk, sk = self._key(resource.space_id, resource.resource_id)
        self.store.items.transact([put(pk, sk, resource, ABSENT)])

    def replace(self, resource: McpResource, expect: int) -> None:
        """Raises ``WriteConflict`` when the stored version is not ``expect``."""
        pk, sk = self._key(resource.space_id, resource.resource_id)
        self.store.items.transact([put(pk, sk, resource, expect)])

    def delete(self, space_id: str, resource_id: str, expect: int) -> None:
        self.store.items.transact([delete(*self._key(space_id, resource_id), expect)])


def public_view(resource: McpResource) -> dict[str, Any]:
    """What the API returns: everything but the sealed credential."""
    data = resource.model_dump(mode="json", exclude={"sealed_credential"})
    data["has_credential"] = resource.sealed_credential is not None
    return data
