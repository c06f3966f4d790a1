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

**Heads as deltas.** A head above 512 bytes is stored as a delta against a *base*: an
earlier head of the run, kept once as a content-addressed blob (written, like a spilled
value, before the conditional write) — ``{"$base": "sha256:<hex>", "$delta": <patch>}``
(``_bases``). What changes every commit is all a row holds, so a head row stays below
~640 bytes (one DynamoDB write unit's 1 KB, sealed); the store rebases when the delta
outgrows that, at most once every 4 commits. ``load_head`` returns the whole head.

**Encryption is one codec under every adapter.** A store given a ``codec``
(``RecordCodec``; the implementation is ``agentloom.crypto.EnvelopeCodec``) seals every
value it persists — head texts, entry bodies, spill references, blobs and spilled
bodies — after serializing and spilling, and opens it after reading, before parsing:
backends see only envelopes. Rows hold the envelope in standard base64 (they are text);
blobs hold it raw. Each envelope is bound to its item's identity (``ItemId``: the head
of a run at a version, a run's stream and seq, a run's blob key), so a ciphertext moved
to another item fails to open (``PersistenceError``). What stays plaintext is the index:
run ids, stream names, seqs, head versions, blob keys (the SHA-256 of the plaintext).
With a codec the inline limits bound the row *as stored*, so the largest inline body
is ``_inline_bytes(limit)``: about 3/4 of the limit, less the envelope's overhead.
The codec keeps its key records (wrapped data keys, never plaintext ones) in the run's
blob space through ``KeySlots``, under names no content hash takes; the store writes
them, like spilled values, before the conditional write that refers to them.

**Companion writes: a host's records ride in the run's commit.** A store given a
``companion`` (``CommitCompanion``) asks it, before each commit's transaction, for the
host's writes that belong with this commit (``prepare``: e.g. the session stream's new
record references, its head, the run's usage totals) and writes them in the *same*
transaction as the head: the same SQLite transaction, the same TransactWriteItems.
So a crash leaves either the head and the host's writes or neither. The runtime never
looks inside them: ``CompanionWrites.join`` adds them to the backend's transaction
(each adapter documents what its ``transaction`` object is), and raises
``CompanionConflict`` when one of their own conditions fails (the host's data changed
since ``prepare`` read it); the store then asks the companion again and retries, up to
``COMPANION_ATTEMPTS`` times, without touching the run's own compare-and-set.
``committed`` runs once the transaction holds (notifications; it must not raise). A
commit whose head conflicts changes nothing, the host's writes included.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentloom_runtime.errors import ConfigError, PersistenceError

from . import _bases
from ._ports import (
    CommitCompanion,
    CompanionConflict,
    CompanionWrites,
    KeySlots,
    RecordCodec,
    Sealer,
)

__all__ = ["BaseCheckpointStore", "Commit", "CommitCompanion", "CompanionConflict",
           "CompanionWrites", "Head", "ItemId", "KeySlots", "LogEntry", "RecordCodec",
           "Sealer", "blob_key", "dumps"]

HEAD_INLINE_BYTES = 32 * 1024  # a larger head is spilled (heads are normally <= 2 KB)
ENTRY_INLINE_BYTES = 32 * 1024  # a larger entry body is spilled
HEAD_DELTA_BYTES = _bases.DELTA_BYTES  # a larger head delta row rebases (``_delta_bytes``)
SPILL_KEY = "$spill"  # the reference's key: {"$spill": <blob key>, "bytes": <n>}
COMMIT_INLINE_BYTES = 1024 * 1024  # rows of one commit above this total: largest spilled
COMPANION_ATTEMPTS = 20  # prepare + write again while the companion's writes conflict


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


@dataclass(frozen=True)
class ItemId:
    """What a stored value is: the identity a codec binds its ciphertext to (AAD).

    ``kind`` "head": ``number`` is the head's version; "log": ``name`` is the stream and
    ``number`` the seq; "blob": ``name`` is the blob key."""

    kind: Literal["head", "log", "blob"]
    run_id: str
    name: str = ""
    number: int = 0

    @classmethod
    def head(cls, run_id: str, version: int) -> ItemId:
        return cls("head", run_id, "", version)

    @classmethod
    def log(cls, run_id: str, stream: str, seq: int) -> ItemId:
        return cls("log", run_id, stream, seq)

    @classmethod
    def blob(cls, run_id: str, key: str) -> ItemId:
        return cls("blob", run_id, key, 0)

    def describe(self) -> str:
        if self.kind == "head":
            return f"the head (version {self.number})"
        if self.kind == "log":
            return f"entry {self.name}#{self.number}"
        return f"blob {self.name}"


