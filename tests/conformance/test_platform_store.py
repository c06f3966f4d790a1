"""The platform store port, one suite for every adapter (in-memory reference, SQLite,
SQLite with sealed bodies as an embedded home has it, DynamoDB on moto in-process; one
test runs DynamoDB over HTTP on a moto server).

The primitives (conditional writes, all-or-nothing transactions, ordered prefix
queries) and the operations built on them: membership changes serialized on the space
item, one active run per session under 50 concurrent asks, idempotency keys, the session
record stream, run events with unique seqs under concurrent writers, tokens by hash.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from agentloom.crypto import LocalKeyring
from agentloom.platform.domain import (
    Agent,
    AgentVersion,
    Draft,
    Idempotency,
    Member,
    Run,
    Session,
    SessionRecord,
    Space,
    StreamHead,
    Token,
    new_id,
    now,
)
from agentloom.platform.errors import Invalid
from agentloom.platform.store import (
    ABSENT,
    ANY,
    DynamoDbItemStore,
    InMemoryItemStore,
    ItemStore,
    PlatformStore,
    SqliteItemStore,
    WriteConflict,
    secret_hash,
)
from agentloom.platform.store.dynamodb import MAX_ITEM_BYTES, create_table
from agentloom.platform.store.items import Write, put
from agentloom.platform.store.sessions import STREAM_ITEM_BYTES
from agentloom.platform.store.sqlite import SealedItemStore
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.checkpoint.store import Commit
from agentloom_runtime.errors import PersistenceError

ADAPTERS = ["memory", "sqlite", "sealed", "dynamodb"]  # sealed: the embedded home's
TABLE = "agentloom-platform-test"


@pytest.fixture(params=ADAPTERS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PlatformStore]:
    backend: ItemStore
    if request.param == "dynamodb":
        request.getfixturevalue("fake_aws_env")
        with mock_aws():
            client = boto3.client("dynamodb", region_name="us-east-1")
            create_table(client, TABLE)
            yield PlatformStore(DynamoDbItemStore(TABLE, client=client))
        return
    if request.param == "memory":
        backend = InMemoryItemStore()
    elif request.param == "sealed":
        backend = SealedItemStore(SqliteItemStore(tmp_path / "agentloom.sqlite3"),
                                  LocalKeyring(tmp_path / "agentloom.key"))
    else:
        backend = SqliteItemStore(tmp_path / "agentloom.sqlite3")
    store = PlatformStore(backend)
    try:
        yield store
    finally:
        store.close()


def _space(store: PlatformStore, owner: str = "alice") -> Space:
    space = Space(space_id=new_id("spc"), name="Team", created_by=owner, created_at=now())
    store.spaces.create(space, Member(space_id=space.space_id, user_id=owner, role="owner",
                                      added_by=owner, added_at=now()))
    return space


def _session(store: PlatformStore, space: Space, user: str = "alice") -> Session:
    session = Session(session_id=new_id("ses"), space_id=space.space_id, agent_id="agt_1",
                      version=1, user_id=user, created_at=now())
    store.sessions.create(session)
    return session


def _run(session: Session) -> Run:
    return Run(run_id=new_id("run"), session_id=session.session_id,
               space_id=session.space_id, agent_id=session.agent_id,
               version=session.version, user_id=session.user_id, created_at=now(),
               updated_at=now())


# -- primitives ----------------------------------------------------------------------------


def test_conditional_writes_and_versions(store: PlatformStore):
    items = store.items
    items.transact([Write("p", "a", '{"n":1}', ABSENT)])
    assert items.get_raw("p", "a") == (1, '{"n":1}')
    with pytest.raises(WriteConflict):
        items.transact([Write("p", "a", '{"n":2}', ABSENT)])
    with pytest.raises(WriteConflict):
        items.transact([Write("p", "a", '{"n":2}', 2)])
    items.transact([Write("p", "a", '{"n":2}', 1)])
    items.transact([Write("p", "a", '{"n":3}', ANY)])
    assert items.get_raw("p", "a") == (3, '{"n":3}')
    items.transact([Write("p", "a", None, 3)])
    assert items.get_raw("p", "a") is None


def test_a_failed_condition_writes_nothing(store: PlatformStore):
    items = store.items
    items.transact([Write("p", "a", '{"n":1}', ABSENT)])
    with pytest.raises(WriteConflict) as caught:
        items.transact([Write("p", "b", '{"n":1}', ABSENT), Write("p", "c", None, ANY),
                        Write("p", "a", '{"n":9}', 7)])
    assert caught.value.index == 2
    assert items.get_raw("p", "b") is None
    assert items.get_raw("p", "a") == (1, '{"n":1}')
    with pytest.raises(WriteConflict):  # a check alone fails the transaction too
        items.transact([Write("p", "d", '{}', ABSENT), Write("p", "a", None, 5, check=True)])
    assert items.get_raw("p", "d") is None


def test_queries_are_ordered_by_prefix_after_and_limit(store: PlatformStore):
    items = store.items
    items.transact([Write("p", sk, "{}", ABSENT) for sk in
                    ("x#3", "x#1", "y#1", "x#2", "w#9", "x#10")])
    keys = [s.sk for s in items.query_raw("p", "x#")]
    assert keys == ["x#1", "x#10", "x#2", "x#3"]
    assert [s.sk for s in items.query_raw("p", "x#", after="x#10", limit=2)] == ["x#2", "x#3"]
    assert [s.sk for s in items.query_raw("p", "x#", reverse=True)] == \
        ["x#3", "x#2", "x#10", "x#1"]
    assert [s.sk for s in items.query_raw("p", "x#", after="x#2", reverse=True)] == \
        ["x#10", "x#1"]
    assert items.query_raw("other", "") == []


def test_text_that_is_not_unicode_is_refused(store: PlatformStore):
    with pytest.raises(Invalid):
        store.items.transact([put("p", "a", {"text": "bad \ud800"})])


def test_one_transaction_writes_each_item_once(store: PlatformStore):
    with pytest.raises(ValueError):
        store.items.transact([Write("p", "a", "{}"), Write("p", "a", "{}")])


# -- spaces, members, agents ------------------------------------------------------------


def test_spaces_members_and_a_users_spaces(store: PlatformStore):
    space = _space(store)
    assert store.spaces.of_user("alice") == [(space.space_id, "owner")]
    current = store.spaces.get(space.space_id)
    assert current is not None
    bob = Member(space_id=space.space_id, user_id="bob", role="member", added_by="alice",
                 added_at=now())
    store.spaces.write_member(current, "bob", bob)
    assert {m.user_id: m.role for m in store.spaces.members(space.space_id)} == \
        {"alice": "owner", "bob": "member"}
    with pytest.raises(WriteConflict):  # the space moved on: membership changes serialize
        store.spaces.write_member(current, "carol", bob.model_copy(update={"user_id": "carol"}))
    fresh = store.spaces.get(space.space_id)
    assert fresh is not None and fresh.version == current.version + 1
    store.spaces.write_member(fresh, "bob", None)
    assert store.spaces.member(space.space_id, "bob") is None
    assert store.spaces.of_user("bob") == []


def test_drafts_and_immutable_versions(store: PlatformStore):
    space = _space(store)
    agent = Agent(space_id=space.space_id, agent_id=new_id("agt"), name="Helper",
                  created_by="alice", created_at=now())
    draft = Draft(space_id=space.space_id, agent_id=agent.agent_id, revision=1,
                  config={"model": {"model": "m"}}, updated_by="alice", updated_at=now())
    store.agents.create(agent, draft)
    saved = store.agents.draft(agent.agent_id)
    assert saved is not None and saved.value.config == draft.config
    store.agents.save_draft(draft.model_copy(update={"revision": 2}), saved.version)
    with pytest.raises(WriteConflict):
        store.agents.save_draft(draft.model_copy(update={"revision": 3}), saved.version)
    current = store.agents.get(space.space_id, agent.agent_id)
    assert current is not None
    version = AgentVersion(space_id=space.space_id, agent_id=agent.agent_id, version=1,
                           content_hash="sha256:x", snapshot={"agent_id": "a"},
                           published_by="alice", published_at=now())
    store.agents.publish(current, version)
    after = store.agents.get(space.space_id, agent.agent_id)
    assert after is not None and after.value.latest_version == 1
    with pytest.raises(WriteConflict):  # a version is written once
        store.agents.publish(after, version)
    assert [v.version for v in store.agents.versions(agent.agent_id)] == [1]
    assert store.agents.version(agent.agent_id, 1) == version
    assert [a.agent_id for a in store.agents.in_space(space.space_id)] == [agent.agent_id]


def _published(store: PlatformStore, snapshot: dict[str, Any], number: int = 1
               ) -> tuple[Agent, AgentVersion]:
    space = _space(store)
    agent = Agent(space_id=space.space_id, agent_id=new_id("agt"), name="Helper",
                  created_by="alice", created_at=now())
    store.agents.create(agent, Draft(space_id=space.space_id, agent_id=agent.agent_id,
                                     revision=1, config={}, updated_by="alice",
                                     updated_at=now()))
    current = store.agents.get(space.space_id, agent.agent_id)
    assert current is not None
    version = AgentVersion(space_id=space.space_id, agent_id=agent.agent_id,
                           version=number, content_hash="sha256:x", snapshot=snapshot,
                           published_by="alice", published_at=now())
    store.agents.publish(current, version)
    return agent, version


def test_a_large_snapshot_is_stored_in_parts_and_reads_back_whole(store: PlatformStore):
    # 300 KB of prompt, with quotes, backslashes, newlines and multi-byte characters
    # (escaping and UTF-8 make the JSON larger than the text)
    prompt = ("Answer carefully. \"quoted\" \\ path\n ünïcödé ☃ 𝄞 " * 6_000)[:300_000]
    snapshot = {"agent_id": "a", "system_prompt": prompt, "tools": ["read_file"] * 50}
    agent, version = _published(store, snapshot)
    assert store.agents.version(agent.agent_id, 1) == version
    assert store.agents.versions(agent.agent_id) == [version]
    parts = store.items.query_raw(f"agent#{agent.agent_id}", "vpart#")
    assert len(parts) >= 7  # each part a small item
    assert all(len(p.text.encode()) <= 48 * 1024 < MAX_ITEM_BYTES for p in parts)
    stored = store.items.query_raw(f"agent#{agent.agent_id}", "v#")
    assert len(stored) == 1 and prompt[:100] not in stored[0].text  # the item holds a marker


def test_a_missing_snapshot_part_is_an_error_not_a_wrong_snapshot(store: PlatformStore):
    agent, _ = _published(store, {"system_prompt": "x" * 100_000})
    part = store.items.query_raw(f"agent#{agent.agent_id}", "vpart#")[1]
    store.items.transact([Write(f"agent#{agent.agent_id}", part.sk, None)])
    with pytest.raises(PersistenceError) as caught:
        store.agents.version(agent.agent_id, 1)
    assert caught.value.details["code"] == "snapshot_parts_invalid"


def test_a_snapshot_above_the_limit_is_refused_with_its_code(store: PlatformStore):
    with pytest.raises(Invalid) as caught:
        _published(store, {"system_prompt": "x" * (2 * 1024 * 1024 + 1)})
    assert caught.value.code == "snapshot_too_large"
    assert caught.value.details["limit"] == 2 * 1024 * 1024


# -- sessions and runs --------------------------------------------------------------------


def test_start_run_takes_the_lease_and_registers_everything(store: PlatformStore):
    space = _space(store)
    session = _session(store, space)
    current = store.sessions.get(session.session_id)
    assert current is not None
    run = _run(session)
    key = Idempotency(session_id=session.session_id, key_sha256="k", run_id=run.run_id,
                      request_hash="h", user_id="alice", created_at=now(),
                      expires_at=now() + 60)
    store.runs.start(current, run, key)
    after = store.sessions.get(session.session_id)
    assert after is not None and after.value.active_run == run.run_id
    assert after.value.runs == 1
    found = store.runs.find(run.run_id)
    assert found is not None and found.value == run
    assert [r.run_id for r in store.runs.by_status(space.space_id, "queued")] == [run.run_id]
    stored_key = store.runs.idempotency(session.session_id, "k")
    assert stored_key is not None and stored_key.value.run_id == run.run_id
    stream = store.streams.head(session.session_id)
    assert stream is not None and run.run_id in stream.value.open
    assert store.sessions.of_user("alice", space.space_id)[0].session_id == session.session_id


# moto's DynamoDB backend takes no lock: transactions from threads interleave inside it
# (3-4 winners, "dictionary changed size during iteration"), which says nothing about
# DynamoDB. On moto the race runs sequentially: all 50 asks read the session first, then
# all 50 write, so each writes against the same stale version as in the threaded race.
SEQUENTIAL_RACE = {DynamoDbItemStore: "moto's in-process backend is not thread-safe"}


def test_exactly_one_of_50_concurrent_asks_wins(store: PlatformStore):
    space = _space(store)
    session = _session(store, space)
    sequential = type(store.items) in SEQUENTIAL_RACE
    barrier = threading.Barrier(1 if sequential else 50)
    won: list[str] = []
    lost: list[str] = []
    read = [store.sessions.get(session.session_id) for _ in range(50)] if sequential else []

    def ask(n: int) -> None:
        current = read[n] if sequential else store.sessions.get(session.session_id)
        assert current is not None
        run = _run(session)
        barrier.wait()
        try:
            store.runs.start(current, run)
            won.append(run.run_id)
        except WriteConflict:
            lost.append(run.run_id)

    if sequential:
        for n in range(50):
            ask(n)
    else:
        threads = [threading.Thread(target=ask, args=(n,)) for n in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(won) == 1 and len(lost) == 49
    assert [r.run_id for r in store.runs.of_session(session.session_id)] == won
    after = store.sessions.get(session.session_id)
    assert after is not None and after.value.active_run == won[0]


def test_update_run_moves_its_index_and_gives_the_lease_back(store: PlatformStore):
    space = _space(store)
    session = _session(store, space)
    current = store.sessions.get(session.session_id)
    assert current is not None
    run = _run(session)
    store.runs.start(current, run)
    stored = store.runs.get(session.session_id, run.run_id)
    held = store.sessions.get(session.session_id)
    assert stored is not None and held is not None
    done = stored.value.model_copy(update={"status": "completed", "updated_at": now()})
    store.runs.update(stored, done, session=held,
                      session_update=held.value.model_copy(update={"active_run": None}))
    assert store.runs.by_status(space.space_id, "queued") == []
    assert [r.status for r in store.runs.by_status(space.space_id)] == ["completed"]
    released = store.sessions.get(session.session_id)
    assert released is not None and released.value.active_run is None
    with pytest.raises(WriteConflict):  # a stale run version changes nothing
        store.runs.update(stored, done)


# -- the record stream, events, tokens ----------------------------------------------------


def test_records_are_appended_once_and_listed_by_instance(store: PlatformStore):
    space = _space(store)
    session = _session(store, space)
    head = store.streams.head(session.session_id)
    assert head is not None

    def record(seq: int, instance: str) -> SessionRecord:
        return SessionRecord(seq=seq, run_id="r", instance=instance, kind="user",
                             entry_key=f"src:{seq}", src=seq, at=now())

    records = [record(1, "main"), record(2, "sub-1"), record(3, "main")]
    store.streams.append(head, StreamHead(session_id=session.session_id, seq=3), records)
    with pytest.raises(WriteConflict):  # the same head again: nothing is appended twice
        store.streams.append(head, StreamHead(session_id=session.session_id, seq=3), records)
    assert [r.seq for r in store.streams.records(session.session_id)] == [1, 2, 3]
    assert [r.seq for r in store.streams.records(session.session_id, instance="main")] == [1, 3]
    assert [r.seq for r in store.streams.records(session.session_id, after=1, limit=1)] == [2]
    assert store.streams.records(session.session_id, instance="sub-2") == []


def test_a_commits_main_records_are_one_item_and_read_by_instance_alike(
        store: PlatformStore):
    space = _space(store)
    session = _session(store, space)
    sid = session.session_id
    head = store.streams.head(sid)
    assert head is not None
    records = [SessionRecord(seq=n, run_id="r", instance="sub-1" if n == 4 else "main",
                             kind="user", entry_key=f"src:{n}", src=n, at=now())
               for n in range(1, 6)]
    store.streams.append(head, StreamHead(session_id=sid, seq=2), records[:2])
    # main's records ride in the head's tail: no batch item yet
    assert store.items.query_raw(f"session#{sid}", "rec#") == []
    head = store.streams.head(sid)
    assert head is not None and [r.seq for r in head.value.tail] == [1, 2]
    assert [r.seq for r in store.streams.records(sid, instance="main")] == [1, 2]
    store.streams.append(head, StreamHead(session_id=sid, seq=5), records[2:])
    # a sub-agent's record flushes the tail: the five records are one batch item
    assert [i.sk for i in store.items.query_raw(f"session#{sid}#i#main", "rec#")] == []
    assert len(store.items.query_raw(f"session#{sid}", "rec#")) == 1
    head = store.streams.head(sid)
    assert head is not None and head.value.tail == []
    assert [r.seq for r in store.streams.records(sid)] == [1, 2, 3, 4, 5]
    assert [r.seq for r in store.streams.records(sid, instance="main")] == [1, 2, 3, 5]
    assert [r.seq for r in store.streams.records(sid, instance="main", after=2,
                                                 limit=2)] == [3, 5]
    assert [r.seq for r in store.streams.records(sid, instance="sub-1")] == [4]


def test_the_record_tail_stays_within_one_write_unit_and_every_record_reads(
        store: PlatformStore):
    """Records appended one commit at a time ride in the stream head until it would
    outgrow 1 KB, then go to a batch; reads see each exactly once, in order, wherever
    it is — also when a flush lands between a reader's head read and its batch read."""
    sid = _session(store, _space(store)).session_id
    for n in range(1, 31):
        head = store.streams.head(sid)
        assert head is not None
        record = SessionRecord(seq=n, run_id="run_01a2372128170000000000", instance="main",
                               kind="assistant", entry_key=f"src:{n}", src=n, at=now())
        store.streams.append(head, StreamHead(session_id=sid, seq=n), [record])
        stored = store.items.get_raw(f"session#{sid}", "stream")
        assert stored is not None
        assert len(f"session#{sid}streambodyversionpksk".encode()) + len(
            stored[1].encode()) + 4 <= STREAM_ITEM_BYTES
        assert [r.seq for r in store.streams.records(sid)] == list(range(1, n + 1))
        if n > 1:
            assert [r.seq for r in store.streams.records(sid, after=n - 2, limit=1)] == \
                [n - 1]
    batches = store.items.query_raw(f"session#{sid}", "rec#")
    assert 30 / 12 < len(batches) < 30 / 2  # a batch every few records, not one each
    # a reader that read the head (with its tail) before a flush, the batches after it
    head = store.streams.head(sid)
    assert head is not None
    if not head.value.tail:  # the last append flushed: one more rides
        record = SessionRecord(seq=31, run_id="r", instance="main", kind="user",
                               entry_key="src:31", src=31, at=now())
        store.streams.append(head, StreamHead(session_id=sid, seq=31), [record])
        head = store.streams.head(sid)
        assert head is not None and head.value.tail
    last = head.value.seq + 1
    real = store.streams.head
    store.streams.head = lambda session_id: head  # type: ignore[method-assign]
    try:
        flush = SessionRecord(seq=last, run_id="r", instance="sub-1", kind="user",
                              entry_key=f"src:{last}", src=last, at=now())
        store.streams.append(head, StreamHead(session_id=sid, seq=last), [flush])
        assert [r.seq for r in store.streams.records(sid)] == list(range(1, last + 1))
    finally:
        store.streams.head = real  # type: ignore[method-assign]


