"""Sessions, their runs, record streams and run events: one session's lifecycle.

Items (layout in ``items``): ``session#{session}`` ``session`` (the lease),
``run#{run}``, ``idem#{sha256}``, ``stream``, ``rec#{last seq}``,
``view#{watermark}#{run}``; ``session#{session}#i#{instance}`` ``rec#{last seq}``;
``user#{user}`` ``session#{space}#{session}``, ``thread#{agent}#{sha256}`` (a protocol
client's thread: ``Session.thread``); ``space#{space}`` ``runs#{status}#{run}``;
``run#{run}`` ``run``, ``ev#{first seq}``; ``active`` ``run#{run}``.

**One active run per session** is the compare-and-set on the session item:
``Runs.start`` writes the session (``active_run`` set, expecting the version it read),
the run, its index and lookup items, the stream cursor and the idempotency key in one
transaction. Of concurrent asks exactly one commits; the others see the winner.

**The record stream's tail.** Main's newest records ride in the stream head's
``tail`` (the head is written by every commit with records) while the head item stays
within one write unit; then they and the next records go to batches (``record_writes``).
A read takes the head's tail first, then the batches, so a flush between the two only
moves records into a batch it finds (duplicates dropped by seq).

**The record stream in batches.** Records appended together are stored as batches of at
most ``RECORDS_PER_ITEM`` (``{"records": [SessionRecord, …]}``), each keyed by the seq of
its *last* record, so that a range read from any seq finds the batch holding it (an
item of one older ``SessionRecord`` reads the same way). Each sub-agent instance's
records are also copied to its own stream (``session#{session}#i#{instance}``); main's
are not (most records are main's: they are read from the whole stream, filtered, so a
commit writes one batch, not two; sessions written before also hold a main copy,
unread). A step's records therefore
cost a few items, however many they are, and fit one transaction with the run's commit
(``record_writes``, ``view_write``: ``agentloom.platform.store.session_commits``).

**Run events** get unique, contiguous seqs without a counter: an append writes *one*
item, ``ev#{its first seq}`` (an ``Event``, or ``{"events": [Event, …]}`` for several),
that must not exist, after the last seq read (the item with the highest key) — a
concurrent append took that key, so it is read again and retried. A commit's
``model.usage`` events are one such item in its transaction. A read starts at the item
holding ``after + 1`` (the last key at or before it). (Runs written before kept a
counter item ``events``; nothing reads it now.)
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agentloom.platform.domain import (
    ACTIVE_STATES,
    Event,
    Idempotency,
    OpenRun,
    Run,
    RunIndex,
    Session,
    SessionRecord,
    StreamHead,
    Usage,
    compact_record,
    full_record,
    now,
)

from .items import (
    ABSENT,
    SEQ_DIGITS,
    ItemStore,
    Versioned,
    Write,
    WriteConflict,
    delete,
    dumps,
    put,
    seq_key,
)

MAIN = "main"  # the instance whose records are not copied by instance
RECORDS_PER_ITEM = 100  # session records in one batch item (~25 KB) ...
RECORD_BATCH_BYTES = 32 * 1024  # ... and about this many bytes at most
EVENT_ATTEMPTS = 100
STREAM_ITEM_BYTES = 1024  # the stream head item with its record tail: one write unit
_ITEM_OVERHEAD = 40  # its sort key, attribute names and version (pk and body added)


class Sessions:
    """``store.sessions``: a session is created with its empty record stream; its item
    is the lease runs take and give back (``store.runs``)."""

    def __init__(self, items: ItemStore) -> None:
        self._items = items

    def create(self, session: Session) -> None:
        """The session, its stream and its owner's index entries (with ``thread``: the
        thread's entry too, so a second session for one thread is a ``WriteConflict``)."""
        sid = session.session_id
        writes = [
            put(f"session#{sid}", "session", session, ABSENT),
            put(f"session#{sid}", "stream", StreamHead(session_id=sid), ABSENT),
            put(f"user#{session.user_id}", f"session#{session.space_id}#{sid}",
                {"session_id": sid}, ABSENT)]
        if session.thread is not None:
            writes.append(put(f"user#{session.user_id}", thread_sk(session),
                              {"session_id": sid}, ABSENT))
        self._items.transact(writes)

    def of_thread(self, user_id: str, agent_id: str, thread: str) -> str | None:
        """The id of ``user_id``'s session for a client's ``thread`` with ``agent_id``."""
        found = self._items.get_raw(f"user#{user_id}", f"thread#{agent_id}#{thread}")
        return None if found is None else str(json.loads(found[1])["session_id"])

    def get(self, session_id: str) -> Versioned[Session] | None:
        return self._items.get(f"session#{session_id}", "session", Session)

    def of_user(self, user_id: str, space_id: str) -> list[Session]:
        """``user_id``'s sessions in ``space_id``, newest id first."""
        refs = self._items.query_raw(f"user#{user_id}", f"session#{space_id}#",
                                     reverse=True)
        found = (self.get(json.loads(r.text)["session_id"]) for r in refs)
        return [s.value for s in found if s is not None]


