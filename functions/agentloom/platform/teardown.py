"""Deleting a session: its records, then what a backend made for it (issue 19).

``DELETE /api/v1/sessions/{session}`` (``agentloom session delete SES``) by the
session's owner or an admin of its space; anyone else — another space's user, a member
who does not own it — gets 404 ``session_not_found``, as for reading it. While a run
holds the session (queued, running, interrupted) it is refused with 409 ``run_active``
naming the run (``way_out`` cancel: cancel it or let it finish first; ``wait``: it
ended, and its driver is still letting go).

The order makes a crash harmless:

1. ``store.teardown.close``: one transaction deletes the session item (expecting the
   version read: an ask that took the lease meanwhile wins, the delete reads again and
   answers 409) and writes the teardown marker. The session is gone from here on.
2. ``SessionResources.remove``: what the backend made for it — on AWS the session's EFS
   access points, task-definition revisions and files on the volume (the step
   function removes those: ``agentloom.aws.teardown``), embedded its workspace
   directory and lock directory (``agentloom.local.teardown``). Each
   adapter treats "already gone" as done.
3. The checkpoint of each of its runs (head, log, blobs and the run's wrapped data keys:
   ``delete_run`` of the checkpoint store), then ``store.teardown.purge``: its runs,
   records, events, views, keys; the marker last.

A retried delete of a session whose marker remains (a crash after step 1) finishes the
job and answers 204 again; ``sweep`` finishes every pending one (run at start-up by
``agentloom serve``). What is left on purpose: the skill versions' shared access
points, and knowledge bases and their vector indexes, which belong to the space, not to a
session (docs/operations.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from agentloom.platform.access import check_id
from agentloom.platform.domain import RANK, Session
from agentloom.platform.errors import Conflict, NotFound, Unavailable
from agentloom.platform.identity import Principal
from agentloom.platform.store import PlatformStore, WriteConflict, retry_conflicts

log = logging.getLogger(__name__)


class TeardownIncomplete(Unavailable):
    """A backend could not remove all of a session's resources yet (503; the marker
    stays, so a retried delete or the next sweep goes on from there)."""

    code = "teardown_incomplete"


class SessionResources(Protocol):
    def remove(self, session: Session) -> None:
        """Remove what this backend made for ``session``; absent counts as removed
        (``TeardownIncomplete`` when something could not be removed now)."""
        ...


class RunCheckpoints(Protocol):
    def delete_run(self, run_id: str) -> None:
        """Remove the run's checkpoint (head, log, blobs, key records); absent is done."""
        ...


class KeepNothingExtra:
    """A host that made nothing outside the platform store for its sessions."""

    def remove(self, session: Session) -> None:
        return None


NOTHING_EXTRA = KeepNothingExtra()


class SessionTeardown:
    """``driving``: whether a run is still driven (the launcher's probe): a run that gave
    the session back is let go of by its driver only after its last status event, which
    would otherwise land after the purge."""

    def __init__(self, store: PlatformStore, resources: SessionResources,
                 driving: Callable[[str], bool], checkpoints: RunCheckpoints) -> None:
        self.store = store
        self.resources = resources
        self.driving = driving
        self.checkpoints = checkpoints

    def delete(self, who: Principal, session_id: str) -> None:
        check_id(session_id, "ses", "session")

        def attempt() -> Session:
            found = self.store.sessions.get(session_id)
            if found is None:  # gone, or a teardown that did not finish
                pending = self.store.teardown.marker(session_id)
                if pending is None or not self._may_delete(who, pending):
                    raise _not_found(session_id)
                return pending
            session = found.value
            if not self._may_delete(who, session):
                raise _not_found(session_id)
            if session.active_run is not None:
                raise Conflict(f"run {session.active_run} holds session {session_id}; "
                               "cancel it or wait for it to end, then delete the session",
                               code="run_active",
                               details={"run_id": session.active_run, "way_out": "cancel"})
            self._refuse_while_driven(session)
            self.store.teardown.close(session, found.version)
            return session

        self._finish(retry_conflicts(attempt))

    def _refuse_while_driven(self, session: Session) -> None:
        """The run that held the session last (the latest updated: an ask or a resume
        took the lease for it) may still be writing as its driver lets go."""
        runs = self.store.runs.of_session(session.session_id)
        last = max(runs, key=lambda run: run.updated_at, default=None)
        if last is not None and self.driving(last.run_id):
            raise Conflict(f"run {last.run_id} of session {session.session_id} is still "
                           "being let go of by its driver; try again in a moment",
                           code="run_active", details={"run_id": last.run_id,
                                                       "way_out": "wait"})

    def sweep(self) -> int:
        """Finish every teardown a crash left; returns how many finished."""
        done = 0
        for session in self.store.teardown.pending():
            try:
                self._finish(session)
            except (TeardownIncomplete, WriteConflict, OSError) as err:  # the next sweep
                log.warning("teardown of session %s did not finish: %s",
                            session.session_id, type(err).__name__)
                continue
            done += 1
        return done

    def _finish(self, session: Session) -> None:
        self.resources.remove(session)
        for run in self.store.runs.of_session(session.session_id):  # before their records
            self.checkpoints.delete_run(run.run_id)
        self.store.teardown.purge(session)
        log.info("session %s deleted", session.session_id)

    def _may_delete(self, who: Principal, session: Session) -> bool:
        member = self.store.spaces.member(session.space_id, who.user_id)
        if member is None:
            return False
        return session.user_id == who.user_id or RANK[member.role] >= RANK["admin"]


def _not_found(session_id: str) -> NotFound:
    return NotFound(f"session {session_id} not found", code="session_not_found")