def test_records_in_batches_and_single_items_read_alike(store: PlatformStore):
    """Appends store batches keyed by their last seq (≤ 100 records each); an item of one
    record, as the stream first stored them, reads the same; pages cut batches anywhere."""
    session = _session(store, _space(store))
    sid = session.session_id
    first = SessionRecord(seq=1, run_id="r", instance="main", kind="user",
                          entry_key="src:1", src=1, at=now())
    store.items.transact([put(f"session#{sid}", "rec#000000000001", first),
                          put(f"session#{sid}#i#main", "rec#000000000001", first)])
    head = store.streams.head(sid)
    assert head is not None
    many = [SessionRecord(seq=n, run_id="r", instance="main" if n % 3 else "sub-1",
                          kind="tool_result", entry_key=f"src:{n}", src=n, at=now())
            for n in range(2, 252)]
    store.streams.append(head, StreamHead(session_id=sid, seq=251), many)
    assert [r.seq for r in store.streams.records(sid, limit=1000)] == list(range(1, 252))
    assert [r.seq for r in store.streams.records(sid, after=99, limit=3)] == [100, 101, 102]
    assert [r.seq for r in store.streams.records(sid, after=150, limit=2, instance="sub-1")] == \
        [153, 156]
    main = [r.seq for r in store.streams.records(sid, limit=1000, instance="main")]
    assert main == [1, *(n for n in range(2, 252) if n % 3)]
    batches = store.items.query_raw(f"session#{sid}", "rec#")
    assert len(batches) == 1 + 3  # the single item, then 250 records in 3 batches


