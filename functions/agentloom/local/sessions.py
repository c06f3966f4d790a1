"""Embedded sessions: one ordered record stream per session, a lease, reusable views.

A session is a checkpoint-store document ``session:<id>``; its head is updated with
compare-and-set like a run's (``SessionHead``, format 1)::

    {"format": 1, "session": "<id>",
     "agent": {"space_id", "agent_id", "version"} | null,  # bound on first use
     "active_run": "<run id>" | null,                      # the lease ...
     "driver": {"hostname", "boot_id", "pid_ns", "pid", "start", "since",
                "released"?} | null,                       # ... and who holds it
     "streams": {"runs": n, "records": n, "views": n},     # last seq of each stream
     "open": {"<run id>": {"src": <last src:main seq synced>,
                           "noted": "<execution>:<status>" | ""}}}

Streams: ``runs`` — ``{"run_id"}`` in the order asked; ``records`` — the session's
record stream, whose seq *is* the session seq (seed 000 §2, §4); ``views`` —
``SessionView`` s. A record is either a reference to a run's source record,
``{"run_id", "instance": "main", "src": <local seq>, "kind"}`` (the content stays in the
run, stored once), or a status record of the platform (``run_status_record``).

**Order = commit order.** ``sync`` copies references to a run's new ``src:main`` records
(its own prompt and history copies left out) into ``records`` and advances the run's
cursor (``open[run]["src"]``) in the same compare-and-set commit, so a record gets
exactly one session seq — deduplicated by (run_id, instance, local seq) — in the order it
reached the session. The app syncs after every step and before building a new run's
history, so a crash between a run's commit and its sync is caught up by the next sync,
and an old run resumed after newer ones lands at the end (A → B → C → resume A → D: D
sees B, C and A's late records once each). A run leaves ``open`` once it is completed
or cancelled and fully synced. When a run stopped without completing, ``sync`` appends
one status record per (execution, status): failed and cancelled at once, blocked when a
new question is asked instead of resuming it (``abandon``).

**The lease: one active run per session.** ``acquire`` sets ``active_run`` and the
driving process (host, boot id, pid namespace, pid, start time) with compare-and-set, in
the same commit that registers a new run and binds the agent; of two questions started
together exactly one wins. It refuses while the lease names a run that is still
``running``:
- its driver is alive: "run X is being driven by process P on this host; wait for it or
  cancel it" (never an advice to take it over);
- its driver is provably gone (same host and boot, the pid dead or started at another
  time; the host rebooted; or the driver released the lease without the run stopping):
  "run X was interrupted; continue it with `agentloom resume X`" — ``resume`` of X may
  then take the lease over;
- the driver cannot be checked from here (another host or pid namespace): wait or cancel.
A lease naming a run that has stopped (or never started, its driver gone) holds nothing.
``release`` clears the lease when the run stopped, and marks it released (the run
interrupted) when the driver leaves a run still ``running``.
"""

from __future__ import annotations

import copy
import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

from agentloom_runtime.checkpoint.store import BaseCheckpointStore, Commit, LogEntry
from agentloom_runtime.context.history import (
    SKIPPED_KINDS,
    RunHistory,
    SessionView,
    build_run_history,
    can_save_view,
    make_view,
    run_status_record,
)
from agentloom_runtime.engine import RunSummary, read_run
from agentloom_runtime.errors import CheckpointConflict, ConfigError, PersistenceError
from agentloom_runtime.snapshot import AgentSnapshot

from .redaction import Redactor

FORMAT = 1
ATTEMPTS = 50  # compare-and-set retries on the session document
NOTED_AT_ONCE = ("failed", "cancelled")  # stopped statuses recorded as soon as synced
CLOSED = ("completed", "cancelled")  # a run in these states adds no more records


class Driver(TypedDict):
    """The process driving a run: a pid is only checked on the same boot and pid
    namespace; the start time tells a reused pid apart."""

    hostname: str
    boot_id: str
    pid_ns: int
    pid: int
    start: str | None
    since: float
    released: NotRequired[bool]


class AgentBinding(TypedDict):
    space_id: str
    agent_id: str
    version: int


class OpenRun(TypedDict):
    src: int  # the highest src:main seq of the run already synced
    noted: str  # "<execution>:<status>" of its last status record, "" if none


class SessionHead(TypedDict):
    format: int
    session: str
    agent: AgentBinding | None
    active_run: str | None
    driver: Driver | None
    streams: dict[str, int]
    open: dict[str, OpenRun]


Liveness = Literal["alive", "gone", "unverifiable"]


