"""The session lease: one active run per session, and who drives it.

There is one lease, the platform's session item (``Session``): ``active_run`` names the
run that holds the session (queued, running or interrupted) and ``driver`` the process
that drives it. Every host takes it the same way, in the platform store's transactions:

- a new question: ``SessionLease.open`` — the session (``active_run`` and ``driver``,
  expecting the version read), the run and its cursor in one transaction
  (``store.runs.start``); of two questions started together exactly one commits;
- a resume or a verdict: ``SessionLease.take`` — the session and the run in one
  transaction (``store.runs.update``);
- letting go: ``RunTracker.stopped`` — with the run's status: cleared when the run
  stopped, the driver cleared (the run ``interrupted``) when it is still running.

``driver`` is a process identity (host, boot id, pid namespace, pid, start time:
``this_process``), or ``STEP_FUNCTIONS`` for a run an AWS state machine drives. Whether
it still runs is ``liveness``: ``alive`` / ``gone`` (same host and boot and the pid dead
or reused; the host rebooted; the driver let go) / ``unverifiable`` (another host or pid
namespace, or Step Functions). ``SessionLease.state`` reads what the lease holds: a
lease naming a run that has stopped — or that never started, its driver gone — holds
nothing. ``blocking`` says why another driver may not take it; each host words that for
its own users (the CLI names its commands, the API its routes).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict

from agentloom.platform.domain import ACTIVE_STATES, Idempotency, Run, RunState, Session, now
from agentloom.platform.errors import Conflict
from agentloom.platform.store import ABSENT, PlatformStore, Versioned
from agentloom.sandbox._liveness import proc_start
from agentloom_runtime.engine import RunSummary
from agentloom_runtime.snapshot import AgentSnapshot

Liveness = Literal["alive", "gone", "unverifiable"]
Blocking = Literal["alive", "unverifiable", "interrupted"]


class Driver(TypedDict):
    """The process driving a run: a pid is only checked on the same boot and pid
    namespace; the start time tells a reused pid apart."""

    hostname: str
    boot_id: str
    pid_ns: int
    pid: int
    start: str | None
    since: float


class AgentBinding(TypedDict):
    space_id: str
    agent_id: str
    version: int


STEP_FUNCTIONS = Driver(hostname="aws:stepfunctions", boot_id="", pid_ns=0, pid=0,
                        start=None, since=0.0)


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


def this_process() -> Driver:
    hostname, boot, pid_ns = _host()
    pid = os.getpid()
    return Driver(hostname=hostname, boot_id=boot, pid_ns=pid_ns, pid=pid,
                  start=proc_start(pid), since=time.time())


def liveness(driver: Mapping[str, Any] | None) -> Liveness:
    """Whether the process of a lease still runs, as far as this host can prove it."""
    if not driver:
        return "gone"
    hostname, boot, pid_ns = _host()
    if driver.get("hostname") != hostname:
        return "unverifiable"
    if boot and driver.get("boot_id") and driver.get("boot_id") != boot:
        return "gone"  # the host restarted since
    if not boot or driver.get("pid_ns") != pid_ns:
        return "unverifiable"
    start = proc_start(int(driver.get("pid") or 0))
    return "alive" if start is not None and start == driver.get("start") else "gone"


def agent_binding(snapshot: AgentSnapshot) -> AgentBinding:
    return AgentBinding(space_id=snapshot.space_id, agent_id=snapshot.agent_id,
                        version=snapshot.version)


@dataclass(frozen=True)
class LeaseState:
    """What a session's lease holds, for a host to show."""

    run_id: str | None
    liveness: Liveness | None  # None when the lease holds nothing
    driver: Mapping[str, Any] | None


NOTHING = LeaseState(None, None, None)


def blocking(state: LeaseState, wanted: str | None) -> Blocking | None:
    """Why ``wanted`` (the run to drive; None: a new question) may not take the lease:
    its driver is alive or cannot be checked, or (a new question) the run that holds it
    was interrupted and waits for its resume or cancel. None: it may."""
    if state.run_id is None:
        return None
    if state.liveness == "gone":
        return None if state.run_id == wanted else "interrupted"
    return state.liveness


class LeaseRefused(Conflict):
    """The lease is held (``state``, ``why``); hosts word it for their users."""

    code = "run_active"

    def __init__(self, state: LeaseState, why: Blocking) -> None:
        super().__init__(f"run {state.run_id} holds the session ({why})",
                         details={"run_id": state.run_id, "liveness": state.liveness})
        self.state, self.why = state, why