def test_events_get_unique_contiguous_seqs_under_concurrent_writers(store: PlatformStore):
    def write(n: int) -> None:
        for i in range(10):
            store.events.append("run-x", [("tool.started", {"writer": n, "i": i})])

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = store.events.read("run-x", limit=1000)
    assert [e.seq for e in events] == list(range(1, 81))
    assert [e.seq for e in store.events.read("run-x", after=78)] == [79, 80]


def test_an_append_of_several_events_is_one_item_without_a_counter(store: PlatformStore):
    store.events.append("run-p", [("model.started", {"n": 1})])
    store.events.append("run-p", [("model.completed", {"n": 2}), ("model.usage", {"n": 3}),
                                  ("tool.started", {"n": 4})])
    store.events.append("run-p", [("tool.completed", {"n": 5})])
    items = store.items.query_raw("run#run-p", "")
    assert [i.sk for i in items] == ["ev#000000000001", "ev#000000000002",
                                     "ev#000000000005"]  # no counter item
    everything = store.events.read("run-p")
    assert [(e.seq, e.data["n"]) for e in everything] == [(n, n) for n in range(1, 6)]
    for after in range(6):  # a cursor inside an item reads on from the next event
        assert [e.seq for e in store.events.read("run-p", after=after)] == \
            list(range(after + 1, 6))
        assert [e.seq for e in store.events.read("run-p", after=after, limit=2)] == \
            list(range(after + 1, min(after + 3, 6)))
    assert store.events.read("run-p", after=5, limit=1) == []


