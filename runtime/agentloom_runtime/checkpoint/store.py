"""The checkpoint store port: a small versioned head plus append-only logs.

A run's durable state is
- a **head**: a small JSON document (phase, cursors, pending calls, plan, counters) with
  a version; every commit is conditional on the version it read (compare-and-set), so a
  stale or duplicate step raises ``CheckpointConflict`` and changes nothing;
- **logs**: append-only streams of entries (``stream``, ``seq`` from 1, JSON body) —
  source records, model-visible view messages, operation outputs, compaction snapshots;
- **blobs**: immutable, content-addressed bytes (``sha256:<hex>``) of any size.

A commit writes the new head and its new entries atomically, so what a step persists is
proportional to what it changed, never to the length of the history. Backends implement
five primitives; ``BaseCheckpointStore`` holds the rules once.

**No size wedges a run.** A head or an entry body whose serialized JSON (UTF-8) is
larger than ``HEAD_INLINE_BYTES`` / ``ENTRY_INLINE_BYTES`` is *spilled*: its text goes to
a blob and the row holds a reference ::

    {"$spill": "sha256:<hex of the text>", "bytes": <length of the text in bytes>}

``load_head`` and ``read`` return the original body; callers never see a reference. A
body whose top level has a ``"$spill"`` key is always spilled, whatever its size, so a
row holding such a key is unambiguously a reference. The blobs a commit refers to are
written *before* its conditional write: they are content-addressed, so a crash or a lost
compare-and-set leaves at most an unreferenced blob, never a dangling reference, and a
retry writes the same keys again. With both limits at 32 KiB, the rows of a commit of
up to 100 items stay below DynamoDB's 4 MB transaction limit whatever the bodies hold.

Text that is not valid Unicode (a lone surrogate) in a body, a run id or a stream name
is refused with ``ConfigError`` before anything is written.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentloom_runtime.errors import ConfigError, PersistenceError

HEAD_INLINE_BYTES = 32 * 1024  # a larger head is spilled (heads are normally <= 2 KB)
ENTRY_INLINE_BYTES = 32 * 1024  # a larger entry body is spilled
SPILL_KEY = "$spill"  # the reference's key: {"$spill": <blob key>, "bytes": <n>}


@dataclass(frozen=True)
class LogEntry:
    stream: str
    seq: int
    body: dict[str, Any]


@dataclass(frozen=True)
class Commit:
    run_id: str
    expected_version: int  # 0 creates the run
    head: dict[str, Any]
    entries: Sequence[LogEntry] = field(default_factory=tuple)


@dataclass(frozen=True)
class Head:
    version: int
    body: dict[str, Any]


def dumps(value: Any) -> str:
    """The stored JSON text of ``value``; ``ConfigError`` on a lone surrogate."""
    return _serialize(value)[0]


def blob_key(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class BaseCheckpointStore(ABC):
    """Validation, serialization, spilling and CAS rules; backends persist strings."""

    def load_head(self, run_id: str) -> Head | None:
        _check_name(run_id, "run_id")
        raw = self._get_head(run_id)
        if raw is None:
            return None
        version, text = raw
        return Head(version, self._load_body(run_id, text))

    def commit(self, commit: Commit) -> int:
        """Write head + entries atomically iff the stored version equals
        ``commit.expected_version``. Returns the new version."""
        if commit.expected_version < 0:
            raise ConfigError("expected_version must be >= 0")
        _check_name(commit.run_id, "run_id")
        spilled: dict[str, bytes] = {}  # blob key -> text, written before the commit
        head_text = _inline_or_spill(commit.head, HEAD_INLINE_BYTES, spilled)
        seen: set[tuple[str, int]] = set()
        rows: list[tuple[str, int, str]] = []
        for entry in commit.entries:
            key = (entry.stream, entry.seq)
            if entry.seq < 1 or key in seen:
                raise ConfigError(f"bad log entry {entry.stream}#{entry.seq}")
            _check_name(entry.stream, "stream")
            seen.add(key)
            rows.append((entry.stream, entry.seq,
                         _inline_or_spill(entry.body, ENTRY_INLINE_BYTES, spilled)))
        for blob, data in spilled.items():
            self._put_blob(commit.run_id, blob, data)
        new_version = commit.expected_version + 1
        self._write(commit.run_id, commit.expected_version, new_version, head_text, rows)
        return new_version

    def read(self, run_id: str, stream: str, after: int = 0,
             limit: int | None = None) -> list[LogEntry]:
        if after < 0 or (limit is not None and limit < 0):
            raise ConfigError("read needs after >= 0 and limit >= 0")
        _check_name(run_id, "run_id")
        _check_name(stream, "stream")
        if limit == 0:
            return []
        return [LogEntry(stream, seq, self._load_body(run_id, text))
                for seq, text in self._query(run_id, stream, after, limit)]

    def put_blob(self, run_id: str, data: bytes) -> str:
        _check_name(run_id, "run_id")
        key = blob_key(data)
        self._put_blob(run_id, key, data)
        return key

    def get_blob(self, run_id: str, key: str) -> bytes:
        _check_name(run_id, "run_id")
        data = self._get_blob(run_id, key)
        if data is None or blob_key(data) != key:
            raise KeyError(key)
        return data

    def _load_body(self, run_id: str, text: str) -> Any:
        """A stored row's body: the row itself, or the text its reference names."""
        body = json.loads(text)
        if not (isinstance(body, dict) and SPILL_KEY in body):
            return body
        key, size = body[SPILL_KEY], body.get("bytes")
        if not isinstance(key, str) or not isinstance(size, int) or len(body) != 2:
            raise PersistenceError(f"run {run_id}: malformed spill reference {text[:200]}",
                                   details={"run_id": run_id})
        try:
            data = self.get_blob(run_id, key)
        except KeyError:
            data = None
        if data is None or len(data) != size:
            raise PersistenceError(f"run {run_id}: spilled value {key} is missing",
                                   details={"run_id": run_id, "blob": key})
        return json.loads(data)

    # -- backend primitives ------------------------------------------------------------

    @abstractmethod
    def _get_head(self, run_id: str) -> tuple[int, str] | None: ...

    @abstractmethod
    def _write(self, run_id: str, expected: int, new: int, head: str,
               rows: list[tuple[str, int, str]]) -> None:
        """Atomically: check the version (0 = absent), put the head, insert rows that do
        not exist yet. Raise ``CheckpointConflict`` on a version or row clash. The head
        and rows are at most a spill reference larger than the inline limits."""

    @abstractmethod
    def _query(self, run_id: str, stream: str, after: int,
               limit: int | None) -> list[tuple[int, str]]:
        """Rows of a stream with seq > after, ascending."""

    @abstractmethod
    def _put_blob(self, run_id: str, key: str, data: bytes) -> None:
        """Store ``data`` under its key, of any size; a no-op if the key is present.
        Complete once it returns: a reader sees the whole blob or none of it."""

    @abstractmethod
    def _get_blob(self, run_id: str, key: str) -> bytes | None: ...


def _serialize(value: Any) -> tuple[str, bytes]:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    try:
        return text, text.encode()
    except UnicodeEncodeError:
        raise ConfigError("checkpoint data holds text that is not valid Unicode "
                          "(a lone surrogate)") from None


def _inline_or_spill(body: Any, limit: int, spilled: dict[str, bytes]) -> str:
    """The row text for ``body``: itself, or a reference to a blob holding it (added to
    ``spilled``)."""
    text, data = _serialize(body)
    if len(data) <= limit and not (isinstance(body, dict) and SPILL_KEY in body):
        return text
    key = blob_key(data)
    spilled[key] = data
    return _serialize({SPILL_KEY: key, "bytes": len(data)})[0]


def _check_name(value: str, what: str) -> None:
    try:
        value.encode()
    except UnicodeEncodeError:
        raise ConfigError(f"{what} is not valid Unicode (a lone surrogate)") from None
