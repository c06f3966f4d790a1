"""SessionCommits: a run's session records ride in its checkpoint commit.

The platform's ``CommitCompanion`` (``agentloom_runtime.checkpoint``). Given to the
checkpoint store, it is asked before each commit's transaction what the commit means
for the run's session (``prepare``), and its writes join the same transaction
(``ItemStore.join_writes``): the same SQLite transaction when both stores share
the file (embedded), the same TransactWriteItems across the two tables (AWS). So a
crash leaves the run's head *and* what it implies for the session, or neither:

- a reference to each new source record (``src:<instance>``, every instance; the run's
  own prompt and history copies left out), with the next session seq (docs/contract.md#context:
  the order of commits, so a resumed old run's records land at the end), deduplicated
  by (run_id, instance, entry_key) through the run's cursors in the stream head;
- the stream head (seq, cursors) conditioned on the version read — a concurrent writer
  (a status record, another process) makes the join fail with ``CompanionConflict``
  and the checkpoint store asks again;
- the run's usage totals and cost (provider usage of the commit's model calls: an
  action's on its assistant record, a compaction's or review's in ``ops``), on the
  run's cursor in the stream head while it runs (written anyway: no extra item), folded
  into the run item and its entry in the space's run index (what operators list) by
  the commit that finds the run not running (stopped, blocked, closing), and one
  ``model.usage`` event per call, after the ``model.completed`` events held for it
  (``hold``: the engine emits one right before the commit saving the call, and the
  process driving the run keeps it for this item, so it costs no write of its own)
  (the commit's events are one item, ``ev#{first seq}``,
  that must not exist: an event appended meanwhile is a ``CompanionConflict``, and the
  commit asks again);
- a status record when the run failed or was cancelled (once per execution and status),
  and the run's leaving the stream's ``open`` set once it completed, failed or was
  cancelled;
- a reusable view, when the commit completes a run whose main view was compacted and
  the host ``watch`` es it (the engine driving it offers its ``main_view``): its
  messages become a blob of the run in the checkpoint store (content-addressed and
  written before the transaction, so a lost commit leaves only an unreferenced blob;
  chunked on DynamoDB, encrypted with the run's logs) and a small ``ViewRef`` item
  joins the transaction, when the run observed a contiguous prefix of the session
  (``can_save_view``; what it inherited is every main seq up to its main frame's
  ``history_watermark``).

Runs the platform does not track (no ``run#{id}`` item, or no longer ``open``) and
documents that are not run heads get no writes. ``advance`` is also what
``RunTracker.sync`` uses to catch up on data written before this companion existed.

Wiring (one object per process; the step Lambda does the same)::

    commits = SessionCommits(platform_store, redactor=redactor)
    checkpoints = SqliteCheckpointStore(path, codec=codec, companion=commits)
    tracker = RunTracker(platform_store, checkpoints, redactor=redactor, commits=commits)
    ...
    commits.watch(run_id, view=engine.main_view)  # for each engine that drives a run
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentloom.platform.domain import OpenRun, Run, SessionRecord, StreamHead, now, usage_tokens
from agentloom.platform.redaction import Redactor
from agentloom_runtime.checkpoint.store import BaseCheckpointStore, Commit, LogEntry
from agentloom_runtime.context.history import (
    SKIPPED_KINDS,
    can_save_view,
    make_view,
    run_status_record,
)
from agentloom_runtime.engine import MainView

from .items import Versioned, Write, check
from .platform_store import PlatformStore
from .sessions import ViewRef, record_writes, update_writes, view_write

log = logging.getLogger(__name__)

NOTED_AT_ONCE = ("failed", "cancelled")
CLOSED = ("completed", "failed", "cancelled")
_PAGE = 1000
STATUS_MESSAGE_CHARS = 2_000
# events the engine emits right before the commit saving what they report
HELD_TOPICS = frozenset({"model.completed"})

Reader = Callable[[str, int], list[LogEntry]]  # (stream, after) -> entries, ascending


class Progress(Protocol):
    """What the stream needs of a run's head (``RunSummary`` has it)."""

    @property
    def status(self) -> str: ...

    @property
    def error(self) -> Mapping[str, str] | None: ...

    @property
    def execution(self) -> int: ...

    @property
    def instances(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class HeadProgress:
    status: str
    error: Mapping[str, str] | None
    execution: int
    instances: tuple[str, ...]


def progress_of(head: Mapping[str, Any]) -> HeadProgress | None:
    """The progress of a runtime head; None for another document (a session's)."""
    frames, status = head.get("frames"), head.get("status")
    if not isinstance(frames, Mapping) or not isinstance(status, str):
        return None
    error = head.get("error")
    return HeadProgress(status=status, execution=int(head.get("execution") or 0),
                        error={"code": str(error.get("code", "")),
                               "message": str(error.get("message", ""))}
                        if isinstance(error, Mapping) else None,
                        instances=tuple(frames))


@dataclass
class Pass:
    """What one pass over a session's runs found."""

    seq: int
    records: list[SessionRecord] = field(default_factory=list)
    runs: list[tuple[Versioned[Run], Run]] = field(default_factory=list)
    usage_events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    changed: bool = False


def advance(store: PlatformStore, session_id: str, run_id: str, progress: Progress,
            read: Reader, open_runs: dict[str, OpenRun], found: Pass, *, abandon: bool,
            redactor: Redactor) -> None:
    """Append to ``found`` the run's records after its cursor (moved in ``open_runs``),
    its status record, its usage; close it when it stopped for good."""
    cursor = open_runs[run_id]
    usage: list[tuple[str, str, Mapping[str, Any]]] = []
    for instance in progress.instances:
        for entry in read(f"src:{instance}", cursor.src.get(instance, 0)):
            cursor.src[instance], found.changed = entry.seq, True
            kind = str(entry.body.get("kind"))
            if kind in SKIPPED_KINDS:
                continue
            found.seq += 1
            found.records.append(SessionRecord(
                seq=found.seq, run_id=run_id, instance=instance, kind=kind,
                entry_key=f"src:{entry.seq}", src=entry.seq, at=now()))
            call = entry.body.get("call")
            if kind == "assistant" and isinstance(call, Mapping) and call.get("usage"):
                usage.append(("action", instance, call))
    for entry in read("ops", cursor.ops):
        cursor.ops, found.changed = entry.seq, True
        body = entry.body
        if "raw_output" in body and body.get("purpose") != "action" and body.get("usage"):
            usage.append((str(body.get("purpose")), str(body.get("instance", "main")), body))
    _status_record(run_id, progress, cursor, found, abandon, redactor)
    if progress.status in CLOSED:
        del open_runs[run_id]
        found.changed = True
    if usage:
        _add_usage(store, session_id, run_id, usage, cursor, found)
    if progress.status != "running":
        _fold_usage(store, session_id, run_id, cursor, found)


def _status_record(run_id: str, progress: Progress, cursor: OpenRun, found: Pass,
                   abandon: bool, redactor: Redactor) -> None:
    status = progress.status
    noted = f"{progress.execution}:{status}"
    if not (status in NOTED_AT_ONCE or (status == "blocked" and abandon)) \
            or cursor.noted == noted:
        return
    error = progress.error or {}
    message = error.get("message", "")
    if len(message) > STATUS_MESSAGE_CHARS:  # a record stays far below an item's size
        message = message[:STATUS_MESSAGE_CHARS] + " …"
    note = run_status_record(run_id, status, code=error.get("code", "")[:200],
                             message=message,
                             abandoned=status == "blocked")
    found.seq += 1
    found.records.append(SessionRecord(
        seq=found.seq, run_id=run_id, instance="main", kind="status",
        entry_key=f"status:{noted}", note=redactor.scrub(note), at=now()))
    cursor.noted, found.changed = noted, True


def _add_usage(store: PlatformStore, session_id: str, run_id: str,
               calls: list[tuple[str, str, Mapping[str, Any]]], cursor: OpenRun,
               found: Pass) -> None:
    """The calls' usage added to the totals on the run's cursor (from the run item's
    the first time), one ``model.usage`` event each."""
    total = cursor.usage
    if total is None:
        stored = store.runs.stored(session_id, run_id)
        if stored is None:
            return
        total = stored.value.usage
    for purpose, instance, call in calls:
        cost = call.get("cost")
        total = total.add(purpose, call.get("usage"), cost)
        given, produced, _ = usage_tokens(call.get("usage"))
        found.usage_events.append((run_id, {
            "op_id": call.get("op_id"), "purpose": purpose, "instance": instance,
            "input_tokens": given, "output_tokens": produced,
            "cost": float(cost) if isinstance(cost, int | float)
            and not isinstance(cost, bool) else None}))
    cursor.usage = total
    found.changed = True


def _fold_usage(store: PlatformStore, session_id: str, run_id: str, cursor: OpenRun,
                found: Pass) -> None:
    """A run that is not running (stopped, or closing) gets its cursor's totals on its
    item and index entry, in the same transaction."""
    if cursor.usage is None:
        return
    stored = store.runs.stored(session_id, run_id)
    if stored is None or stored.value.usage == cursor.usage:
        return
    found.runs.append((stored, stored.value.model_copy(update={"usage": cursor.usage})))


class _Joined:
    """The companion's writes for one commit."""

    def __init__(self, store: PlatformStore, writes: list[Write],
                 notify: Callable[[], None] | None,
                 written: Callable[[], None] | None = None) -> None:
        self.store, self.writes, self.notify = store, writes, notify
        self.written = written

    def join(self, transaction: object) -> None:
        self.store.items.join_writes(self.writes, transaction)

    def committed(self) -> None:
        if self.written is not None:
            self.written()
        if self.notify is not None:
            try:
                self.notify()
            except Exception:  # an observation; the commit holds
                log.exception("a committed event was not notified")


class SessionCommits:
    """The checkpoint store's companion for the platform's sessions (module docstring)."""

    def __init__(self, store: PlatformStore, *, redactor: Redactor | None = None) -> None:
        self.store = store
        self.redactor = redactor or Redactor()
        self._sessions: dict[str, str] = {}  # run -> session (immutable once known)
        self._watched: dict[str, Callable[[], MainView]] = {}
        self._held: dict[str, list[tuple[str, dict[str, Any]]]] = {}  # run -> events
        self._lock = threading.Lock()
        self._notify: Callable[[], None] | None = None

    def bind_notify(self, notify: Callable[[], None]) -> None:
        """Called once a commit holding events committed (``RunTracker.notify``: wakes
        the readers following a run)."""
        self._notify = notify

    def watch(self, run_id: str, *, view: Callable[[], MainView]) -> None:
        """Offer ``view`` (the engine driving ``run_id``: its ``main_view``) as the
        session's reusable view when a commit completes the run. What the run inherited
        is read from its head (the main frame's ``history_watermark``: every main seq up
        to it, as no later record gets a lower seq)."""
        with self._lock:
            self._watched[run_id] = view

    def unwatch(self, run_id: str) -> None:
        with self._lock:
            self._watched.pop(run_id, None)
        self.flush_held(run_id)

    def hold(self, run_id: str, topic: str, data: dict[str, Any]) -> bool:
        """Keep an event the engine emits right before the commit that saves what it
        reports (``HELD_TOPICS``) for that commit's event item, when the commit writes
        one anyway (its ``model.usage`` events): one item, no write of its own. False:
        not held (another topic, or a run this process does not drive), append it."""
        if topic not in HELD_TOPICS:
            return False
        with self._lock:
            if run_id not in self._watched:
                return False
            self._held.setdefault(run_id, []).append((topic, data))
        return True

    def flush_held(self, run_id: str) -> None:
        """Append the run's held events on their own (no commit took them, or another
        event is to follow them)."""
        with self._lock:
            held = self._held.pop(run_id, [])
        if held:
            try:
                self.store.events.append(run_id, held)
            except Exception:  # an observation never breaks a step
                log.exception("run %s: held events were not recorded", run_id)
            if self._notify is not None:
                self._notify()

    def _written(self, run_id: str, count: int) -> Callable[[], None]:
        def drop() -> None:
            with self._lock:
                self._held[run_id] = self._held.get(run_id, [])[count:]
        return drop

    def prepare(self, store: BaseCheckpointStore, commit: Commit) -> _Joined | None:
        progress = progress_of(commit.head)
        if progress is None:
            return None
        sid = self._session_of(commit.run_id)
        head = None if sid is None else self.store.streams.head(sid)
        if sid is None or head is None or commit.run_id not in head.value.open:
            self.flush_held(commit.run_id)
            return None
        open_runs = {k: v.model_copy(deep=True) for k, v in head.value.open.items()}
        found = Pass(head.value.seq)
        advance(self.store, sid, commit.run_id, progress, _reader(store, commit), open_runs,
                found, abandon=False, redactor=self.redactor)
        stopping = self._stopping(sid, commit.run_id, progress, found)
        writes = record_writes(head, StreamHead(session_id=sid, seq=found.seq,
                                                open=open_runs),
                               found.records, found.runs) if found.changed else \
            [check(f"session#{sid}", "stream", head.version)]
        writes += stopping
        view = self._view(store, sid, commit, found) \
            if progress.status == "completed" else None
        if view is not None:
            writes.append(view_write(sid, view))
        if not found.usage_events:
            self.flush_held(commit.run_id)
        if not found.changed and view is None and not stopping:
            return None
        written = None
        if found.usage_events:  # the model.usage events ride in the same transaction,
            with self._lock:  # after the held events of this commit (model.completed)
                held = list(self._held.get(commit.run_id, []))
            writes += self.store.events.append_writes(commit.run_id, [
                *held, *(("model.usage", data) for _, data in found.usage_events)])[0]
            written = self._written(commit.run_id, len(held))
        return _Joined(self.store, writes, self._notify if found.usage_events else None,
                       written)

    def _stopping(self, sid: str, run_id: str, progress: Progress,
                  found: Pass) -> list[Write]:
        """A commit that stops the run (completed, failed, cancelled, blocked) records the
        run's status and gives the session's lease back in its own transaction
        (``agentloom.platform.lease``): the run item (with the usage ``found`` adds),
        its index entries, and the session item when it names this run."""
        if progress.status == "running":
            return []
        mine = [(old, new) for old, new in found.runs if new.run_id == run_id]
        found.runs[:] = [pair for pair in found.runs if pair[1].run_id != run_id]
        stored = mine[0][0] if mine else self.store.runs.stored(sid, run_id)
        if stored is None:
            return []
        base = mine[0][1] if mine else stored.value
        error = progress.error
        new = base.model_copy(update={
            "status": progress.status, "updated_at": now(),
            "error": self.redactor.scrub(dict(error)) if error else None})
        if new.status == stored.value.status and new.error == stored.value.error and \
                not mine:
            return []
        session = self.store.sessions.get(sid)
        release = session is not None and session.value.active_run == run_id
        return update_writes(stored, new, session=session if release else None,
                             session_update=session.value.model_copy(
                                 update={"active_run": None, "driver": None})
                             if release and session is not None else None)

    def _session_of(self, run_id: str) -> str | None:
        with self._lock:
            known = self._sessions.get(run_id)
        if known is None:
            known = self.store.runs.session_of(run_id)
            if known is not None:
                with self._lock:
                    self._sessions[run_id] = known
        return known

    def _view(self, store: BaseCheckpointStore, sid: str, commit: Commit,
              found: Pass) -> ViewRef | None:
        run_id = commit.run_id
        with self._lock:
            watched = self._watched.get(run_id)
        if watched is None:
            return None
        main = watched()
        if not main.compacted:
            return None
        main_records = [r for r in [*self._main_records(sid), *found.records]
                        if r.instance == "main"]
        records = [{"seq": r.seq, "run_id": r.run_id, "instance": r.instance, "kind": r.kind}
                   for r in main_records]
        frame = commit.head["frames"].get("main") or {}
        watermark = int(frame.get("history_watermark") or 0)
        inherited = [[r.seq, r.seq] for r in main_records
                     if r.seq <= watermark and r.run_id != run_id]
        verdict = can_save_view(records, run_id=run_id, inherited_seqs=inherited,
                                pending_tools=False, queued_inputs=False)
        if not verdict.allowed:
            return None
        view = make_view(verdict, run_id=run_id, messages=self.redactor.scrub(main.messages),
                         counters=main.counters)
        data = json.dumps(view.messages, ensure_ascii=False, sort_keys=True,
                          separators=(",", ":")).encode()
        blob = store.put_blob(run_id, data)
        return ViewRef(run_id=run_id, watermark=view.watermark,
                       observed_seqs=view.observed_seqs, blob=blob,
                       user_turns=view.user_turns, model_steps=view.model_steps,
                       baseline_user_turns=view.baseline_user_turns,
                       baseline_model_steps=view.baseline_model_steps)

    def _main_records(self, sid: str) -> list[SessionRecord]:
        out: list[SessionRecord] = []
        while True:
            page = self.store.streams.records(sid, after=out[-1].seq if out else 0,
                                              limit=_PAGE, instance="main")
            out += page
            if len(page) < _PAGE:
                return out


def _reader(store: BaseCheckpointStore, commit: Commit) -> Reader:
    """Entries of the committing run: those stored after ``after``, then the commit's own
    (not stored yet). The store is read only when the cursor is behind what is stored
    (the head's ``streams`` counters tell), i.e. for data from before this companion."""
    pending: dict[str, list[LogEntry]] = {}
    for entry in commit.entries:
        pending.setdefault(entry.stream, []).append(entry)
    counters = commit.head.get("streams")

    def read(stream: str, after: int) -> list[LogEntry]:
        mine = sorted(pending.get(stream, []), key=lambda e: e.seq)
        if not isinstance(counters, Mapping):
            stored_last = 1 << 62  # unknown: read what is stored
        elif mine:
            stored_last = mine[0].seq - 1
        else:
            stored_last = int(counters.get(stream, 0))
        stored = store.read(commit.run_id, stream, after) if after < stored_last else []
        return stored + [e for e in mine if e.seq > after]

    return read