def test_events_of_a_run_written_with_a_counter_read_and_append_alike(store: PlatformStore):
    """Runs written before kept ``events`` {"seq"} beside one ``ev#{seq}`` per event."""
    from agentloom.platform.domain import Event
    from agentloom.platform.store.items import put, seq_key

    old = [Event(run_id="run-o", seq=n, type="tool.started", at=1.0, data={"n": n})
           for n in (1, 2)]
    store.items.transact([put("run#run-o", "events", {"seq": 2}),
                          *(put("run#run-o", seq_key("ev", e.seq), e) for e in old)])
    assert store.events.append("run-o", [("tool.completed", {"n": 3})]) == 3
    assert [e.seq for e in store.events.read("run-o")] == [1, 2, 3]
    assert [e.seq for e in store.events.read("run-o", after=1)] == [2, 3]


def test_tokens_are_found_by_the_hash_of_their_secret(store: PlatformStore):
    token = Token(token_id="tok_1", user_id="alice", secret_sha256=secret_hash("s3cret"),
                  created_at=now())
    store.tokens.create(token)
    assert store.tokens.by_secret("s3cret") == token
    assert store.tokens.by_secret("other") is None
    assert store.tokens.of_user("alice") == [token]
    assert store.tokens.revoke("alice", "tok_1")
    found = store.tokens.by_secret("s3cret")
    assert found is not None and found.revoked