# -- who drives a run --------------------------------------------------------------------


def _host() -> tuple[str, str, int]:
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    try:
        pid_ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        pid_ns = 0
    return socket.gethostname(), boot, pid_ns


def _proc_start(pid: int) -> str | None:
    """Start time of a live process (in clock ticks since boot); None when it is gone or
    a zombie, or when there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def this_process() -> Driver:
    hostname, boot, pid_ns = _host()
    pid = os.getpid()
    return Driver(hostname=hostname, boot_id=boot, pid_ns=pid_ns, pid=pid,
                  start=_proc_start(pid), since=time.time())


def liveness(driver: Mapping[str, Any] | None) -> Liveness:
    """Whether the process of a lease still runs, as far as this host can prove it."""
    if not driver or driver.get("released"):
        return "gone"
    hostname, boot, pid_ns = _host()
    if driver.get("hostname") != hostname:
        return "unverifiable"
    if boot and driver.get("boot_id") and driver.get("boot_id") != boot:
        return "gone"  # the host restarted since
    if not boot or driver.get("pid_ns") != pid_ns:
        return "unverifiable"
    start = _proc_start(int(driver.get("pid") or 0))
    return "alive" if start is not None and start == driver.get("start") else "gone"


def _same_driver(a: Mapping[str, Any] | None, b: Mapping[str, Any]) -> bool:
    return a is not None and all(a.get(k) == b.get(k)
                                 for k in ("hostname", "boot_id", "pid_ns", "pid", "start"))


def agent_binding(snapshot: AgentSnapshot) -> AgentBinding:
    return AgentBinding(space_id=snapshot.space_id, agent_id=snapshot.agent_id,
                        version=snapshot.version)


@dataclass(frozen=True)
class LeaseState:
    """Who holds a session's lease, for a host to show."""

    run_id: str | None
    liveness: Liveness | None  # None when the lease holds nothing
    driver: Mapping[str, Any] | None


# -- the session document ----------------------------------------------------------------


