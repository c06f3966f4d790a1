"""The platform store port: typed operations over a few item primitives.

Every record is an **item** ``(pk, sk) -> (version, body)``: ``pk`` groups the items a
query reads together, ``sk`` orders them. A write names the version it expects
(``ABSENT``: the item must not exist; ``ANY``: no condition); a transaction applies all
its writes or none, and a failed condition raises ``WriteConflict`` naming the write.
Backends implement three primitives (``_get``, ``_query``, ``_transact``); this base
holds the item layout, serialization, index upkeep and the compare-and-set rules once,
so an adapter for DynamoDB maps them onto ``GetItem``, ``Query`` and
``TransactWriteItems`` with a condition on ``version``.

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
    session#{session}         stream                          StreamHead (seq, cursors)
    session#{session}         rec#{last seq}                  RecordBatch (<= 100 records)
    session#{session}#i#{instance}  rec#{last seq}            RecordBatch (by instance)
    session#{session}         view#{watermark}#{run}          ViewRef (a reusable view;
                                                              its messages: a run blob)
    run#{run}                 run                             {"session_id"} (run by id)
    active                    run#{run}                       {"session_id"} (runs that hold
                                                              a session: queued, running,
                                                              interrupted; for recovery)
    run#{run}                 events                          {"seq"} (the event counter)
    run#{run}                 ev#{seq}                        Event
    token#{sha256}            token                           Token (looked up by hash)

One active run per session is the compare-and-set on the session item: ``start_run``
writes the session (``active_run`` set, expecting the version it read), the run, its
index and lookup items, the stream cursor and the idempotency key in one transaction.
Of concurrent asks exactly one commits; the others see the winner.

**The record stream in batches.** Records appended together are stored as batches of at
most ``RECORDS_PER_ITEM`` (``{"records": [SessionRecord, …]}``), each keyed by the seq of
its *last* record, so that a range read from any seq finds the batch holding it (an
item of one older ``SessionRecord`` reads the same way). A step's records therefore
cost a few items, however many they are, and fit one transaction with the run's commit
(``agentloom.platform.store.session_commits``).

**Joining a checkpoint commit.** ``join_writes(writes, transaction)`` adds platform writes
to a checkpoint store's transaction (``CompanionWrites.join``): each adapter knows its
checkpoint counterpart's transaction (SQLite: the connection of the same file; DynamoDB:
the TransactWriteItems being built; memory: none, it transacts itself under the
checkpoint store's lock). A failed condition raises ``CompanionConflict``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from agentloom.platform.domain import (
    ACTIVE_STATES,
    Agent,
    AgentVersion,
    Draft,
    Event,
    Idempotency,
    Member,
    OpenRun,
    Run,
    RunIndex,
    Session,
    SessionRecord,
    Space,
    StreamHead,
    Token,
    now,
)
from agentloom.platform.errors import Invalid, PlatformError
from agentloom_runtime.errors import ConfigError

from . import snapshot_parts

ABSENT = 0  # expect: the item must not exist
ANY = -1  # expect: no condition
SEQ_DIGITS = 12
EVENT_ATTEMPTS = 100
RECORDS_PER_ITEM = 100  # session records in one batch item (~25 KB) ...
RECORD_BATCH_BYTES = 32 * 1024  # ... and about this many bytes at most

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


def _dumps(value: BaseModel | dict[str, Any]) -> str:
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        text.encode()
    except UnicodeEncodeError:
        raise Invalid("the text is not valid Unicode (a lone surrogate)",
                      code="invalid_text") from None
    return text


class ViewRef(BaseModel):
    """A reusable view (docs/contract.md#observed-prefix): what ``SessionView`` holds, the messages
    apart — they are the blob ``blob`` of run ``run_id`` in the checkpoint store (stored
    once, encrypted with the run's logs, chunked where items are small)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal[1] = 1
    run_id: str
    watermark: int
    observed_seqs: list[list[int]]
    blob: str
    user_turns: int
    model_steps: int
    baseline_user_turns: int
    baseline_model_steps: int


def put(pk: str, sk: str, value: BaseModel | dict[str, Any], expect: int = ANY) -> Write:
    return Write(pk, sk, _dumps(value), expect)


def delete(pk: str, sk: str, expect: int = ANY) -> Write:
    return Write(pk, sk, None, expect)


def check(pk: str, sk: str, expect: int) -> Write:
    return Write(pk, sk, None, expect, check=True)


def _index_sk(run: Run | RunIndex) -> str:
    return f"runs#{run.status}#{run.run_id}"


def run_index(run: Run) -> RunIndex:
    return RunIndex(run_id=run.run_id, session_id=run.session_id, space_id=run.space_id,
                    user_id=run.user_id, agent_id=run.agent_id, version=run.version,
                    status=run.status, updated_at=run.updated_at,
                    error_code=(run.error or {}).get("code"))


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class PlatformStore(ABC):
    """Spaces, members, agents, versions, sessions, runs, tokens, idempotency keys, the
    session record stream and run events (see the module docstring for the layout)."""

    def __init__(self) -> None:
        self._event_lock = threading.Lock()

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

    def close(self) -> None:  # noqa: B027 (optional: most backends hold nothing)
        """Release the backend's resources."""

    # -- generic helpers -----------------------------------------------------------------

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

    def query(self, pk: str, prefix: str, model: type[M], *, after: str | None = None,
              limit: int | None = None, reverse: bool = False) -> list[M]:
        return [model.model_validate_json(s.text)
                for s in self._query(pk, prefix, after, limit, reverse)]

    def query_raw(self, pk: str, prefix: str, *, after: str | None = None,
                  limit: int | None = None) -> list[Stored]:
        return self._query(pk, prefix, after, limit, False)

    # -- spaces and members --------------------------------------------------------------

    def create_space(self, space: Space, owner: Member) -> None:
        pk = f"space#{space.space_id}"
        self.transact([put(pk, "space", space, ABSENT),
                       put(pk, f"member#{owner.user_id}", owner, ABSENT),
                       put(f"user#{owner.user_id}", f"space#{space.space_id}",
                           {"role": owner.role}, ABSENT)])

    def get_space(self, space_id: str) -> Versioned[Space] | None:
        return self.get(f"space#{space_id}", "space", Space)

    def user_spaces(self, user_id: str) -> list[tuple[str, str]]:
        return [(s.sk.removeprefix("space#"), json.loads(s.text)["role"])
                for s in self._query(f"user#{user_id}", "space#", None, None, False)]

    def get_member(self, space_id: str, user_id: str) -> Member | None:
        found = self.get(f"space#{space_id}", f"member#{user_id}", Member)
        return None if found is None else found.value

    def members(self, space_id: str) -> list[Member]:
        return self.query(f"space#{space_id}", "member#", Member)

    def write_member(self, space: Versioned[Space], user_id: str,
                     member: Member | None) -> None:
        """Add, change (``member``) or remove (None) a membership, conditioned on the space
        item's version, which the write bumps: membership changes are serialized, so a
        rule over all members (the last owner stays) holds under concurrency."""
        sid = space.value.space_id
        pk = f"space#{sid}"
        writes = [put(pk, "space", space.value, space.version)]
        if member is None:
            writes += [delete(pk, f"member#{user_id}"),
                       delete(f"user#{user_id}", f"space#{sid}")]
        else:
            writes += [put(pk, f"member#{user_id}", member),
                       put(f"user#{user_id}", f"space#{sid}", {"role": member.role})]
        self.transact(writes)

    # -- agents, drafts, versions --------------------------------------------------------

    def create_agent(self, agent: Agent, draft: Draft) -> None:
        self.transact([put(f"space#{agent.space_id}", f"agent#{agent.agent_id}", agent, ABSENT),
                       put(f"agent#{agent.agent_id}", "draft", draft, ABSENT)])

    def get_agent(self, space_id: str, agent_id: str) -> Versioned[Agent] | None:
        return self.get(f"space#{space_id}", f"agent#{agent_id}", Agent)

    def agents(self, space_id: str) -> list[Agent]:
        return self.query(f"space#{space_id}", "agent#", Agent)

    def get_draft(self, agent_id: str) -> Versioned[Draft] | None:
        return self.get(f"agent#{agent_id}", "draft", Draft)

    def save_draft(self, draft: Draft, expect: int) -> None:
        self.transact([put(f"agent#{draft.agent_id}", "draft", draft, expect)])

    def publish(self, agent: Versioned[Agent], version: AgentVersion) -> None:
        """The new version (it must not exist) and the agent's ``latest_version``; a
        large snapshot in parts (``snapshot_parts``), in the same transaction."""
        updated = agent.value.model_copy(update={"latest_version": version.version})
        pk, parted = f"agent#{version.agent_id}", snapshot_parts.parts_of(version.snapshot)
        stored, parts = version, []
        if parted is not None:
            stored = version.model_copy(update={"snapshot": parted[0]})
            parts = [put(pk, f"vpart#{version.version:0{SEQ_DIGITS}d}#{i:04d}",
                         {"text": piece}, ABSENT) for i, piece in enumerate(parted[1])]
        self.transact([
            put(f"space#{agent.value.space_id}", f"agent#{agent.value.agent_id}", updated,
                agent.version),
            put(pk, seq_key("v", version.version), stored, ABSENT), *parts])

    def get_version(self, agent_id: str, version: int) -> AgentVersion | None:
        found = self.get(f"agent#{agent_id}", seq_key("v", version), AgentVersion)
        return None if found is None else self._whole(found.value)

    def versions(self, agent_id: str) -> list[AgentVersion]:
        return [self._whole(v) for v in self.query(f"agent#{agent_id}", "v#", AgentVersion)]

    def _whole(self, version: AgentVersion) -> AgentVersion:
        """``version`` with its snapshot joined from its parts when it was stored so."""
        if not snapshot_parts.is_parted(version.snapshot):
            return version
        prefix = f"vpart#{version.version:0{SEQ_DIGITS}d}#"
        pieces = (json.loads(s.text)["text"]
                  for s in self._query(f"agent#{version.agent_id}", prefix, None, None, False))
        return version.model_copy(update={"snapshot": snapshot_parts.joined(
            version.snapshot, pieces, where=f"agent {version.agent_id} v{version.version}")})

    # -- sessions ------------------------------------------------------------------------

    def create_session(self, session: Session) -> None:
        sid = session.session_id
        self.transact([
            put(f"session#{sid}", "session", session, ABSENT),
            put(f"session#{sid}", "stream", StreamHead(session_id=sid), ABSENT),
            put(f"user#{session.user_id}", f"session#{session.space_id}#{sid}",
                {"session_id": sid}, ABSENT)])

    def get_session(self, session_id: str) -> Versioned[Session] | None:
        return self.get(f"session#{session_id}", "session", Session)

    def user_sessions(self, user_id: str, space_id: str) -> list[Session]:
        refs = self._query(f"user#{user_id}", f"session#{space_id}#", None, None, True)
        found = (self.get_session(json.loads(r.text)["session_id"]) for r in refs)
        return [s.value for s in found if s is not None]

    # -- runs ----------------------------------------------------------------------------

    def start_run(self, session: Versioned[Session], run: Run,
                  idempotency: Idempotency | None = None,
                  replace_idempotency: int = ABSENT) -> None:
        """The lease and the run in one transaction: the session (``active_run`` = the
        run, expecting the version read), the run, its index and lookup items, the
        stream's cursor for it and the idempotency key (``replace_idempotency``: the
        version of an expired key it replaces)."""
        sid = session.value.session_id
        stream = self.get_stream(sid)
        if stream is None:
            raise WriteConflict(f"session {sid} has no record stream", index=0,
                                pk=f"session#{sid}", sk="stream")
        opened = stream.value.model_copy(
            update={"open": {**stream.value.open, run.run_id: OpenRun()}})
        updated = session.value.model_copy(update={"active_run": run.run_id,
                                                   "runs": session.value.runs + 1})
        writes = [put(f"session#{sid}", "session", updated, session.version),
                  put(f"session#{sid}", f"run#{run.run_id}", run, ABSENT),
                  put(f"space#{run.space_id}", _index_sk(run), run_index(run), ABSENT),
                  put(f"run#{run.run_id}", "run", {"session_id": sid}, ABSENT),
                  put("active", f"run#{run.run_id}", {"session_id": sid}),
                  put(f"session#{sid}", "stream", opened, stream.version)]
        if idempotency is not None:
            writes.append(put(f"session#{sid}", f"idem#{idempotency.key_sha256}",
                              idempotency, replace_idempotency))
        self.transact(writes)

    def get_run(self, session_id: str, run_id: str) -> Versioned[Run] | None:
        return self.get(f"session#{session_id}", f"run#{run_id}", Run)

    def find_run(self, run_id: str) -> Versioned[Run] | None:
        session_id = self.run_session(run_id)
        return None if session_id is None else self.get_run(session_id, run_id)

    def run_session(self, run_id: str) -> str | None:
        """The session of a run the platform knows (None: not a platform run)."""
        found = self._get(f"run#{run_id}", "run")
        return None if found is None else str(json.loads(found[1])["session_id"])

    def session_runs(self, session_id: str) -> list[Run]:
        return self.query(f"session#{session_id}", "run#", Run)

    def runs_by_status(self, space_id: str, status: str | None = None,
                       limit: int | None = None) -> list[RunIndex]:
        prefix = f"runs#{status}#" if status else "runs#"
        return self.query(f"space#{space_id}", prefix, RunIndex, limit=limit)

    def update_run(self, run: Versioned[Run], new: Run, *,
                   session: Versioned[Session] | None = None,
                   session_update: Session | None = None) -> None:
        """The run (expecting the version read), its index entry moved when the status
        changed, and optionally the session (the lease taken or given back) in the same
        transaction."""
        writes = [put(f"session#{new.session_id}", f"run#{new.run_id}", new, run.version)]
        if run.value.status != new.status:
            writes.append(delete(f"space#{new.space_id}", _index_sk(run.value)))
        writes.append(put(f"space#{new.space_id}", _index_sk(new), run_index(new)))
        was, now_active = run.value.status in ACTIVE_STATES, new.status in ACTIVE_STATES
        if was != now_active:
            writes.append(put("active", f"run#{new.run_id}", {"session_id": new.session_id})
                          if now_active else delete("active", f"run#{new.run_id}"))
        if session is not None and session_update is not None:
            writes.append(put(f"session#{new.session_id}", "session", session_update,
                              session.version))
        self.transact(writes)

    def active_runs(self) -> list[tuple[str, str]]:
        """(run_id, session_id) of every run that holds its session."""
        return [(s.sk.removeprefix("run#"), json.loads(s.text)["session_id"])
                for s in self._query("active", "run#", None, None, False)]

    def get_idempotency(self, session_id: str, key_sha256: str
                        ) -> Versioned[Idempotency] | None:
        return self.get(f"session#{session_id}", f"idem#{key_sha256}", Idempotency)

    # -- the session record stream -------------------------------------------------------

    def get_stream(self, session_id: str) -> Versioned[StreamHead] | None:
        return self.get(f"session#{session_id}", "stream", StreamHead)

    def append_records(self, head: Versioned[StreamHead], new_head: StreamHead,
                       records: Sequence[SessionRecord],
                       runs: Iterable[tuple[Versioned[Run], Run]] = ()) -> None:
        """New records (seqs after the head's), the head (cursors, seq) and runs (their
        usage) in one transaction conditioned on the head's version."""
        self.transact(record_writes(head, new_head, records, runs))

    def records(self, session_id: str, *, after: int = 0, limit: int = 100,
                instance: str | None = None) -> list[SessionRecord]:
        pk = f"session#{session_id}" + (f"#i#{instance}" if instance else "")
        # each batch read holds at least one record after ``after`` (its last); read a
        # few batches first (one may hold 100 records), then what may still be missing
        found: list[SessionRecord] = []
        cursor, want = seq_key("rec", after), min(limit, 10)
        while len(found) < limit and want > 0:
            page = self._query(pk, "rec#", cursor, want, False)
            for stored in page:
                found += [r for r in _batch(stored.text) if r.seq > after]
                if len(found) >= limit:
                    break
            if len(page) < want:
                break
            cursor, want = page[-1].sk, limit - len(found)
        return found[:limit]

    def views(self, session_id: str) -> list[ViewRef]:
        return self.query(f"session#{session_id}", "view#", ViewRef)

    def join_writes(self, writes: Sequence[Write], transaction: object) -> None:
        """Add ``writes`` to a checkpoint store's transaction (see the module docstring);
        raise ``CompanionConflict`` when a condition fails."""
        raise ConfigError(f"{type(self).__name__} cannot join a checkpoint store's "
                          "transaction")

    # -- run events ----------------------------------------------------------------------

    def append_events(self, run_id: str, events: Sequence[tuple[str, dict[str, Any]]]) -> int:
        """Append events with the next seqs (compare-and-set on the counter, retried);
        returns the last seq."""
        with self._event_lock:  # writers in one process take turns; others retry
            for _ in range(EVENT_ATTEMPTS):
                writes, last = self.event_writes(run_id, events)
                try:
                    self.transact(writes)
                    return last
                except WriteConflict:
                    time.sleep(0.001)
        raise WriteConflict(f"run {run_id}: the event counter kept changing", index=0,
                            pk=f"run#{run_id}", sk="events")

    def event_writes(self, run_id: str, events: Sequence[tuple[str, dict[str, Any]]]
                     ) -> tuple[list[Write], int]:
        """The writes that append ``events`` after the counter as read now (conditioned
        on its version), and the last seq they take."""
        pk = f"run#{run_id}"
        found = self._get(pk, "events")
        version, last = (found[0], json.loads(found[1])["seq"]) if found else (0, 0)
        at = now()
        writes = [put(pk, "events", {"seq": last + len(events)},
                      version if found else ABSENT)]
        writes += [put(pk, seq_key("ev", last + i), Event(
            run_id=run_id, seq=last + i, type=topic, at=at, data=data), ABSENT)
            for i, (topic, data) in enumerate(events, 1)]
        return writes, last + len(events)

    def events(self, run_id: str, *, after: int = 0, limit: int = 200) -> list[Event]:
        return self.query(f"run#{run_id}", "ev#", Event, after=seq_key("ev", after),
                          limit=limit)

    # -- tokens --------------------------------------------------------------------------

    def put_token(self, token: Token) -> None:
        self.transact([put(f"token#{token.secret_sha256}", "token", token, ABSENT),
                       put(f"user#{token.user_id}", f"token#{token.token_id}",
                           {"secret_sha256": token.secret_sha256}, ABSENT)])

    def token_by_secret(self, secret: str) -> Token | None:
        found = self.get(f"token#{secret_hash(secret)}", "token", Token)
        return None if found is None else found.value

    def tokens(self, user_id: str) -> list[Token]:
        refs = self._query(f"user#{user_id}", "token#", None, None, False)
        found = (self.get(f"token#{json.loads(r.text)['secret_sha256']}", "token", Token)
                 for r in refs)
        return [t.value for t in found if t is not None]

    def revoke_token(self, user_id: str, token_id: str) -> bool:
        ref = self._get(f"user#{user_id}", f"token#{token_id}")
        if ref is None:
            return False
        pk = f"token#{json.loads(ref[1])['secret_sha256']}"
        found = self.get(pk, "token", Token)
        if found is None:
            return False
        self.transact([put(pk, "token", found.value.model_copy(update={"revoked": True}),
                           found.version)])
        return True


def record_writes(head: Versioned[StreamHead], new_head: StreamHead,
                  records: Sequence[SessionRecord],
                  runs: Iterable[tuple[Versioned[Run], Run]] = ()) -> list[Write]:
    """The writes of an append to a session's record stream: the head conditioned on the
    version read, the records in batches (all of them and per instance), the runs."""
    sid = new_head.session_id
    writes = [put(f"session#{sid}", "stream", new_head, head.version)]
    by_instance: dict[str, list[SessionRecord]] = {}
    for record in records:
        by_instance.setdefault(record.instance, []).append(record)
    groups = [(f"session#{sid}", list(records))]
    groups += [(f"session#{sid}#i#{instance}", found) for instance, found in
               by_instance.items()]
    for pk, group in groups:
        for batch in _batches([r.model_dump(mode="json") for r in group]):
            writes.append(put(pk, seq_key("rec", batch[-1]["seq"]), {"records": batch},
                              ABSENT))
    for old, new in runs:
        writes.append(put(f"session#{sid}", f"run#{new.run_id}", new, old.version))
    return writes


def view_write(session_id: str, view: ViewRef) -> Write:
    return put(f"session#{session_id}", f"view#{view.watermark:0{SEQ_DIGITS}d}#{view.run_id}",
               view, ABSENT)


def _batches(records: list[dict[str, Any]]) -> Iterable[list[dict[str, Any]]]:
    """Consecutive runs of at most RECORDS_PER_ITEM records and ~RECORD_BATCH_BYTES."""
    batch: list[dict[str, Any]] = []
    size = 0
    for record in records:
        length = len(_dumps(record).encode())
        if batch and (len(batch) == RECORDS_PER_ITEM or size + length > RECORD_BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(record)
        size += length
    if batch:
        yield batch


def _batch(text: str) -> list[SessionRecord]:
    body = json.loads(text)
    if "records" in body:
        return [SessionRecord.model_validate(r) for r in body["records"]]
    return [SessionRecord.model_validate(body)]  # an item of one record, as first stored


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