# -- SQLite specifics ---------------------------------------------------------------------


def test_sqlite_shares_the_checkpoint_file_and_survives_a_reopen(tmp_path: Path):
    path = tmp_path / "agentloom.sqlite3"
    checkpoints = SqliteCheckpointStore(path)
    platform = PlatformStore(SqliteItemStore(path))
    checkpoints.commit(Commit("run-1", 0, {"status": "running"}))
    space = _space(platform)
    platform.close()
    checkpoints.close()
    again = PlatformStore(SqliteItemStore(path))
    try:
        assert again.spaces.get(space.space_id) is not None
        reopened = SqliteCheckpointStore(path)
        loaded = reopened.load_head("run-1")
        assert loaded is not None and loaded.body == {"status": "running"}
        reopened.close()
    finally:
        again.close()


# -- DynamoDB specifics -------------------------------------------------------------------


@pytest.fixture
def dynamodb_items(fake_aws_env: None) -> Iterator[tuple[DynamoDbItemStore, Any]]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        yield DynamoDbItemStore(TABLE, client=client), client


def _raw(client: Any, pk: str, sk: str) -> dict[str, Any]:
    item: dict[str, Any] = client.get_item(TableName=TABLE, Key={
        "pk": {"S": pk}, "sk": {"S": sk}})["Item"]
    return item


