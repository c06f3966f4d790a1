"""Deleting a session's records (``agentloom.platform.teardown`` drives it).

``close`` is the one atomic step: in a transaction it deletes the session item (expecting
the version read, so a run that took the lease meanwhile makes it a conflict) and the
owner's index entries (a protocol thread's too), and writes the teardown marker
``teardown`` / ``session#{session}`` (the ``Session`` as it was). From then on the
session is gone for every route (404) and no run can start in it. ``purge`` then
deletes what is left, in small transactions that are each safe to repeat, and the
marker last: a crash anywhere leaves the marker, and the next ``purge`` (a retried
delete, or ``pending`` swept) finishes the job.

What ``purge`` deletes: ``session#{session}#i#{instance}`` (instances named by the
session's records, read before the main stream goes), everything under
``session#{session}`` (runs, idempotency keys, stream head, record batches, views),
every run's ``run#{run}`` items (the lookup and its events), its operator index entry
``space#{space}`` / ``runs#{status}#{run}``, ``active`` / ``run#{run}`` and the fence
``fence#{run}``. It never reads or writes another session's keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from agentloom.platform.domain import Run, Session

from .items import ABSENT, ItemStore, Write, delete, put
from .sessions import thread_sk

TEARDOWN_PK = "teardown"
CHUNK = 25  # deletes per transaction (DynamoDB takes 100; small keeps each retry cheap)


def _marker_sk(session_id: str) -> str:
    return f"session#{session_id}"


class SessionTeardownItems:
    """``store.teardown``: the marker and the deletes of one session's records."""

    def __init__(self, items: ItemStore) -> None:
        self._items = items

    def close(self, session: Session, version: int) -> None:
        """Session gone, marker written, in one transaction (``WriteConflict`` when the
        session changed since it was read at ``version``)."""
        sid = session.session_id
        thread = [] if session.thread is None else [
            delete(f"user#{session.user_id}", thread_sk(session))]
        self._items.transact([
            delete(f"session#{sid}", "session", version),
            delete(f"user#{session.user_id}", f"session#{session.space_id}#{sid}"),
            *thread,
            put(TEARDOWN_PK, _marker_sk(sid), session, ABSENT)])

    def marker(self, session_id: str) -> Session | None:
        """The session whose teardown began and has not finished."""
        found = self._items.get(TEARDOWN_PK, _marker_sk(session_id), Session)
        return None if found is None else found.value

    def pending(self) -> list[Session]:
        """Every session whose teardown has not finished."""
        return self._items.query(TEARDOWN_PK, "session#", Session)

    def purge(self, session: Session) -> None:
        """Delete the session's remaining records, then its marker (repeatable)."""
        sid = session.session_id
        self._delete(self._instance_stream_keys(sid))
        for run in self._items.query(f"session#{sid}", "run#", Run):
            rid = run.run_id
            self._delete([(f"space#{run.space_id}", f"runs#{run.status}#{rid}"),
                          ("active", f"run#{rid}"), (f"fence#{rid}", "fence")])
            self._delete(self._all_of(f"run#{rid}"))
        self._delete(self._all_of(f"session#{sid}"))
        self._items.transact([delete(TEARDOWN_PK, _marker_sk(sid))])

    def _instance_stream_keys(self, session_id: str) -> Iterator[tuple[str, str]]:
        instances: set[str] = set()
        for stored in self._items.query_raw(f"session#{session_id}", "rec#"):
            instances.update(_instances(stored.text))
        for instance in sorted(instances - {"main"}):
            yield from self._all_of(f"session#{session_id}#i#{instance}")

    def _all_of(self, pk: str) -> Iterator[tuple[str, str]]:
        for stored in self._items.query_raw(pk, ""):
            yield pk, stored.sk

    def _delete(self, keys: Iterator[tuple[str, str]] | Sequence[tuple[str, str]]) -> None:
        chunk: list[Write] = []
        for pk, sk in list(keys):  # read fully before deleting what was read
            chunk.append(delete(pk, sk))
            if len(chunk) == CHUNK:
                self._items.transact(chunk)
                chunk = []
        if chunk:
            self._items.transact(chunk)


def _instances(text: str) -> set[str]:
    """The instances a record batch names (compact or full records, or one record)."""
    body = json.loads(text)
    records = body["records"] if "records" in body else [body]
    return {str(r.get("instance", "main")) for r in records}
