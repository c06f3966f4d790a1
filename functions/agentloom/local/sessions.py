"""The CLI's sessions: its runs in the platform's session stream, under the one session
lease (``agentloom.platform.lease``), worded for a person at a terminal.

- ``open``: a new question — the session created on first use (bound to the agent
  version of its first question: another agent or version is refused, naming both),
  then the run and the lease in one transaction, naming this process as the driver;
- ``take``: a resume or a verdict takes the lease for the run itself — refused while a
  live driver (or one that cannot be checked from here) holds it, taken over when its
  driver is provably gone;
- the lease is given back with the run's status (``RunTracker.stopped``).

A refusal names who holds the lease and the command that moves it on: "run X is being
driven by process P on this host; wait for it or cancel it" (never an advice to take
over a live driver's run), or "run X was interrupted; continue it with
`agentloom resume X`".

**Earlier homes.** Before the lease was the platform's, a checkpoint-store document
``session:<id>`` held it, and earlier still the CLI's own record stream (counted in its
``streams``). A session holding such a stream is not migrated (ADR 0003): ``old_stream``
tells, and the app refuses to ask or resume in it, naming a new session as the way on.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

from agentloom.platform.domain import Run, Session, now
from agentloom.platform.lease import (
    Driver,
    LeaseRefused,
    LeaseState,
    SessionLease,
)
from agentloom.platform.store import WriteConflict, retry_conflicts
from agentloom.platform.tracker import RunTracker
from agentloom_runtime.checkpoint.store import BaseCheckpointStore
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.snapshot import AgentSnapshot

LOCAL_USER = "local"  # the CLI's one user, in its platform session and run items


def old_stream(checkpoints: BaseCheckpointStore, session: str) -> bool:
    """Whether the session holds the CLI's earliest record stream (module docstring)."""
    loaded = checkpoints.load_head(f"session:{session}")
    if loaded is None:
        return False
    body = loaded.body
    streams = body.get("streams") if "format" in body else body
    return isinstance(streams, Mapping) and any(
        int(v or 0) for k, v in streams.items() if k in ("runs", "views"))


def refused(session: str, refusal: LeaseRefused) -> ConfigError:
    """The CLI's words for a lease another run holds."""
    state, why = refusal.state, refusal.why
    run_id, driver = state.run_id, state.driver or {}
    pid = driver.get("pid")
    if why == "interrupted":
        message = (f"session {session!r}: run {run_id} was interrupted; continue it with "
                   f"`agentloom resume {run_id}`")
    elif why == "alive":
        mine = " (this process)" if pid == os.getpid() else ""
        message = (f"session {session!r}: run {run_id} is being driven by process {pid}"
                   f"{mine} on this host; wait for it or cancel it")
    else:
        message = (f"session {session!r}: run {run_id} is being driven by process {pid} on "
                   f"host {driver.get('hostname')!r}, which cannot be checked from here; "
                   "wait for it or cancel it")
    return ConfigError(message, details={
        "session": session, "run_id": run_id, "liveness": state.liveness, "pid": pid,
        "way_out": "resume" if why == "interrupted" else "wait"})


def _check_agent(session: Session, snapshot: AgentSnapshot) -> None:
    bound = (session.space_id, session.agent_id, session.version)
    if bound == (snapshot.space_id, snapshot.agent_id, snapshot.version):
        return
    raise ConfigError(
        f"session {session.session_id!r} belongs to agent {session.agent_id!r} version "
        f"{session.version} (space {session.space_id!r}); agent {snapshot.agent_id!r} "
        f"version {snapshot.version} (space {snapshot.space_id!r}) cannot ask in it — use "
        "another session", details={"session": session.session_id, "bound": {
            "space_id": session.space_id, "agent_id": session.agent_id,
            "version": session.version}, "agent": {
            "space_id": snapshot.space_id, "agent_id": snapshot.agent_id,
            "version": snapshot.version}})


class CliSessions:
    def __init__(self, tracker: RunTracker) -> None:
        self.tracker = tracker
        self.store = tracker.store
        self.lease = SessionLease(tracker.store, tracker.summary)

    def item(self, session: str) -> Session | None:
        found = self.store.sessions.get(session)
        return found.value if found else None

    def state(self, session: str) -> LeaseState:
        found = self.item(session)
        return self.lease.state(found) if found else LeaseState(None, None, None)

    def open(self, session: str, run_id: str, snapshot: AgentSnapshot,
             driver: Driver | None) -> Run:
        """A new question's run in the session's stream, holding its lease (the session
        created on first use): before the run's first commit, since the companion writes
        only for runs the stream holds."""
        at = now()

        def attempt() -> Run:
            found = self.store.sessions.get(session)
            if found is None:
                with contextlib.suppress(WriteConflict):  # created meanwhile: read it
                    self.store.sessions.create(Session(
                        session_id=session, space_id=snapshot.space_id,
                        agent_id=snapshot.agent_id, version=snapshot.version,
                        user_id=LOCAL_USER, created_at=at))
                found = self.store.sessions.get(session)
                assert found is not None
            _check_agent(found.value, snapshot)
            run = Run(run_id=run_id, session_id=session, space_id=snapshot.space_id,
                      agent_id=snapshot.agent_id, version=snapshot.version,
                      user_id=LOCAL_USER, created_at=at, updated_at=at)
            try:
                self.lease.open(found, run, driver)
            except LeaseRefused as refusal:
                raise refused(session, refusal) from None
            return run

        return retry_conflicts(attempt)

    def take(self, session: str, run_id: str, driver: Driver | None) -> None:
        """The lease for ``run_id`` itself (resume, resolve), its run marked running."""

        def attempt() -> None:
            found, run = self.store.sessions.get(session), self.store.runs.get(session, run_id)
            if found is None or run is None:
                raise ConfigError(f"run {run_id} is not in the stream of session "
                                  f"{session!r}", details={"code": "run_not_in_session"})
            try:
                self.lease.take(found, run, driver, status="running")
            except LeaseRefused as refusal:
                raise refused(session, refusal) from None

        retry_conflicts(attempt)

    def details(self, session: str) -> dict[str, Any]:
        """The lease as a test or ``show`` reads it."""
        found = self.item(session)
        return {"active_run": found.active_run if found else None,
                "driver": found.driver if found else None}