def thread_sk(session: Session) -> str:
    return f"thread#{session.agent_id}#{session.thread}"


def _index_sk(run: Run | RunIndex) -> str:
    return f"runs#{run.status}#{run.run_id}"


def run_index(run: Run) -> RunIndex:
    return RunIndex(run_id=run.run_id, session_id=run.session_id, space_id=run.space_id,
                    user_id=run.user_id, agent_id=run.agent_id, version=run.version,
                    status=run.status, updated_at=run.updated_at,
                    error_code=(run.error or {}).get("code"), usage=run.usage)


class Runs:
    """``store.runs``: a run starts by taking its session's lease and gives it back in
    the update that ends it (module docstring)."""

    def __init__(self, items: ItemStore, streams: Streams) -> None:
        self._items, self._streams = items, streams

    def start(self, session: Versioned[Session], run: Run,
              idempotency: Idempotency | None = None,
              replace_idempotency: int = ABSENT) -> None:
        """The lease and the run in one transaction: the session (``active_run`` = the
        run, expecting the version read), the run, its index and lookup items, the
        stream's cursor for it and the idempotency key (``replace_idempotency``: the
        version of an expired key it replaces)."""
        sid = session.value.session_id
        stream = self._streams.head(sid)
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
        self._items.transact(writes)

    def get(self, session_id: str, run_id: str) -> Versioned[Run] | None:
        """The run with its live usage: while it is open in the session's stream, the
        totals on its cursor (``OpenRun.usage``) are newer than the run item's."""
        found = self.stored(session_id, run_id)
        if found is None:
            return None
        return _live(found, self._open_usage(session_id).get(run_id))

    def stored(self, session_id: str, run_id: str) -> Versioned[Run] | None:
        """The run item as stored (its usage as of its last status change)."""
        return self._items.get(f"session#{session_id}", f"run#{run_id}", Run)

    def _open_usage(self, session_id: str) -> dict[str, Usage]:
        head = self._streams.head(session_id)
        return {} if head is None else {run_id: cursor.usage for run_id, cursor
                                        in head.value.open.items()
                                        if cursor.usage is not None}

    def find(self, run_id: str) -> Versioned[Run] | None:
        """A run by its id alone."""
        session_id = self.session_of(run_id)
        return None if session_id is None else self.get(session_id, run_id)

    def session_of(self, run_id: str) -> str | None:
        """The session of a run the platform knows (None: not a platform run)."""
        found = self._items.get_raw(f"run#{run_id}", "run")
        return None if found is None else str(json.loads(found[1])["session_id"])

    def of_session(self, session_id: str) -> list[Run]:
        usage = self._open_usage(session_id)
        return [_live(Versioned(run, 0), usage.get(run.run_id)).value
                for run in self._items.query(f"session#{session_id}", "run#", Run)]

    def by_status(self, space_id: str, status: str | None = None,
                  limit: int | None = None) -> list[RunIndex]:
        prefix = f"runs#{status}#" if status else "runs#"
        return self._items.query(f"space#{space_id}", prefix, RunIndex, limit=limit)

    def update(self, run: Versioned[Run], new: Run, *,
               session: Versioned[Session] | None = None,
               session_update: Session | None = None) -> None:
        """The run (expecting the version read), its index entry moved when the status
        changed, and optionally the session (the lease taken or given back) in the same
        transaction."""
        self._items.transact(update_writes(run, new, session=session,
                                           session_update=session_update))

    def active(self) -> list[tuple[str, str]]:
        """(run_id, session_id) of every run that holds its session."""
        return [(s.sk.removeprefix("run#"), json.loads(s.text)["session_id"])
                for s in self._items.query_raw("active", "run#")]

    def idempotency(self, session_id: str, key_sha256: str
                    ) -> Versioned[Idempotency] | None:
        """The idempotency key of an ask (``start`` wrote it with its run)."""
        return self._items.get(f"session#{session_id}", f"idem#{key_sha256}", Idempotency)


_NO_HEAD = Versioned(StreamHead(session_id=""), 0)