def test_dynamodb_expiring_items_carry_the_ttl_attribute(
        dynamodb_items: tuple[DynamoDbItemStore, Any]):
    items, client = dynamodb_items
    store = PlatformStore(items)
    ttl = client.describe_time_to_live(TableName=TABLE)["TimeToLiveDescription"]
    assert ttl["TimeToLiveStatus"] == "ENABLED" and ttl["AttributeName"] == "ttl"
    space = _space(store)
    session = _session(store, space)
    current = store.sessions.get(session.session_id)
    assert current is not None
    run = _run(session)
    expires = now() + 3600.25
    store.runs.start(current, run, Idempotency(
        session_id=session.session_id, key_sha256="k", run_id=run.run_id, request_hash="h",
        user_id="alice", created_at=now(), expires_at=expires))
    assert _raw(client, f"session#{session.session_id}", "idem#k")["ttl"] == \
        {"N": str(int(expires) + 1)}
    assert "ttl" not in _raw(client, f"session#{session.session_id}", "session")
    store.tokens.create(Token(token_id="t1", user_id="alice", secret_sha256=secret_hash("a"),
                              created_at=now(), expires_at=expires))
    store.tokens.create(Token(token_id="t2", user_id="alice", secret_sha256=secret_hash("b"),
                              created_at=now()))
    assert "ttl" in _raw(client, f"token#{secret_hash('a')}", "token")
    assert "ttl" not in _raw(client, f"token#{secret_hash('b')}", "token")
    # a put that drops the expiry drops the attribute (and keeps the version rule)
    items.transact([put("p", "a", {"expires_at": expires}, ABSENT)])
    items.transact([put("p", "a", {"n": 1}, 1)])
    assert "ttl" not in _raw(client, "p", "a") and items.get_raw("p", "a") == (2, '{"n":1}')


