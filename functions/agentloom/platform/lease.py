"""Embedded sessions: the lease that says which process drives a session's run.

A session's lease is a checkpoint-store document ``session:<id>``; its head is updated
with compare-and-set like a run's (``SessionHead``, format 1)::

    {"format": 1, "session": "<id>",
     "agent": {"space_id", "agent_id", "version"} | null,  # bound on first use
     "active_run": "<run id>" | null,                      # the lease ...
     "driver": {"hostname", "boot_id", "pid_ns", "pid", "start", "since",
                "released"?} | null,                       # ... and who holds it
     "streams": {}, "open": {}}                            # see "Earlier homes"

The session's records, their order, status records and reusable views are the
platform's (``agentloom.platform.store.session_commits``: written in each run commit's
own transaction); both embedded hosts, the CLI and ``agentloom serve``, keep them in the
platform store on the home's SQLite file (``agentloom.local.runs``).

**Earlier homes.** Before that, this document also held the CLI's record stream
(``runs``, ``records`` and ``views`` streams, counted in ``streams``, and the synced
runs in ``open``). Such a session is not migrated (ADR 0003): ``old_stream`` tells, and
the app refuses to ask or resume in it, naming a new session as the way on.

**The lease: one active run per session.** ``acquire`` sets ``active_run`` and the
driving process (host, boot id, pid namespace, pid, start time) with compare-and-set, in
the same commit that binds the agent; of two questions started together exactly one
wins. It refuses while the lease names a run that is still ``running``:
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

from agentloom.platform.redaction import Redactor
from agentloom_runtime.checkpoint.store import BaseCheckpointStore, Commit
from agentloom_runtime.engine import RunSummary, read_run
from agentloom_runtime.errors import CheckpointConflict, ConfigError, PersistenceError
from agentloom_runtime.snapshot import AgentSnapshot

FORMAT = 1
ATTEMPTS = 50  # compare-and-set retries on the session document


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


class SessionHead(TypedDict):
    format: int
    session: str
    agent: AgentBinding | None
    active_run: str | None
    driver: Driver | None
    streams: dict[str, int]  # an earlier home's record streams (never written now)
    open: dict[str, Any]


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


class SessionLeases:
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
        # before format 1 the head only counted its (CLI record) streams
        return loaded.version, SessionHead(
            format=FORMAT, session=session, agent=None, active_run=None, driver=None,
            streams={k: int(body.get(k, 0)) for k in ("runs", "views")}, open={})

    def head(self, session: str) -> SessionHead:
        return self._load(session)[1]

    def _update(self, session: str, change: Callable[[SessionHead], bool]) -> SessionHead:
        """Apply ``change`` to a fresh copy of the head and commit it, retrying on a
        compare-and-set conflict; ``change`` returns False when there is nothing to write
        (and may raise to refuse)."""
        key = self._key(session)
        for _ in range(ATTEMPTS):
            version, current = self._load(session)
            head = copy.deepcopy(current)
            if not change(head):
                return current
            try:
                self.store.commit(Commit(key, version, dict(head), []))
                return head
            except CheckpointConflict:
                time.sleep(0.001)
                continue
        raise PersistenceError(f"could not write session {session!r}: it kept changing "
                               f"under {ATTEMPTS} attempts", details={"session": session})

    def old_stream(self, session: str) -> bool:
        """Whether the session holds the CLI's earlier record stream (module docstring,
        "Earlier homes")."""
        return any(self.head(session)["streams"].values())

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
                record: bool = False) -> Driver:
        """Take the session's lease for ``run_id`` (a new question when ``new``; ``agent``
        bound or checked in the same commit). Raises
        ``ConfigError`` naming who holds it. Returns the driver identity to release with.
        ``record`` is accepted for earlier callers and changes nothing: the session's
        records are the platform's."""
        del record
        me = driver or this_process()

        def change(head: SessionHead) -> bool:
            if agent is not None:
                _check_agent(session, head, agent)
            lease = self._lease(head)
            refusal = self._refusal(session, lease, None if new else run_id)
            if refusal is not None:
                raise ConfigError(refusal, details={
                    "session": session, "run_id": lease.run_id, "liveness": lease.liveness,
                    "pid": (lease.driver or {}).get("pid"),
                    "way_out": "resume" if lease.liveness == "gone" else "wait"})
            head["active_run"], head["driver"] = run_id, me
            return True

        self._update(session, change)
        return me

    def release(self, session: str, run_id: str, driver: Driver) -> None:
        """Give the lease back: cleared when the run stopped, marked released (the run
        interrupted) when it is still ``running``. A no-op if the lease is no longer ours."""

        def change(head: SessionHead) -> bool:
            if head["active_run"] != run_id or not _same_driver(head["driver"], driver):
                return False
            summary = self._summary(run_id)
            if summary is not None and summary.status == "running":
                held = head["driver"]
                assert held is not None
                held["released"] = True
            else:
                head["active_run"], head["driver"] = None, None
            return True

        self._update(session, change)


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