def _live(run: Versioned[Run], usage: Usage | None) -> Versioned[Run]:
    if usage is None or usage == run.value.usage:
        return run
    return Versioned(run.value.model_copy(update={"usage": usage}), run.version)


class ViewRef(BaseModel):
    """A reusable view (docs/contract.md#observed-prefix): what ``SessionView`` holds,
    the messages apart — they are the blob ``blob`` of run ``run_id`` in the checkpoint
    store (stored once, encrypted with the run's logs, chunked where items are small)."""

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


class Streams:
    """``store.streams``: the head (next seq, per-run cursors), the records, the views."""

    def __init__(self, items: ItemStore) -> None:
        self._items = items

    def head(self, session_id: str) -> Versioned[StreamHead] | None:
        return self._items.get(f"session#{session_id}", "stream", StreamHead)

    def append(self, head: Versioned[StreamHead], new_head: StreamHead,
               records: Sequence[SessionRecord],
               runs: Iterable[tuple[Versioned[Run], Run]] = ()) -> None:
        """New records (seqs after the head's), the head (cursors, seq) and runs (their
        usage) in one transaction conditioned on the head's version."""
        self._items.transact(record_writes(head, new_head, records, runs))

    def records(self, session_id: str, after: int = 0, limit: int = 100, *,
                instance: str | None = None) -> list[SessionRecord]:
        """The stream's records with a seq after ``after`` (of ``instance``'s, or all),
        ascending, at most ``limit``."""
        # main's records are read from the whole stream (no copy of them is kept by
        # instance: most records are main's); another instance's from its own copy
        by_instance = instance is not None and instance != MAIN
        pk = f"session#{session_id}" + (f"#i#{instance}" if by_instance else "")
        # the head's tail (main's newest records) is read first: a flush meanwhile
        # moves them into a batch read below, never out of sight (dropped as duplicates)
        tail = [] if by_instance else [
            r for r in (self.head(session_id) or _NO_HEAD).value.tail
            if r.seq > after and (instance is None or r.instance == instance)]
        # each batch read holds at least one record after ``after`` (its last); read a
        # few batches first (one may hold 100 records), then what may still be missing
        found: list[SessionRecord] = []
        cursor, want = seq_key("rec", after), min(limit, 10)
        while len(found) < limit and want > 0:
            page = self._items.query_raw(pk, "rec#", after=cursor, limit=want)
            for stored in page:
                found += [r for r in _batch(stored.text) if r.seq > after and
                          (instance is None or r.instance == instance)]
                if len(found) >= limit:
                    break
            if len(page) < want:
                break
            cursor, want = page[-1].sk, limit - len(found)
        last = found[-1].seq if found else after
        return (found + [r for r in tail if r.seq > last])[:limit]

    def views(self, session_id: str) -> list[ViewRef]:
        return self._items.query(f"session#{session_id}", "view#", ViewRef)


class Events:
    """``store.events``: append a run's events, read them after a seq (module
    docstring: one item per append, keyed by its first seq)."""

    def __init__(self, items: ItemStore) -> None:
        self._items = items
        self._lock = threading.Lock()

    def append(self, run_id: str, events: Sequence[tuple[str, dict[str, Any]]]) -> int:
        """Append events with the next seqs (their item must not exist yet: retried on a
        concurrent append); returns the last seq."""
        with self._lock:  # writers in one process take turns; others retry
            for _ in range(EVENT_ATTEMPTS):
                writes, last = self.append_writes(run_id, events)
                try:
                    self._items.transact(writes)
                    return last
                except WriteConflict:
                    time.sleep(0.001)
        raise WriteConflict(f"run {run_id}: other events kept being appended", index=0,
                            pk=f"run#{run_id}", sk="ev#")

    def append_writes(self, run_id: str, events: Sequence[tuple[str, dict[str, Any]]]
                      ) -> tuple[list[Write], int]:
        """The write that appends ``events`` after the last seq as read now — one item,
        ``ev#{first seq}``, that must not exist (a concurrent append took the seq: the
        caller reads again) — and the last seq they take."""
        pk = f"run#{run_id}"
        last = self.last_seq(run_id)
        at = now()
        batch = [Event(run_id=run_id, seq=last + i, type=topic, at=at, data=data)
                 for i, (topic, data) in enumerate(events, 1)]
        body = batch[0] if len(batch) == 1 else \
            {"events": [e.model_dump(mode="json") for e in batch]}
        return [put(pk, seq_key("ev", last + 1), body, ABSENT)], last + len(events)

    def last_seq(self, run_id: str) -> int:
        """The seq of the run's last event (0: none)."""
        found = self._items.query_raw(f"run#{run_id}", "ev#", limit=1, reverse=True)
        return _events(found[0].text)[-1].seq if found else 0

    def read(self, run_id: str, *, after: int = 0, limit: int = 200) -> list[Event]:
        """The run's events with a seq after ``after``, ascending, at most ``limit``: the
        item holding ``after + 1`` (keyed by its first seq, at or before it), then the
        items after it."""
        if limit <= 0:
            return []
        pk = f"run#{run_id}"
        holding = self._items.query_raw(pk, "ev#", after=seq_key("ev", after + 2), limit=1,
                                        reverse=True)
        found = [e for e in _events(holding[0].text) if e.seq > after] if holding else []
        cursor = holding[0].sk if holding else None
        while len(found) < limit:
            want = limit - len(found)  # each item holds at least one event
            page = self._items.query_raw(pk, "ev#", after=cursor, limit=want)
            for stored in page:
                found += [e for e in _events(stored.text) if e.seq > after]
            if len(page) < want:
                break
            cursor = page[-1].sk
        return found[:limit]


