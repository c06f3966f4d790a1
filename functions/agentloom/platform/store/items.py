"""Items: the platform store's primitives, the one layer every backend implements.

Every record is an **item** ``(pk, sk) -> (version, body)``: ``pk`` groups the items a
query reads together, ``sk`` orders them. A write names the version it expects
(``ABSENT``: the item must not exist; ``ANY``: no condition); a transaction applies all
its writes or none, and a failed condition raises ``WriteConflict`` naming the write.
Backends implement three primitives (``_get``, ``_query``, ``_transact``) and, to ride
in a checkpoint store's commit, ``join_writes``; this base holds serialization and the
transaction rules once, so an adapter for DynamoDB maps them onto ``GetItem``, ``Query``
and ``TransactWriteItems`` with a condition on ``version``. The typed operations over
these items live one module per concern (``spaces``, ``agents``, ``sessions`` with its
runs, ``streams``, ``events``, ``tokens``), gathered by ``PlatformStore``.

Item layout (``{x}`` = an id; seqs are zero-padded to 12 digits so they sort)::

    pk                        sk                              body
    space#{space}             space                           Space (version bumps on
                                                              every membership change)
    space#{space}             member#{user}                   Member
    space#{space}             agent#{agent}                   Agent
    space#{space}             runs#{status}#{run}             RunIndex (operators)
    user#{user}               space#{space}                   {"role"} (a user's spaces)
    user#{user}               session#{space}#{session}       {"session_id"}
    user#{user}               token#{token}                   {"secret_sha256"}
    agent#{agent}             draft                           Draft
    agent#{agent}             v#{version}                     AgentVersion (immutable)
    agent#{agent}             vpart#{version}#{i}             a large snapshot's part i
    session#{session}         session                         Session (the lease)
    session#{session}         run#{run}                       Run
    session#{session}         idem#{sha256 of the key}        Idempotency
    session#{session}         stream                          StreamHead (seq, cursors with
                                                              open runs' usage, record tail)
    session#{session}         rec#{last seq}                  RecordBatch (<= 100 records)
    session#{session}#i#{instance}  rec#{last seq}            RecordBatch (by instance)
    session#{session}         view#{watermark}#{run}          ViewRef (a reusable view;
                                                              its messages: a run blob)
    run#{run}                 run                             {"session_id"} (run by id)
    active                    run#{run}                       {"session_id"} (runs that hold
                                                              a session: queued, running,
                                                              interrupted; for recovery)
    run#{run}                 ev#{first seq}                  Event, or {"events": [Event…]}
                                                              (one append; no counter)
    token#{sha256}            token                           Token (looked up by hash)

Companions keep their own items in the same store through these primitives (model
connections ``space#/model#``, MCP resources, knowledge bases, skills, run secrets, …;
see ``docs/storage.md``).

**Joining a checkpoint commit.** ``join_writes(writes, transaction)`` adds platform writes
to a checkpoint store's transaction (``CompanionWrites.join``): each adapter knows its
checkpoint counterpart's transaction (SQLite: the connection of the same file; DynamoDB:
the TransactWriteItems being built; memory: none, it transacts itself under the
checkpoint store's lock). A failed condition raises ``CompanionConflict``.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from agentloom.platform.errors import Invalid, PlatformError
from agentloom_runtime.errors import ConfigError

ABSENT = 0  # expect: the item must not exist
ANY = -1  # expect: no condition
SEQ_DIGITS = 12

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class WriteConflict(PlatformError):
    """A conditional write failed: ``index`` is the write in its transaction."""

    status = 409
    code = "write_conflict"

    def __init__(self, message: str, *, index: int, pk: str, sk: str) -> None:
        super().__init__(message, details={"index": index})
        self.index, self.pk, self.sk = index, pk, sk


@dataclass(frozen=True)
class Write:
    """One write of a transaction: a put (``body``) or a delete (``body is None``), or a
    condition only (``check``)."""

    pk: str
    sk: str
    body: str | None
    expect: int = ANY
    check: bool = False


@dataclass(frozen=True)
class Stored:
    sk: str
    version: int
    text: str


@dataclass(frozen=True)
class Versioned(Generic[M]):
    value: M
    version: int


def seq_key(prefix: str, seq: int) -> str:
    return f"{prefix}#{seq:0{SEQ_DIGITS}d}"


def dumps(value: BaseModel | dict[str, Any]) -> str:
    """The body of an item: canonical JSON (``Invalid`` for text that is not Unicode)."""
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        text.encode()
    except UnicodeEncodeError:
        raise Invalid("the text is not valid Unicode (a lone surrogate)",
                      code="invalid_text") from None
    return text


def put(pk: str, sk: str, value: BaseModel | dict[str, Any], expect: int = ANY) -> Write:
    return Write(pk, sk, dumps(value), expect)


def delete(pk: str, sk: str, expect: int = ANY) -> Write:
    return Write(pk, sk, None, expect)


def check(pk: str, sk: str, expect: int) -> Write:
    return Write(pk, sk, None, expect, check=True)


class ItemStore(ABC):
    """Versioned items under conditional, all-or-nothing transactions (module
    docstring); a backend implements ``_get``, ``_query`` and ``_transact``."""

    # -- primitives (backends) -----------------------------------------------------------

    @abstractmethod
    def _get(self, pk: str, sk: str) -> tuple[int, str] | None: ...

    @abstractmethod
    def _query(self, pk: str, prefix: str, after: str | None, limit: int | None,
               reverse: bool) -> list[Stored]:
        """Items of ``pk`` whose ``sk`` starts with ``prefix``, ascending by ``sk`` (or
        descending), strictly after ``after`` in that order, at most ``limit``."""

    @abstractmethod
    def _transact(self, writes: Sequence[Write]) -> None:
        """All writes or none. Each write's ``expect``: ``ANY``, ``ABSENT`` or the version
        the item must have; a put sets version + 1 (1 when new). Raise ``WriteConflict``
        with the index of the first failed condition."""

    def join_writes(self, writes: Sequence[Write], transaction: object) -> None:
        """Add ``writes`` to a checkpoint store's transaction (see the module docstring);
        raise ``CompanionConflict`` when a condition fails."""
        raise ConfigError(f"{type(self).__name__} cannot join a checkpoint store's "
                          "transaction")

    def close(self) -> None:  # noqa: B027 (optional: most backends hold nothing)
        """Release the backend's resources."""

    # -- the shared rules ----------------------------------------------------------------

    def transact(self, writes: Sequence[Write]) -> None:
        keys = [(w.pk, w.sk) for w in writes]
        if len(set(keys)) != len(keys):
            raise ValueError("a transaction writes each item at most once")
        self._transact(list(writes))

    def get(self, pk: str, sk: str, model: type[M]) -> Versioned[M] | None:
        found = self._get(pk, sk)
        if found is None:
            return None
        return Versioned(model.model_validate_json(found[1]), found[0])

    def get_raw(self, pk: str, sk: str) -> tuple[int, str] | None:
        """``(version, body)`` of an item, or None."""
        return self._get(pk, sk)

    def query(self, pk: str, prefix: str, model: type[M], *, after: str | None = None,
              limit: int | None = None, reverse: bool = False) -> list[M]:
        return [model.model_validate_json(s.text)
                for s in self._query(pk, prefix, after, limit, reverse)]

    def query_raw(self, pk: str, prefix: str, *, after: str | None = None,
                  limit: int | None = None, reverse: bool = False) -> list[Stored]:
        return self._query(pk, prefix, after, limit, reverse)


def retry_conflicts(fn: Callable[[], T], attempts: int = 50) -> T:
    """Run a read-modify-write until its compare-and-set holds (a ``WriteConflict``
    means someone else wrote first: read again)."""
    for attempt in range(attempts):
        try:
            return fn()
        except WriteConflict:
            if attempt == attempts - 1:
                raise
            time.sleep(0.001 * (attempt + 1))
    raise AssertionError("unreachable")