Probe = Callable[[str, Mapping[str, Any] | None], Liveness]  # (run id, driver)


def process_probe(run_id: str, driver: Mapping[str, Any] | None) -> Liveness:
    del run_id
    return liveness(driver)


def launcher_probe(driving: Callable[[str], bool]) -> Probe:
    """Liveness for a host with a launcher: a run its launcher drives is alive; a driver
    that is this process or the launcher's state machine, and that the launcher does not
    drive, is gone; any other process is judged by ``liveness``."""

    def probe(run_id: str, driver: Mapping[str, Any] | None) -> Liveness:
        if driving(run_id):
            return "alive"
        if driver is not None and (driver.get("hostname") == STEP_FUNCTIONS["hostname"]
                                   or _is_this_process(driver)):
            return "gone"
        return liveness(driver)

    return probe


def _is_this_process(driver: Mapping[str, Any]) -> bool:
    me = this_process()
    return all(driver.get(k) == me[k]
               for k in ("hostname", "boot_id", "pid_ns", "pid", "start"))


class SessionLease:
    """The lease on the platform store; ``summary`` reads a run's checkpoint head (a run
    whose head says it stopped no longer holds its session); ``probe`` judges a driver
    (``process_probe`` by default)."""

    def __init__(self, store: PlatformStore, summary: Callable[[str], RunSummary | None],
                 probe: Probe = process_probe) -> None:
        self.store = store
        self.summary = summary
        self.probe = probe

    def state(self, session: Session) -> LeaseState:
        run_id = session.active_run
        if run_id is None:
            return NOTHING
        run = self.store.runs.get(session.session_id, run_id)
        if run is None or run.value.status not in ACTIVE_STATES:
            return NOTHING  # a pointer to a run that stopped holds nothing
        summary = self.summary(run_id)
        if summary is not None and summary.status != "running":
            return NOTHING  # it stopped; its driver is letting go
        if summary is None:  # queued: its driver has not started it yet
            state = liveness(session.driver)
            if state == "gone":
                return NOTHING  # its driver died before the run started
            return LeaseState(run_id, state, session.driver)
        return LeaseState(run_id, self.probe(run_id, session.driver), session.driver)

    def open(self, session: Versioned[Session], run: Run, driver: Driver | None, *,
             idempotency: Idempotency | None = None, replace: int = ABSENT) -> None:
        """Take the lease for the new run ``run`` (a new question) and store the run, in
        one transaction. ``LeaseRefused`` while another run holds it;
        ``WriteConflict`` when the session changed since it was read (read it again)."""
        self._check(session.value, None)
        held = session.value.model_copy(update={"driver": driver})
        self.store.runs.start(Versioned(held, session.version), run, idempotency, replace)

    def take(self, session: Versioned[Session], run: Versioned[Run],
             driver: Driver | None, *, status: RunState = "queued") -> Run:
        """Take the lease for ``run`` itself (a resume, a verdict): refused while another
        run holds it or a live driver drives this one; the run marked ``status``."""
        self._check(session.value, run.value.run_id)
        new = run.value.model_copy(update={"status": status, "updated_at": now()})
        held = session.value.model_copy(update={"active_run": run.value.run_id,
                                                "driver": driver})
        self.store.runs.update(run, new, session=session, session_update=held)
        return new

    def _check(self, session: Session, wanted: str | None) -> None:
        state = self.state(session)
        why = blocking(state, wanted)
        if why is not None:
            raise LeaseRefused(state, why)


def run_active(store: PlatformStore, session: Session, refused: LeaseRefused) -> Conflict:
    """The API's words for a session another run holds (``run_active``)."""
    active = refused.state.run_id
    held = store.runs.get(session.session_id, active) if active else None
    status = held.value.status if held else "running"
    if refused.why == "interrupted" or status == "interrupted":
        message = (f"run {active} was interrupted (nothing drives it); resume it or "
                   "cancel it before asking again")
        way_out = "resume"
    else:
        message = (f"run {active} is {status} in this session; follow its events, wait "
                   "for it, or cancel it")
        way_out = "wait"
    return Conflict(message, code="run_active",
                    details={"run_id": active, "status": status, "way_out": way_out})