def _events(text: str) -> list[Event]:
    body = json.loads(text)
    if "events" in body:
        return [Event.model_validate(e) for e in body["events"]]
    return [Event.model_validate(body)]  # an item of one event


def record_writes(head: Versioned[StreamHead], new_head: StreamHead,
                  records: Sequence[SessionRecord],
                  runs: Iterable[tuple[Versioned[Run], Run]] = ()) -> list[Write]:
    """The writes of an append to a session's record stream: the head conditioned on the
    version read, the records, the runs with their index entries (same status: the
    entry's key stays).

    Main's records ride in the head's ``tail`` while the head item stays within one
    write unit (``STREAM_ITEM_BYTES``: the head is written anyway); otherwise — or when
    a sub-agent's record is among them — the tail and the new records are flushed in
    batches (all of them, and per sub-agent instance its own) and the tail is emptied."""
    sid = new_head.session_id
    pk = f"session#{sid}"
    pending = [*head.value.tail, *records]
    riding = new_head.model_copy(update={"tail": pending})
    if all(r.instance == MAIN for r in records) and \
            len(pk) + len(dumps(riding).encode()) + _ITEM_OVERHEAD <= STREAM_ITEM_BYTES:
        writes = [put(pk, "stream", riding, head.version)]
        groups: list[tuple[str, list[SessionRecord]]] = []
    else:  # flushed: the tail and the new records in batches, an empty tail
        writes = [put(pk, "stream", new_head.model_copy(update={"tail": []}), head.version)]
        by_instance: dict[str, list[SessionRecord]] = {}
        for record in records:
            by_instance.setdefault(record.instance, []).append(record)
        groups = [(pk, pending)] if pending else []
        groups += [(f"{pk}#i#{instance}", found) for instance, found in
                   by_instance.items() if instance != MAIN]  # main reads the whole stream
    for group_pk, group in groups:
        for batch in _batches([compact_record(r) for r in group]):
            writes.append(put(group_pk, seq_key("rec", batch[-1]["seq"]),
                              {"records": batch}, ABSENT))
    for old, new in runs:  # the run (its usage) and its index entry (operators read it)
        writes.append(put(pk, f"run#{new.run_id}", new, old.version))
        writes.append(put(f"space#{new.space_id}", _index_sk(new), run_index(new)))
    return writes


def view_write(session_id: str, view: ViewRef) -> Write:
    return put(f"session#{session_id}", f"view#{view.watermark:0{SEQ_DIGITS}d}#{view.run_id}",
               view, ABSENT)


def _batches(records: list[dict[str, Any]]) -> Iterable[list[dict[str, Any]]]:
    """Consecutive runs of at most RECORDS_PER_ITEM records and ~RECORD_BATCH_BYTES."""
    batch: list[dict[str, Any]] = []
    size = 0
    for record in records:
        length = len(dumps(record).encode())
        if batch and (len(batch) == RECORDS_PER_ITEM or size + length > RECORD_BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(record)
        size += length
    if batch:
        yield batch


def _batch(text: str) -> list[SessionRecord]:
    body = json.loads(text)
    if "records" in body:  # compact (``compact_record``), or full as written before
        return [SessionRecord.model_validate(full_record(r)) for r in body["records"]]
    return [SessionRecord.model_validate(body)]  # an item of one record, as first stored


def update_writes(run: Versioned[Run], new: Run, *, session: Versioned[Session] | None = None,
                  session_update: Session | None = None) -> list[Write]:
    """The writes of ``Runs.update`` (also joined to a run's stopping commit by
    ``SessionCommits``)."""
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
    return writes