def test_dynamodb_refuses_big_items_and_transactions_before_writing(
        dynamodb_items: tuple[DynamoDbItemStore, Any]):
    from agentloom_runtime.errors import ConfigError

    items, _ = dynamodb_items
    with pytest.raises(ConfigError, match="below"):
        items.transact([Write("p", "small", "{}", ABSENT),
                        put("p", "big", {"text": "x" * MAX_ITEM_BYTES}, ABSENT)])
    with pytest.raises(ConfigError, match="100 actions"):
        items.transact([Write("p", f"k{i}", "{}", ABSENT) for i in range(101)])
    assert items.query_raw("p", "") == []
    items.transact([Write("p", f"k{i:03d}", "{}", ABSENT) for i in range(100)])
    assert len(items.query_raw("p", "k")) == 100


def test_dynamodb_counts_write_units_single_writes_are_not_transactions(
        dynamodb_items: tuple[DynamoDbItemStore, Any]):
    items, _ = dynamodb_items
    items.transact([Write("p", "a", "{}", ABSENT)])
    assert (items.items_written, items.write_units) == (1, 1)
    items.transact([Write("p", "b", "{}", ABSENT), Write("p", "c", "x" * 1500, ABSENT),
                    Write("p", "a", None, 1, check=True)])
    assert (items.items_written, items.write_units) == (3, 1 + 2 + 4)
    with pytest.raises(WriteConflict):
        items.transact([Write("p", "d", "{}", ABSENT), Write("p", "a", "{}", 7)])
    assert items.items_written == 3  # a cancelled transaction counts nothing


