"""The platform's records: spaces, members, agents with drafts and published versions,
sessions, runs, tokens, idempotency keys, the session record stream and run events.

Every record is a frozen pydantic model with a format version (it is what a store
writes). Identifiers are generated here: a prefix, 12 hex digits of milliseconds and 8
random hex digits (``ses_0192f3a4b5c6d7e8f9a0b1c2``), so ids sort by creation time and
match the snapshot's name rule (space and agent ids enter the published snapshot).

A published version freezes the whole ``AgentSnapshot`` (prompt, model connection,
tools, Skills, knowledge bases, sub-agent templates, hooks, hook packages, context
policy, limits) and is content-hashed: ``content_hash`` is the sha256 of the canonical
JSON of that snapshot (sorted keys, no spaces, UTF-8). A run binds the version it
started with; a later draft never changes it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

FORMAT: Literal[1] = 1

Role = Literal["owner", "admin", "member"]
ROLES: tuple[Role, ...] = ("owner", "admin", "member")
RANK: dict[str, int] = {"member": 1, "admin": 2, "owner": 3}

RunState = Literal["queued", "running", "blocked", "completed", "failed", "cancelled",
                   "interrupted"]
"""A run as the platform lists it: ``queued`` (asked, not started yet), the engine's
statuses, and ``interrupted`` (the engine says running, but nothing drives it: the
process that drove it stopped; resume or cancel it)."""
RUN_STATES: tuple[RunState, ...] = ("queued", "running", "blocked", "completed", "failed",
                                    "cancelled", "interrupted")
ACTIVE_STATES = frozenset({"queued", "running", "interrupted"})  # they hold the session
ENDED_STATES = frozenset({"completed", "failed", "cancelled"})  # nothing moves them on
MOVING_STATES = frozenset({"queued", "running"})  # a driver moves them on (or is to)


def new_id(prefix: str) -> str:
    return f"{prefix}_{int(time.time() * 1000):012x}{secrets.token_hex(4)}"


def now() -> float:
    return round(time.time(), 3)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(value).encode()).hexdigest()


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal[1] = 1


class Space(Record):
    space_id: str
    name: str
    created_by: str
    created_at: float


class Member(Record):
    space_id: str
    user_id: str
    role: Role
    added_by: str
    added_at: float


class Agent(Record):
    space_id: str
    agent_id: str
    name: str
    created_by: str
    created_at: float
    latest_version: int = 0  # 0: never published


class Draft(Record):
    """The editable configuration: every snapshot field except the ones the platform
    sets (format, space_id, agent_id, version, legacy), with defaults written out."""

    space_id: str
    agent_id: str
    revision: int = Field(ge=1)
    config: dict[str, Any]
    updated_by: str
    updated_at: float


class AgentVersion(Record):
    space_id: str
    agent_id: str
    version: int = Field(ge=1)
    content_hash: str
    snapshot: dict[str, Any]  # the frozen AgentSnapshot, as JSON
    legacy: bool = False  # published before budget policies: keeps the character policy
    draft_revision: int = 0
    published_by: str
    published_at: float


class Session(Record):
    """A user's conversation with one published agent version. ``active_run`` and
    ``driver`` are the session's lease (``agentloom.platform.lease``): the run that holds
    it (queued, running or interrupted) and the process that drives it."""

    session_id: str
    space_id: str
    agent_id: str
    version: int
    user_id: str
    title: str = ""
    created_at: float
    active_run: str | None = None
    driver: dict[str, Any] | None = None
    runs: int = 0
    thread: str | None = None  # a protocol client's thread (sha256), unique per user+agent


class Usage(BaseModel):
    """Provider usage summed over a run's model calls, all purposes and sub-agents, and
    its cost (the sum of the calls' costs, from the version's connection prices; None
    while no call had one: a connection without prices)."""

    model_config = ConfigDict(extra="forbid")

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None
    by_purpose: dict[str, dict[str, int]] = Field(default_factory=dict)

    def add(self, purpose: str, usage: Any, cost: Any = None) -> Usage:
        """With one more call: its provider ``usage`` and ``cost`` (as its record keeps
        them; anything but a number is no cost)."""
        tokens = usage_tokens(usage)
        part = dict(self.by_purpose.get(purpose) or {"calls": 0, "input_tokens": 0,
                                                     "output_tokens": 0})
        part["calls"] += 1
        part["input_tokens"] += tokens[0]
        part["output_tokens"] += tokens[1]
        priced = isinstance(cost, int | float) and not isinstance(cost, bool)
        total = self.cost if not priced else round((self.cost or 0.0) + float(cost), 9)
        return Usage(calls=self.calls + 1, input_tokens=self.input_tokens + tokens[0],
                     output_tokens=self.output_tokens + tokens[1],
                     total_tokens=self.total_tokens + tokens[2], cost=total,
                     by_purpose={**self.by_purpose, purpose: part})


def usage_tokens(usage: Any) -> tuple[int, int, int]:
    """(input, output, total) from a provider's usage (chat-completions or responses
    names); missing or malformed numbers count as 0."""
    if not isinstance(usage, dict):
        return 0, 0, 0

    def number(*names: str) -> int:
        for name in names:
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
        return 0

    given = number("prompt_tokens", "input_tokens")
    produced = number("completion_tokens", "output_tokens")
    return given, produced, number("total_tokens") or given + produced


class Run(Record):
    run_id: str
    session_id: str
    space_id: str
    agent_id: str
    version: int
    user_id: str
    status: RunState = "queued"
    created_at: float
    updated_at: float
    error: dict[str, str] | None = None  # {"code", "message"} of the last stop
    usage: Usage = Field(default_factory=Usage)
    cancel_requested_by: str | None = None


class RunIndex(Record):
    """A run in the space's status index (operators list runs by status): ids, status,
    and its usage and cost — never content. ``usage`` is written with the run's record
    in the commits that add to it (``store.sessions.record_writes``), so listing reads
    no checkpoint; None on an entry indexed before the index carried usage (a run that
    has not changed since)."""

    run_id: str
    session_id: str
    space_id: str
    user_id: str
    agent_id: str
    version: int
    status: RunState
    updated_at: float
    error_code: str | None = None
    usage: Usage | None = None


class Token(Record):
    token_id: str
    user_id: str
    label: str = ""
    secret_sha256: str  # hex sha256 of the whole secret; the secret is never stored
    created_at: float
    expires_at: float | None = None
    revoked: bool = False


class Idempotency(Record):
    session_id: str
    key_sha256: str
    run_id: str
    request_hash: str
    user_id: str
    created_at: float
    expires_at: float


class OpenRun(BaseModel):
    """A run whose records are still synced into the session stream: per instance, the
    last source seq synced; the last ``ops`` seq read for usage; its last status record;
    its usage totals while it runs (``usage``: folded into the run item and its index
    entry when its status changes, so a model call's commit writes the stream head
    only; None: the run item's are current)."""

    model_config = ConfigDict(extra="forbid")

    src: dict[str, int] = Field(default_factory=dict)
    ops: int = 0
    noted: str = ""
    usage: Usage | None = None


class SessionRecord(Record):
    """One entry of a session's record stream. ``src`` refers to the run's source record
    (``src:<instance>`` seq; the content stays in the run, stored once); a status record
    of the platform (kind ``status``) has no ``src`` and carries its note."""

    seq: int
    run_id: str
    instance: str
    kind: str
    entry_key: str  # the dedup key within (run_id, instance): "src:<n>" or "status:<e>:<s>"
    src: int | None = None
    note: dict[str, Any] | None = None
    at: float


class StreamHead(Record):
    """A session stream's head: the next seq, the open runs' cursors, and ``tail``: the
    newest records, main's only, not yet in a batch item — they ride in this item,
    which every commit with records writes anyway, until it would outgrow one write
    unit (``agentloom.platform.store.sessions.record_writes``)."""

    session_id: str
    seq: int = 0
    open: dict[str, OpenRun] = Field(default_factory=dict)
    tail: list[SessionRecord] = Field(default_factory=list)

    # the head is kept small (its tail's room): defaults are left out, and in the tail
    # main's instance and an entry key that says what ``src`` says
    @field_serializer("open")
    def _compact_open(self, open_runs: dict[str, OpenRun]) -> dict[str, Any]:
        return {run_id: cursor.model_dump(mode="json", exclude_defaults=True)
                for run_id, cursor in open_runs.items()}

    @field_serializer("tail")
    def _compact_tail(self, tail: list[SessionRecord]) -> list[dict[str, Any]]:
        return [compact_record(record) for record in tail]

    @field_validator("tail", mode="before")
    @classmethod
    def _full_tail(cls, tail: Any) -> Any:
        if not isinstance(tail, list):
            return tail
        return [full_record(r) if isinstance(r, dict) else r for r in tail]


def compact_record(record: SessionRecord) -> dict[str, Any]:
    """A record as the stream stores it (tail and batches): defaults left out, main's
    instance and an entry key that says what ``src`` says too (``full_record``)."""
    data = record.model_dump(mode="json", exclude_defaults=True)
    if record.instance == "main":
        del data["instance"]
    if record.src is not None and record.entry_key == f"src:{record.src}":
        del data["entry_key"]
    return data


def full_record(data: dict[str, Any]) -> dict[str, Any]:
    """A stored record's fields, those ``compact_record`` left out filled in."""
    implied: dict[str, Any] = {"instance": "main"}
    if data.get("src") is not None:
        implied["entry_key"] = f"src:{data['src']}"
    return {**implied, **data}


class Event(Record):
    run_id: str
    seq: int
    type: str
    at: float
    data: dict[str, Any]


class ModelConnectionRecord(Record):
    """A space's model connection (item ``space#{space}`` / ``model#{connection}``).
    ``spec`` is a ``agentloom.models.ModelConnectionSpec`` as JSON, its ``api_key_ref``
    the connection id when a key is stored (else None: a keyless openai_compatible
    server). ``sealed_key`` is the key sealed by the platform's ``SecretSealer`` (an
    envelope bound to the space and the connection id); it is never returned."""

    space_id: str
    connection_id: str
    name: str
    spec: dict[str, Any]
    sealed_key: str | None = None
    revision: int = Field(ge=1)
    created_by: str
    created_at: float
    updated_by: str
    updated_at: float
