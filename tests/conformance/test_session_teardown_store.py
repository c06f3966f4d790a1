"""``store.teardown`` on every platform-store adapter (the suite's ``store`` fixture):
closing a session is one compare-and-set with its marker; purging deletes every item of
the session — its runs, idempotency keys, stream head and batches, a sub-agent
instance's own stream, the runs' lookups, events, operator index entries and fences —
and the marker, repeatably, and nothing of another session."""

from __future__ import annotations

import pytest
from conformance.test_platform_store import _run, _session, _space, store  # noqa: F401

from agentloom.platform.domain import Idempotency, Session, SessionRecord, StreamHead, now
from agentloom.platform.store import PlatformStore, WriteConflict, put


def _with_a_run_and_records(platform: PlatformStore, session: Session) -> str:
    found = platform.sessions.get(session.session_id)
    assert found is not None
    run = _run(session)
    key = Idempotency(session_id=session.session_id, key_sha256="k" * 64, run_id=run.run_id,
                      request_hash="h", user_id=session.user_id, created_at=now(),
                      expires_at=now() + 60)
    platform.runs.start(found, run, key)
    head = platform.streams.head(session.session_id)
    assert head is not None
    records = [SessionRecord(seq=n, run_id=run.run_id, instance="sub-1" if n == 2 else "main",
                             kind="user", entry_key=f"src:{n}", src=n, at=now())
               for n in range(1, 4)]
    platform.streams.append(head, StreamHead(session_id=session.session_id, seq=3), records)
    platform.events.append(run.run_id, [("run.started", {"run_id": run.run_id})])
    stored = platform.runs.get(session.session_id, run.run_id)
    current = platform.sessions.get(session.session_id)
    assert stored is not None and current is not None
    ended = stored.value.model_copy(update={"status": "completed"})
    platform.runs.update(stored, ended, session=current, session_update=current.value
                      .model_copy(update={"active_run": None}))
    platform.items.transact([put(f"fence#{run.run_id}", "fence", {"generation": 1})])
    return run.run_id


def _items_of(platform: PlatformStore, session: Session, run_id: str) -> dict[str, int]:
    sid = session.session_id
    raw = platform.items.query_raw
    return {"session": len(raw(f"session#{sid}", "")),
            "sub-1": len(raw(f"session#{sid}#i#sub-1", "")),
            "run": len(raw(f"run#{run_id}", "")),
            "index": len(raw(f"space#{session.space_id}", f"runs#completed#{run_id}")),
            "fence": len(raw(f"fence#{run_id}", "")),
            "owner": len(raw(f"user#{session.user_id}", f"session#{session.space_id}#{sid}")),
            "marker": len(raw("teardown", f"session#{sid}"))}


def test_a_closed_session_is_purged_whole_and_alone(store: PlatformStore):  # noqa: F811
    space = _space(store)
    gone, kept = _session(store, space), _session(store, space)
    gone_run, kept_run = _with_a_run_and_records(store, gone), \
        _with_a_run_and_records(store, kept)
    before = _items_of(store, kept, kept_run)
    assert all(before[k] for k in ("session", "sub-1", "run", "index", "fence", "owner"))
    found = store.sessions.get(gone.session_id)
    assert found is not None

    with pytest.raises(WriteConflict):  # the session changed since it was read
        store.teardown.close(found.value, found.version + 1)
    store.teardown.close(found.value, found.version)
    assert store.sessions.get(gone.session_id) is None
    assert store.teardown.marker(gone.session_id) == found.value
    assert [s.session_id for s in store.teardown.pending()] == [gone.session_id]
    assert [s.session_id for s in store.sessions.of_user("alice", space.space_id)] == \
        [kept.session_id]
    with pytest.raises(WriteConflict):  # closed once only
        store.teardown.close(found.value, found.version)

    store.teardown.purge(found.value)
    store.teardown.purge(found.value)  # repeatable: a retry after a crash

    assert set(_items_of(store, gone, gone_run).values()) == {0}
    assert _items_of(store, kept, kept_run) == before
    assert [r.seq for r in store.streams.records(kept.session_id)] == [1, 2, 3]
    assert store.teardown.pending() == []