def dumps(value: Any) -> str:
    """The stored JSON text of ``value``; ``ConfigError`` on a lone surrogate."""
    return _serialize(value)[0]


def blob_key(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class BaseCheckpointStore(ABC):
    """Validation, serialization, spilling, encryption and CAS rules; backends persist
    strings and bytes.

    ``codec``: encrypt everything persisted with it (``RecordCodec``); without one
    (``None``) values are stored as plaintext JSON."""

    _codec: RecordCodec | None = None  # for adapters whose constructor predates the hook

    _companion: CommitCompanion | None = None

    head_bases = True  # store a large head as a delta against a base (``_bases``)
    _base_cache: _bases.Bases | None = None

    @property
    def _remembered(self) -> _bases.Bases:
        if self._base_cache is None:  # also for adapters that skip __init__
            self._base_cache = _bases.Bases()
        return self._base_cache

    def __init__(self, *, codec: RecordCodec | None = None,
                 companion: CommitCompanion | None = None) -> None:
        self._codec = codec
        self._companion = companion

    @property
    def companion(self) -> CommitCompanion | None:
        return self._companion

    def attach(self, companion: CommitCompanion) -> None:
        """Join ``companion``'s writes to every later commit — for a host whose
        companion needs a store opened after this one; attach before the first commit."""
        if self._companion is not None and self._companion is not companion:
            raise ConfigError("this checkpoint store already has a companion")
        self._companion = companion

    def load_head(self, run_id: str) -> Head | None:
        _check_name(run_id, "run_id")
        raw = self._get_head(run_id)
        if raw is None:
            return None
        version, text = raw
        body = self._load_body(run_id, self._open_row(ItemId.head(run_id, version), text))
        if _bases.is_reference(body):
            body = self._based(run_id, body)
        return Head(version, body)

    def commit(self, commit: Commit) -> int:
        """Write head + entries atomically iff the stored version equals
        ``commit.expected_version``. Returns the new version."""
        if commit.expected_version < 0:
            raise ConfigError("expected_version must be >= 0")
        run_id = commit.run_id
        _check_name(run_id, "run_id")
        spilled: dict[str, bytes] = {}  # blob key -> text, written before the commit
        head_text, base = self._head_row(commit, spilled)
        rows = self._entry_rows(commit, spilled)
        # Everything is validated: from here on the backend may be written to.
        new_version = commit.expected_version + 1
        sealer = self._sealer(run_id)  # may store the run's key record first
        head_row = _seal_row(sealer, ItemId.head(run_id, new_version), head_text)
        sealed = [(stream, seq, _seal_row(sealer, ItemId.log(run_id, stream, seq), text))
                  for stream, seq, text in rows]
        for blob, data in spilled.items():
            self._put_blob(run_id, blob, _seal_blob(sealer, ItemId.blob(run_id, blob), data))
        for attempt in range(COMPANION_ATTEMPTS):
            joined = None if self._companion is None else self._companion.prepare(self,
                                                                                  commit)
            try:
                self._write(run_id, commit.expected_version, new_version, head_row, sealed,
                            joined)
            except CompanionConflict:
                if attempt == COMPANION_ATTEMPTS - 1:
                    raise
                time.sleep(0.001 * (attempt + 1))
                continue
            if joined is not None:
                joined.committed()
            break
        if base is not None:
            self._remembered.put(run_id, base)
        return new_version

    def _head_row(self, commit: Commit, spilled: dict[str, bytes]
                  ) -> tuple[str, _bases.Base | None]:
        """The head's row text: the head itself (or its spill reference), or a delta
        against the run's base (``_bases``; a new base goes to ``spilled``), and the base
        the row refers to."""
        head = commit.head
        text, data = _serialize(head)
        forced = _bases.is_reference(head)
        if not forced and (not self.head_bases or len(data) <= _bases.BASE_MIN_BYTES):
            return self._inline_or_spill(head, HEAD_INLINE_BYTES, spilled, (text, data)), None
        version = commit.expected_version + 1
        base = self._remembered.get(commit.run_id)
        if base is not None and not forced:
            row = {_bases.BASE_KEY: base.key, _bases.DELTA_KEY: _bases.diff(base.body, head)}
            delta = _serialize(row)
            size = len(delta[1])
            if size <= self._delta_bytes(commit.run_id):
                return self._inline_or_spill(row, HEAD_INLINE_BYTES, spilled, delta), base
            if version - base.made_at < _bases.REBASE_COMMITS:  # no blob per commit
                if size < len(data):
                    return self._inline_or_spill(row, HEAD_INLINE_BYTES, spilled, delta), base
                return self._inline_or_spill(head, HEAD_INLINE_BYTES, spilled,
                                             (text, data)), None
        new = _bases.Base(blob_key(data), text, json.loads(text), version)
        spilled[new.key] = data
        return _serialize({_bases.BASE_KEY: new.key, _bases.DELTA_KEY: {}})[0], new

    def _delta_bytes(self, run_id: str) -> int:
        """The largest delta row (plaintext JSON bytes) before a rebase; an adapter
        billed by item size may allow what still fits its unit."""
        return HEAD_DELTA_BYTES

    def _based(self, run_id: str, row: dict[str, Any]) -> dict[str, Any]:
        """The head a base reference stands for (the base remembered for the run's
        next commit)."""
        parsed = _bases.parse_reference(row)
        if parsed is None:
            raise PersistenceError(f"run {run_id}: malformed head base reference",
                                   details={"run_id": run_id})
        key, patch = parsed
        base = self._remembered.get(run_id)
        if base is None or base.key != key:
            try:
                text = self.get_blob(run_id, key).decode()
            except KeyError:
                raise PersistenceError(f"run {run_id}: the head's base {key} is missing",
                                       details={"run_id": run_id, "blob": key}) from None
            base = _bases.Base(key, text, json.loads(text), 0)
            self._remembered.put(run_id, base)
        body: dict[str, Any] = json.loads(base.text)
        try:
            return _bases.apply(body, patch)
        except ValueError as exc:
            raise PersistenceError(f"run {run_id}: {exc}", details={"run_id": run_id}) from None

    def _entry_rows(self, commit: Commit, spilled: dict[str, bytes]
                    ) -> list[tuple[str, int, str]]:
        """The rows of the commit's entries; past ``COMMIT_INLINE_BYTES`` in total the
        largest bodies are spilled, so a commit of any number of entries fits a
        transaction (a reference is ~100 bytes)."""
        seen: set[tuple[str, int]] = set()
        texts: list[tuple[str, int, str]] = []
        for entry in commit.entries:
            key = (entry.stream, entry.seq)
            if entry.seq < 1 or key in seen:
                raise ConfigError(f"bad log entry {entry.stream}#{entry.seq}")
            _check_name(entry.stream, "stream")
            seen.add(key)
            texts.append((entry.stream, entry.seq,
                          self._inline_or_spill(entry.body, ENTRY_INLINE_BYTES, spilled)))
        total = sum(len(text.encode()) for _, _, text in texts)
        if total <= COMMIT_INLINE_BYTES:
            return texts
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i][2].encode()))
        for index in order:
            if total <= COMMIT_INLINE_BYTES:
                break
            stream, seq, text = texts[index]
            if text.startswith('{"$spill"'):
                continue
            ref = self._spill_text(text, spilled)
            total += len(ref.encode()) - len(text.encode())
            texts[index] = (stream, seq, ref)
        return texts

    def read(self, run_id: str, stream: str, after: int = 0,
             limit: int | None = None) -> list[LogEntry]:
        if after < 0 or (limit is not None and limit < 0):
            raise ConfigError("read needs after >= 0 and limit >= 0")
        _check_name(run_id, "run_id")
        _check_name(stream, "stream")
        if limit == 0:
            return []
        return [LogEntry(stream, seq, self._load_body(run_id, self._open_row(
                    ItemId.log(run_id, stream, seq), text)))
                for seq, text in self._query(run_id, stream, after, limit)]

    def put_blob(self, run_id: str, data: bytes) -> str:
        _check_name(run_id, "run_id")
        key = blob_key(data)
        self._put_blob(run_id, key,
                       _seal_blob(self._sealer(run_id), ItemId.blob(run_id, key), data))
        return key

    def get_blob(self, run_id: str, key: str) -> bytes:
        _check_name(run_id, "run_id")
        data = self._get_blob(run_id, key)
        if data is not None and self._codec is not None:
            data = self._codec.open(ItemId.blob(run_id, key), data, _KeySlots(self))
        if data is None or blob_key(data) != key:
            raise KeyError(key)
        return data

    # -- the codec hook ----------------------------------------------------------------

    def _inline_bytes(self, limit: int) -> int:
        """The largest serialized body (UTF-8 bytes) kept in its row, for a row limit of
        ``limit``: the limit itself, or what fits once sealed and base64-encoded."""
        if self._codec is None:
            return limit
        return 3 * (limit // 4) - self._codec.overhead

    def _sealer(self, run_id: str) -> Sealer | None:
        return None if self._codec is None else self._codec.sealer(run_id, _KeySlots(self))

    def _open_row(self, item: ItemId, text: str) -> str:
        """The JSON text of a stored row (``text`` itself without a codec)."""
        if self._codec is None:
            return text
        try:
            envelope = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise PersistenceError(
                f"run {item.run_id}: {item.describe()} is not encrypted, in an encrypted "
                "store (plaintext written by a store without its codec?)",
                details={"run_id": item.run_id}) from None
        return self._codec.open(item, envelope, _KeySlots(self)).decode()

    def _inline_or_spill(self, body: Any, limit: int, spilled: dict[str, bytes],
                         serialized: tuple[str, bytes] | None = None) -> str:
        """The row text for ``body`` (``serialized``: its ``_serialize`` already made):
        itself, or a reference to a blob holding it (added to ``spilled``)."""
        text, data = serialized or _serialize(body)
        if len(data) <= self._inline_bytes(limit) and not (
                isinstance(body, dict) and SPILL_KEY in body):
            return text
        return self._spill_text(text, spilled)

    @staticmethod
    def _spill_text(text: str, spilled: dict[str, bytes]) -> str:
        data = text.encode()
        key = blob_key(data)
        spilled[key] = data
        return _serialize({SPILL_KEY: key, "bytes": len(data)})[0]

    def _load_body(self, run_id: str, text: str) -> Any:
        """A stored row's body: the row itself, or the text its reference names."""
        try:
            body = json.loads(text)
        except json.JSONDecodeError:
            raise PersistenceError(
                f"run {run_id}: a stored value is not JSON (an encrypted store opened "
                "without its codec?)", details={"run_id": run_id}) from None
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
               rows: list[tuple[str, int, str]], joined: CompanionWrites | None = None) -> None:
        """Atomically: check the version (0 = absent), put the head, insert rows that do
        not exist yet, and ``joined.join(<the transaction>)``. Raise ``CheckpointConflict``
        on a version or row clash (nothing written), let ``CompanionConflict`` through.
        The head and rows are at most a spill reference larger than the inline limits;
        the rows total at most ``COMMIT_INLINE_BYTES`` plus a reference per row."""

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

    @abstractmethod
    def delete_run(self, run_id: str) -> None:
        """Remove the run — head, log, blobs, key records (a deleted session's); absent
        is done. Only for a run nothing drives any more."""


def _serialize(value: Any) -> tuple[str, bytes]:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    try:
        return text, text.encode()
    except UnicodeEncodeError:
        raise ConfigError("checkpoint data holds text that is not valid Unicode "
                          "(a lone surrogate)") from None


class _KeySlots:
    """``KeySlots`` over a store's blob primitives."""

    def __init__(self, store: BaseCheckpointStore) -> None:
        self._store = store

    def get(self, run_id: str, name: str) -> bytes | None:
        return self._store._get_blob(run_id, name)

    def put(self, run_id: str, name: str, data: bytes) -> None:
        self._store._put_blob(run_id, name, data)


def _seal_row(sealer: Sealer | None, item: ItemId, text: str) -> str:
    if sealer is None:
        return text
    return base64.b64encode(sealer.seal(item, text.encode())).decode("ascii")


def _seal_blob(sealer: Sealer | None, item: ItemId, data: bytes) -> bytes:
    return data if sealer is None else sealer.seal(item, data)


def _check_name(value: str, what: str) -> None:
    try:
        value.encode()
    except UnicodeEncodeError:
        raise ConfigError(f"{what} is not valid Unicode (a lone surrogate)") from None
