"""The checkpoint store port: a small versioned head plus append-only logs.

A run's durable state is
- a **head**: a small JSON document (phase, cursors, pending calls, plan, counters) with
  a version; every commit is conditional on the version it read (compare-and-set), so a
  stale or duplicate step raises ``CheckpointConflict`` and changes nothing;
- **logs**: append-only streams of entries (``stream``, ``seq`` from 1, JSON body) —
  source records, model-visible view messages, operation outputs, compaction snapshots;
- **blobs**: immutable, content-addressed bytes for results too large for an entry.

A commit writes the new head and its new entries atomically, so what a step persists is
proportional to what it changed, never to the length of the history. Backends implement
five primitives; ``BaseCheckpointStore`` holds the rules once.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentloom_runtime.errors import ConfigError

HEAD_LIMIT_BYTES = 200_000  # a head must stay far below a DynamoDB item (400 KB)
ENTRY_LIMIT_BYTES = 300_000  # larger entry bodies belong in blobs


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
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    try:
        text.encode()
    except UnicodeEncodeError:
        raise ConfigError("checkpoint data holds text that is not valid Unicode "
                          "(a lone surrogate)") from None
    return text


def blob_key(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class BaseCheckpointStore(ABC):
    """Validation, serialization and CAS rules; backends persist strings."""

    def load_head(self, run_id: str) -> Head | None:
        raw = self._get_head(run_id)
        if raw is None:
            return None
        version, text = raw
        return Head(version, json.loads(text))

    def commit(self, commit: Commit) -> int:
        """Write head + entries atomically iff the stored version equals
        ``commit.expected_version``. Returns the new version."""
        if commit.expected_version < 0:
            raise ConfigError("expected_version must be >= 0")
        head_text = dumps(commit.head)
        if len(head_text.encode()) > HEAD_LIMIT_BYTES:
            raise ConfigError(f"checkpoint head is {len(head_text)} bytes; limit "
                              f"{HEAD_LIMIT_BYTES}: keep history in logs")
        seen: set[tuple[str, int]] = set()
        rows: list[tuple[str, int, str]] = []
        for entry in commit.entries:
            key = (entry.stream, entry.seq)
            if entry.seq < 1 or key in seen:
                raise ConfigError(f"bad log entry {entry.stream}#{entry.seq}")
            seen.add(key)
            text = dumps(entry.body)
            if len(text.encode()) > ENTRY_LIMIT_BYTES:
                raise ConfigError(f"log entry {entry.stream}#{entry.seq} is too large; "
                                  "store the value as a blob")
            rows.append((entry.stream, entry.seq, text))
        new_version = commit.expected_version + 1
        self._write(commit.run_id, commit.expected_version, new_version, head_text, rows)
        return new_version

    def read(self, run_id: str, stream: str, after: int = 0,
             limit: int | None = None) -> list[LogEntry]:
        if after < 0 or (limit is not None and limit < 0):
            raise ConfigError("read needs after >= 0 and limit >= 0")
        if limit == 0:
            return []
        return [LogEntry(stream, seq, json.loads(text))
                for seq, text in self._query(run_id, stream, after, limit)]

    def put_blob(self, run_id: str, data: bytes) -> str:
        key = blob_key(data)
        self._put_blob(run_id, key, data)
        return key

    def get_blob(self, run_id: str, key: str) -> bytes:
        data = self._get_blob(run_id, key)
        if data is None or blob_key(data) != key:
            raise KeyError(key)
        return data

    # -- backend primitives ------------------------------------------------------------

    @abstractmethod
    def _get_head(self, run_id: str) -> tuple[int, str] | None: ...

    @abstractmethod
    def _write(self, run_id: str, expected: int, new: int, head: str,
               rows: list[tuple[str, int, str]]) -> None:
        """Atomically: check the version (0 = absent), put the head, insert rows that do
        not exist yet. Raise ``CheckpointConflict`` on a version or row clash."""

    @abstractmethod
    def _query(self, run_id: str, stream: str, after: int,
               limit: int | None) -> list[tuple[int, str]]:
        """Rows of a stream with seq > after, ascending."""

    @abstractmethod
    def _put_blob(self, run_id: str, key: str, data: bytes) -> None: ...

    @abstractmethod
    def _get_blob(self, run_id: str, key: str) -> bytes | None: ...