class LocalSessions:
    def __init__(self, store: BaseCheckpointStore, *, redactor: Redactor | None = None) -> None:
        self.store = store
        self.redactor = redactor or Redactor()

    @staticmethod
    def _key(session: str) -> str:
        return f"session:{session}"

    def _load(self, session: str) -> tuple[int, SessionHead]:
        loaded = self.store.load_head(self._key(session))
        if loaded is None:
            return 0, SessionHead(format=FORMAT, session=session, agent=None, active_run=None,
                                  driver=None, streams={}, open={})
        body = loaded.body
        if body.get("format") == FORMAT:
            return loaded.version, SessionHead(**body)  # type: ignore[typeddict-item]
        if "format" in body:
            raise ConfigError(f"session {session!r} was saved in session format "
                              f"{body['format']}; this code reads format {FORMAT}")
        # before format 1 the head only counted its streams ({"runs": n, "views": n}):
        # every run is synced again from the start, in the order the runs were asked
        runs = [e.body["run_id"] for e in self.store.read(self._key(session), "runs")]
        return loaded.version, SessionHead(
            format=FORMAT, session=session, agent=None, active_run=None, driver=None,
            streams={k: int(body.get(k, 0)) for k in ("runs", "views")},
            open={r: OpenRun(src=0, noted="") for r in runs})

    def head(self, session: str) -> SessionHead:
        return self._load(session)[1]

    def _update(self, session: str, change: Callable[[SessionHead], list[tuple[str, Any]] | None]
                ) -> SessionHead:
        """Apply ``change`` to a fresh copy of the head and commit it with the entries it
        returns (stream, body), retrying on a compare-and-set conflict; ``change`` returns
        None when there is nothing to write (and may raise to refuse)."""
        key = self._key(session)
        for _ in range(ATTEMPTS):
            version, current = self._load(session)
            head = copy.deepcopy(current)
            appended = change(head)
            if appended is None:
                return current
            entries = []
            for stream, body in appended:
                head["streams"][stream] = head["streams"].get(stream, 0) + 1
                entries.append(LogEntry(stream, head["streams"][stream], dict(body)))
            try:
                self.store.commit(Commit(key, version, dict(head), entries))
                return head
            except CheckpointConflict:
                time.sleep(0.001)
                continue
        raise PersistenceError(f"could not write session {session!r}: it kept changing "
                               f"under {ATTEMPTS} attempts", details={"session": session})

    def runs(self, session: str) -> list[str]:
        return [e.body["run_id"] for e in self.store.read(self._key(session), "runs")]

    # -- the lease -------------------------------------------------------------------------

    def lease(self, session: str) -> LeaseState:
        head = self.head(session)
        return self._lease(head)

    def _lease(self, head: SessionHead) -> LeaseState:
        run_id = head["active_run"]
        if run_id is None:
            return LeaseState(None, None, None)
        summary = self._summary(run_id)
        state = liveness(head["driver"])
        if summary is not None and summary.status != "running":
            return LeaseState(None, None, None)  # the run stopped: the lease holds nothing
        if summary is None and state == "gone":
            return LeaseState(None, None, None)  # its driver died before the run started
        return LeaseState(run_id, state, head["driver"])

    def _summary(self, run_id: str) -> RunSummary | None:
        try:
            return read_run(self.store, run_id)
        except ConfigError:
            return None  # saved by another runtime format: it can hold and add nothing

    def _refusal(self, session: str, lease: LeaseState, wanted: str | None) -> str | None:
        """Why ``wanted`` (a run to drive, or None for a new question) may not take the
        lease; None when it may."""
        run_id, driver = lease.run_id, lease.driver or {}
        if run_id is None or (lease.liveness == "gone" and run_id == wanted):
            return None
        if lease.liveness == "gone":
            return (f"session {session!r}: run {run_id} was interrupted; continue it with "
                    f"`agentloom resume {run_id}`")
        pid = driver.get("pid")
        if lease.liveness == "alive":
            mine = " (this process)" if pid == os.getpid() else ""
            return (f"session {session!r}: run {run_id} is being driven by process {pid}"
                    f"{mine} on this host; wait for it or cancel it")
        return (f"session {session!r}: run {run_id} is being driven by process {pid} on "
                f"host {driver.get('hostname')!r}, which cannot be checked from here; wait "
                "for it or cancel it")

    def acquire(self, session: str, run_id: str, *, agent: AgentBinding | None = None,
                new: bool = True, driver: Driver | None = None,
                record: bool = True) -> Driver:
        """Take the session's lease for ``run_id`` (a new question when ``new``: the run
        is registered in the same commit, and ``agent`` bound or checked). Raises
        ``ConfigError`` naming who holds it. Returns the driver identity to release with.
        ``record=False``: the lease only — the run is not registered in this document's
        record stream (a host that keeps its session records elsewhere: the platform)."""
        me = driver or this_process()

        def change(head: SessionHead) -> list[tuple[str, Any]]:
            if agent is not None:
                _check_agent(session, head, agent)
            lease = self._lease(head)
            refusal = self._refusal(session, lease, None if new else run_id)
            if refusal is not None:
                raise ConfigError(refusal, details={
                    "session": session, "run_id": lease.run_id, "liveness": lease.liveness,
                    "pid": (lease.driver or {}).get("pid"),
                    "way_out": "resume" if lease.liveness == "gone" else "wait"})
            stale = head["active_run"]
            if stale is not None and stale != run_id and self._summary(stale) is None:
                head["open"].pop(stale, None)  # a lease taken by a run that never started
            head["active_run"], head["driver"] = run_id, me
            if not record:
                return []
            if new or (run_id not in head["open"] and run_id not in self.runs(session)):
                head["open"][run_id] = OpenRun(src=0, noted="")
                return [("runs", {"run_id": run_id})]
            return []

        self._update(session, change)
        return me

    def release(self, session: str, run_id: str, driver: Driver) -> None:
        """Give the lease back: cleared when the run stopped, marked released (the run
        interrupted) when it is still ``running``. A no-op if the lease is no longer ours."""

        def change(head: SessionHead) -> list[tuple[str, Any]] | None:
            if head["active_run"] != run_id or not _same_driver(head["driver"], driver):
                return None
            summary = self._summary(run_id)
            if summary is not None and summary.status == "running":
                held = head["driver"]
                assert held is not None
                held["released"] = True
            else:
                head["active_run"], head["driver"] = None, None
            return []

        self._update(session, change)

    # -- the record stream -----------------------------------------------------------------

    def sync(self, session: str, *, runs: Iterable[str] | None = None,
             abandon: bool = False) -> int:
        """Append references to the new main records of the session's open runs (or of
        ``runs``) to its record stream, and status records for runs that stopped without
        completing (blocked ones only when ``abandon``: a new question is being asked).
        Returns the number of records appended."""
        wanted = None if runs is None else set(runs)
        appended = 0

        def change(head: SessionHead) -> list[tuple[str, Any]] | None:
            nonlocal appended
            out: list[tuple[str, Any]] = []
            changed = False
            for run_id in list(head["open"]):
                if wanted is not None and run_id not in wanted:
                    continue
                changed |= self._sync_run(head, run_id, out, abandon)
            appended = len(out)
            return out if changed else None

        self._update(session, change)
        return appended

    def _sync_run(self, head: SessionHead, run_id: str, out: list[tuple[str, Any]],
                  abandon: bool) -> bool:
        state = head["open"][run_id]
        summary = self._summary(run_id)  # before the records: a closed run adds no more
        changed = False
        for entry in self.store.read(run_id, "src:main", state["src"]):
            state["src"], changed = entry.seq, True
            kind = entry.body.get("kind")
            if kind not in SKIPPED_KINDS:
                out.append(("records", {"run_id": run_id, "instance": "main",
                                        "src": entry.seq, "kind": kind}))
        if summary is None:
            if head["active_run"] != run_id and self.store.load_head(run_id) is not None:
                del head["open"][run_id]  # a run of another format: nothing more comes
                changed = True
            return changed
        status = summary.status
        noted = f"{summary.execution}:{status}"
        if (status in NOTED_AT_ONCE or (status == "blocked" and abandon)) \
                and state["noted"] != noted:
            error = summary.error or {}
            record = run_status_record(run_id, status, code=error.get("code", ""),
                                       message=error.get("message", ""),
                                       abandoned=status == "blocked")
            out.append(("records", {**record, "execution": summary.execution}))
            state["noted"], changed = noted, True
        if status in CLOSED:
            del head["open"][run_id]
            changed = True
        return changed

    def records(self, session: str, *, messages: bool = True) -> list[dict[str, Any]]:
        """The session's main records in session order: ``{"seq", "run_id", "instance",
        "kind", "message", "visible"?, "name"?}`` (without the message fields when
        ``messages`` is false). Known credentials are redacted."""
        refs = self.store.read(self._key(session), "records")
        out = [{"seq": e.seq, **e.body} for e in refs]
        if not messages:
            return out
        first: dict[str, int] = {}
        for record in out:
            if "src" in record:
                first.setdefault(record["run_id"], int(record["src"]))
        bodies = {(run_id, e.seq): e.body for run_id, low in first.items()
                  for e in self.store.read(run_id, "src:main", low - 1)}
        for record in out:
            if "src" not in record:
                continue
            body = bodies[record["run_id"], int(record["src"])]
            record["message"] = body["message"]
            for key in ("visible", "name"):
                if body.get(key):
                    record[key] = body[key]
        return [self.redactor.scrub(r) for r in out]

    # -- history and views -----------------------------------------------------------------

    def views(self, session: str) -> list[SessionView]:
        return [SessionView.model_validate(self.redactor.scrub(e.body))
                for e in self.store.read(self._key(session), "views")]

    def history(self, session: str, *, abandon: bool = False) -> RunHistory:
        """What a new run inherits, after a sync (``abandon``: a new question is being
        asked, so a blocked run's status becomes a record)."""
        self.sync(session, abandon=abandon)
        return build_run_history(self.records(session), self.views(session))

    def save_view(self, session: str, run_id: str, history: RunHistory,
                  messages: list[dict[str, Any]], counters: dict[str, int]) -> bool:
        """After a run whose main view was compacted: save it as a reusable view if it
        covers an observed, contiguous prefix of the session (seed 000 §4)."""
        self.sync(session, runs=[run_id])
        check = can_save_view(self.records(session, messages=False), run_id=run_id,
                              inherited_seqs=history.inherited_seqs, pending_tools=False,
                              queued_inputs=False)
        if not check.allowed:
            return False

        def change(head: SessionHead) -> list[tuple[str, Any]]:
            view = make_view(check, run_id=run_id, messages=self.redactor.scrub(messages),
                             counters=counters, revision=head["streams"].get("views", 0) + 1)
            return [("views", view.model_dump(mode="json"))]

        self._update(session, change)
        return True


def _check_agent(session: str, head: SessionHead, agent: AgentBinding) -> None:
    bound = head["agent"]
    if bound is None:
        head["agent"] = agent
        return
    if bound != agent:
        raise ConfigError(
            f"session {session!r} belongs to agent {bound['agent_id']!r} version "
            f"{bound['version']} (space {bound['space_id']!r}); agent {agent['agent_id']!r} "
            f"version {agent['version']} (space {agent['space_id']!r}) cannot ask in it — "
            "use another session", details={"session": session, "bound": dict(bound),
                                             "agent": dict(agent)})