def test_dynamodb_a_concurrent_transaction_is_a_write_conflict():
    from botocore.exceptions import ClientError

    class Busy:
        def transact_write_items(self, **_: Any) -> None:
            raise ClientError({"Error": {"Code": "TransactionCanceledException"},
                               "CancellationReasons": [{"Code": "None"},
                                                       {"Code": "TransactionConflict"}]},
                              "TransactWriteItems")

    items = DynamoDbItemStore(TABLE, client=Busy())
    with pytest.raises(WriteConflict) as caught:
        items.transact([Write("p", "a", "{}"), Write("p", "b", "{}", ABSENT)])
    assert caught.value.index == 1 and caught.value.sk == "b"


def test_dynamodb_over_http_on_a_moto_server(fake_aws_env: None):
    """The same store through botocore's HTTP stack: a ThreadedMotoServer on 127.0.0.1
    (port 0), a client with ``endpoint_url``."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        client = boto3.client("dynamodb", region_name="us-east-1",
                              endpoint_url=f"http://{host}:{port}")
        create_table(client, TABLE)
        store = PlatformStore(DynamoDbItemStore(TABLE, client=client))
        space = _space(store)
        session = _session(store, space)
        stale = store.sessions.get(session.session_id)
        assert stale is not None
        outcomes = []
        for _ in range(5):  # one wins, the others meet the condition
            try:
                store.runs.start(stale, _run(session))
                outcomes.append("won")
            except WriteConflict:
                outcomes.append("lost")
        assert outcomes.count("won") == 1
        head = store.streams.head(session.session_id)
        assert head is not None
        records = [SessionRecord(seq=n, run_id="r", instance="main" if n % 2 else "sub-1",
                                 kind="user", entry_key=f"src:{n}", src=n, at=now())
                   for n in range(1, 41)]
        store.streams.append(head, StreamHead(session_id=session.session_id, seq=40),
                             records)
        assert [r.seq for r in store.streams.records(session.session_id, after=35)] == \
            [36, 37, 38, 39, 40]
        assert [r.seq for r in store.streams.records(session.session_id, instance="sub-1",
                                                     after=30, limit=3)] == [32, 34, 36]
        store.events.append("run-h", [("run.started", {}), ("tool.started", {"n": 1})])
        assert [e.seq for e in store.events.read("run-h", after=1)] == [2]
        store.tokens.create(Token(token_id="t", user_id="alice",
                                  secret_sha256=secret_hash("s"), created_at=now()))
        assert store.tokens.by_secret("s") is not None
    finally:
        server.stop()
