"""A run's commit and its session records are one transaction (issue 10), on every pair
of stores: in memory, SQLite (both stores in one file), DynamoDB (two tables, moto).

Crash injection at the store: a representative run is crashed at every write point of
every commit — before each blob write, inside the transaction before and after the
companion's writes join it, and after the transaction (the response lost) — derived from
the reference run, so a new write point is swept, not skipped. After each crash: either
the head and its records are there or neither is (every stored source record has exactly
one session record and no record points past what is stored), seqs are unique and
contiguous, usage totals match the stored calls; then a new engine resumes the run and
the stream ends exactly as the uninterrupted run's. Also: a concurrent stream writer
(the companion retries), a duplicate step (the loser writes nothing), a 300-record
commit and a 1 MB reusable view on DynamoDB.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from support import sweeps
from support.engine import Crash, SideEffects, build_engine, drive

from agentloom.platform.domain import Run, Session, new_id, now
from agentloom.platform.store import (
    DynamoDbItemStore,
    InMemoryItemStore,
    PlatformStore,
    SqliteItemStore,
)
from agentloom.platform.store import dynamodb as platform_dynamodb
from agentloom.platform.store.items import put
from agentloom.platform.store.session_commits import SessionCommits
from agentloom.platform.tracker import RunTracker
from agentloom.stores import dynamodb_checkpoints
from agentloom.stores.dynamodb_checkpoints import DynamoDbCheckpointStore
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.checkpoint import BaseCheckpointStore, Commit, InMemoryCheckpointStore
from agentloom_runtime.checkpoint.store import LogEntry
from agentloom_runtime.context.history import SKIPPED_KINDS, inherited
from agentloom_runtime.engine import Engine, MainView
from agentloom_runtime.errors import CheckpointConflict
from agentloom_runtime.testing import KeyedScriptModel, ScriptedModel

BACKENDS = ["memory", "sqlite", "dynamodb"]
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def _replies(calls: int) -> list[Any]:
    out = [dataclasses.replace(ScriptedModel.call("count_words", {"text": "a b " * n},
                                                  id=f"c{n}"), usage=USAGE)
           for n in range(calls)]
    return [*out, dataclasses.replace(ScriptedModel.answer("done"), usage=USAGE)]


@dataclass
class Joint:
    name: str
    platform: PlatformStore
    checkpoints: BaseCheckpointStore
    commits: SessionCommits
    tracker: RunTracker
    client: Any = None


@pytest.fixture(params=BACKENDS)
def joint(request: pytest.FixtureRequest) -> Joint:
    found: Joint = request.getfixturevalue(f"joint_{request.param}")
    return found


def ask(joint: Joint, session: Session | None = None) -> tuple[Session, Run]:
    """A session (new unless given) and a run asked in it, as the API's ask records."""
    if session is None:
        session = Session(session_id=new_id("ses"), space_id="spc_1", agent_id="agt_1",
                          version=1, user_id="alice", created_at=now())
        joint.platform.sessions.create(session)
    stored = joint.platform.sessions.get(session.session_id)
    assert stored is not None
    run = Run(run_id=new_id("run"), session_id=session.session_id, space_id="spc_1",
              agent_id="agt_1", version=1, user_id="alice", created_at=now(),
              updated_at=now())
    joint.platform.runs.start(stored, run)
    return session, run


def build(joint: Joint, calls: int, run_id: str | None = None) -> Engine:
    return build_engine(store=joint.checkpoints, model=KeyedScriptModel(_replies(calls)),
                        tools=SideEffects().tools(), run_id=run_id)


class Crasher:
    """Counts the write points of commits and raises ``Crash`` at the ``at``-th (None:
    count only): before each blob write, before and after the companion's writes join the
    transaction, after the transaction committed (its response lost).

    A memory pair has no point after the join: the in-memory platform store applies the
    writes when they join, under the checkpoint store's lock, and the checkpoint store's
    own dict updates follow with nothing in between that could fail (and a crash loses
    both stores alike)."""

    def __init__(self, joint: Joint, at: int | None = None, *,
                 after_join: bool | None = None) -> None:
        if after_join is None:
            after_join = joint.name != "memory"
        self.at, self.points = at, 0
        store = joint.checkpoints
        put_blob, write, prepare = store._put_blob, store._write, joint.commits.prepare

        def tick() -> None:
            self.points += 1
            if self.at is not None and self.points == self.at:
                raise Crash(f"crash at write point {self.points}")

        def crashing_put_blob(*args: Any) -> None:
            tick()
            put_blob(*args)

        def crashing_write(*args: Any) -> None:
            write(*args)
            tick()

        def crashing_prepare(checkpoints: Any, commit: Commit) -> Any:
            joined = prepare(checkpoints, commit)
            if joined is None:
                return None
            join = joined.join

            def crashing_join(transaction: object) -> None:
                tick()
                join(transaction)
                if after_join:
                    tick()

            joined.join = crashing_join  # type: ignore[method-assign]
            return joined

        store._put_blob = crashing_put_blob  # type: ignore[method-assign,assignment]
        store._write = crashing_write  # type: ignore[method-assign,assignment]
        joint.commits.prepare = crashing_prepare  # type: ignore[method-assign,assignment]


def stream(joint: Joint, session_id: str) -> list[Any]:
    return joint.platform.streams.records(session_id, limit=10_000)


def check_consistent(joint: Joint, session_id: str, run_id: str) -> None:
    """The head's records and the session's agree: all or nothing, no duplicate seq."""
    records = stream(joint, session_id)
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    head = joint.platform.streams.head(session_id)
    assert head is not None and head.value.seq == len(records)
    loaded = joint.checkpoints.load_head(run_id)
    instances = tuple(loaded.body["frames"]) if loaded else ()
    stored = {(instance, e.seq) for instance in instances
              for e in joint.checkpoints.read(run_id, f"src:{instance}")
              if e.body.get("kind") not in SKIPPED_KINDS}
    referenced = [(r.instance, r.src) for r in records if r.run_id == run_id and r.src]
    assert len(referenced) == len(set(referenced)), "a source record twice"
    assert set(referenced) == stored, "records and the committed head disagree"
    calls = sum(1 for instance in instances
                for e in joint.checkpoints.read(run_id, f"src:{instance}")
                if e.body.get("kind") == "assistant" and (e.body.get("call") or {}).get("usage"))
    run = joint.platform.runs.get(session_id, run_id)
    assert run is not None and run.value.usage.calls == calls
    # the events read back in order, one model.usage per committed call (in its commit)
    events = joint.platform.events.read(run_id, limit=10_000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert sum(1 for e in events if e.type == "model.usage") == calls


async def _reference(joint: Joint, calls: int, *, after_join: bool | None = None
                     ) -> tuple[int, list[tuple[str, str]]]:
    crasher = Crasher(joint, after_join=after_join)
    session, run = ask(joint)
    engine = build(joint, calls)
    await engine.start("count", run_id=run.run_id)
    assert (await drive(engine)).status == "completed"
    check_consistent(joint, session.session_id, run.run_id)
    head = joint.platform.streams.head(session.session_id)
    assert head is not None and run.run_id not in head.value.open  # closed in the commit
    return crasher.points, [(r.instance, r.kind) for r in stream(joint, session.session_id)]


def sweep_points(name: str) -> range:
    """Every write point of the reference run, counted on a fresh memory pair (the
    points are the same on every backend: the same commits, blobs and joins)."""
    calls = 1 if name == "dynamodb" else 2
    platform = PlatformStore(InMemoryItemStore())
    commits = SessionCommits(platform)
    checkpoints = InMemoryCheckpointStore(companion=commits)
    pair = Joint("memory", platform, checkpoints, commits, RunTracker(platform, checkpoints))
    points, _ = asyncio.run(_reference(pair, calls, after_join=name != "memory"))
    return range(1, points + 1)


SWEEP = [(name, at) for name in BACKENDS for at in sweep_points(name)]
# On moto a point takes seconds (a point in memory or SQLite, a fraction of one): the
# default run crashes DynamoDB at 6 points, the first and the last among them, and the
# sweep job (pytest -m sweep; tests/support/sweeps.py) at each of the others.
SAMPLE = {"memory": len(SWEEP), "sqlite": len(SWEEP), "dynamodb": 6}


def test_the_sweep_covers_every_write_point() -> None:
    assert len(sweep_points("memory")) > 15 and len(sweep_points("sqlite")) > 25


@pytest.mark.parametrize(("backend", "at"), [
    param for name in BACKENDS
    for param in sweeps.params([p for p in SWEEP if p[0] == name], SAMPLE[name],
                               ids=lambda point: f"{point[0]}-{point[1]}")])
async def test_crash_at_every_write_point_then_resume(
        backend: str, at: int, request: pytest.FixtureRequest) -> None:
    calls = 1 if backend == "dynamodb" else 2
    joint: Joint = request.getfixturevalue(f"joint_{backend}")
    _, expected = await _reference(joint, calls)
    session, run = ask(joint)
    before = len(stream(joint, session.session_id))
    Crasher(joint, at)
    engine = build(joint, calls)
    with pytest.raises(Crash):
        await engine.start("count", run_id=run.run_id)
        await drive(engine)
    check_consistent(joint, session.session_id, run.run_id)
    # a new process attaches to the run and drives it to the end
    Crasher(joint)  # counting only: crash no more
    loaded = joint.checkpoints.load_head(run.run_id)
    if loaded is None:
        engine = build(joint, calls)
        await engine.start("count", run_id=run.run_id)
    elif loaded.body["status"] != "completed":  # else: the last commit held
        engine = build(joint, calls, run.run_id)
        await engine.begin_execution(retry_unknown_models=True)  # a request in flight
    if loaded is None or loaded.body["status"] != "completed":
        assert (await drive(engine)).status == "completed"
    check_consistent(joint, session.session_id, run.run_id)
    got = [(r.instance, r.kind) for r in stream(joint, session.session_id)[before:]]
    assert got == expected
    assert joint.tracker.sync(session.session_id) == 0  # nothing left to catch up


@pytest.fixture
def joint_memory() -> Iterator[Joint]:
    platform = PlatformStore(InMemoryItemStore())
    commits = SessionCommits(platform)
    checkpoints = InMemoryCheckpointStore(companion=commits)
    yield Joint("memory", platform, checkpoints, commits,
                RunTracker(platform, checkpoints, commits=commits))


@pytest.fixture
def joint_sqlite(tmp_path: Path) -> Iterator[Joint]:
    path = tmp_path / "agentloom.sqlite3"
    platform = PlatformStore(SqliteItemStore(path))
    commits = SessionCommits(platform)
    checkpoints = SqliteCheckpointStore(path, companion=commits)
    yield Joint("sqlite", platform, checkpoints, commits,
                RunTracker(platform, checkpoints, commits=commits))
    platform.close()
    checkpoints.close()


@pytest.fixture
def joint_dynamodb(fake_aws_env: Any) -> Iterator[Joint]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        platform_dynamodb.create_table(client, "platform")
        dynamodb_checkpoints.create_table(client, "checkpoints")
        platform = PlatformStore(DynamoDbItemStore("platform", client=client))
        commits = SessionCommits(platform)
        checkpoints = DynamoDbCheckpointStore("checkpoints", client=client,
                                              companion=commits)
        yield Joint("dynamodb", platform, checkpoints, commits,
                    RunTracker(platform, checkpoints, commits=commits), client)


# -- the companion under concurrency -------------------------------------------------------


async def test_a_concurrent_stream_writer_makes_the_commit_retry(joint: Joint) -> None:
    session, run = ask(joint)
    prepare = joint.commits.prepare
    raced: list[int] = []

    def racing_prepare(checkpoints: Any, commit: Commit) -> Any:
        joined = prepare(checkpoints, commit)
        if joined is not None and len(raced) < 3:  # another writer moves the head first
            head = joint.platform.streams.head(session.session_id)
            assert head is not None
            joint.platform.items.transact([put(f"session#{session.session_id}", "stream",
                                               head.value, head.version)])
            raced.append(head.version)
        return joined

    joint.commits.prepare = racing_prepare  # type: ignore[method-assign,assignment]
    engine = build(joint, 1)
    await engine.start("count", run_id=run.run_id)
    assert (await drive(engine)).status == "completed"
    assert len(raced) == 3
    check_consistent(joint, session.session_id, run.run_id)


async def test_a_duplicate_step_writes_no_records(joint: Joint) -> None:
    session, run = ask(joint)
    engine = build(joint, 2)
    await engine.start("count", run_id=run.run_id)
    twin = build(joint, 2, run.run_id)
    await engine.step()
    with pytest.raises(CheckpointConflict):
        await twin.step()  # a late duplicate invocation of the same step
    check_consistent(joint, session.session_id, run.run_id)
    assert (await drive(engine)).status == "completed"
    check_consistent(joint, session.session_id, run.run_id)


async def test_order_of_commits_is_the_session_order(joint: Joint) -> None:
    """A → B → resume A: A's late records land after B's (docs/contract.md#a-b-c-resume-a-d)."""
    session, first = ask(joint)
    a = build(joint, 1)
    await a.start("first", run_id=first.run_id)
    await a.step()
    _, second = ask(joint, session)
    b = build(joint, 1)
    await b.start("second", run_id=second.run_id)
    assert (await drive(b)).status == "completed"
    assert (await drive(a)).status == "completed"
    runs = [r.run_id for r in stream(joint, session.session_id)]
    cut = runs.index(second.run_id)
    assert set(runs[:cut]) == {first.run_id} and second.run_id not in runs[runs.index(
        first.run_id, cut):]
    for run in (first, second):
        check_consistent(joint, session.session_id, run.run_id)


# -- sizes ---------------------------------------------------------------------------------


def _head(status: str, **streams: int) -> dict[str, Any]:
    return {"status": status, "frames": {"main": {}}, "execution": 1, "error": None,
            "streams": {k.replace("_", ":"): v for k, v in streams.items()}}


def test_a_commit_of_300_records_on_dynamodb(joint_dynamodb: Joint) -> None:
    joint = joint_dynamodb
    session, run = ask(joint)
    entries = [LogEntry("src:main", n, {"kind": "tool_result",
                                        "message": {"role": "tool", "content": "x" * 500}})
               for n in range(1, 301)]
    joint.checkpoints.commit(Commit(run.run_id, 0, _head("running", src_main=300), entries))
    assert [e.seq for e in joint.checkpoints.read(run.run_id, "src:main")] == \
        list(range(1, 301))
    assert [e.seq for e in joint.checkpoints.read(run.run_id, "src:main", 150, 3)] == \
        [151, 152, 153]
    assert len(stream(joint, session.session_id)) == 300
    assert [r.src for r in joint.platform.streams.records(session.session_id, after=99, limit=2,
                                                          instance="main")] == [100, 101]
    check_consistent(joint, session.session_id, run.run_id)


def test_a_1_mb_reusable_view_on_dynamodb(joint_dynamodb: Joint) -> None:
    joint = joint_dynamodb
    session, run = ask(joint)
    big = [{"role": "user", "content": "q " * 250_000},
           {"role": "assistant", "content": "é" * 250_000}]
    joint.commits.watch(run.run_id, view=lambda: MainView(
        compacted=True, messages=big, counters={"user_turns": 1, "model_steps": 1}))
    user = {"kind": "user", "message": {"role": "user", "content": "q"}}
    answer = {"kind": "assistant", "message": {"role": "assistant", "content": "a"}}
    joint.checkpoints.commit(Commit(run.run_id, 0, _head("running", src_main=1),
                                    [LogEntry("src:main", 1, user)]))
    joint.checkpoints.commit(Commit(run.run_id, 1, _head("completed", src_main=2),
                                    [LogEntry("src:main", 2, answer)]))
    (ref,) = joint.platform.streams.views(session.session_id)
    assert ref.watermark == 2 and ref.run_id == run.run_id
    assert json.loads(joint.checkpoints.get_blob(ref.run_id, ref.blob)) == big
    history = joint.tracker.history(session.session_id)  # inherited as capped copies
    assert history.messages[:2] == [inherited(m) for m in big]
    assert history.view_run_id == run.run_id
    assert len(json.dumps(big).encode()) > 1_000_000


def test_no_view_without_a_compaction_or_a_watch(joint: Joint) -> None:
    session, run = ask(joint)
    seen: list[Callable[[], MainView]] = []
    joint.checkpoints.commit(Commit(run.run_id, 0, _head("completed", src_main=1), [
        LogEntry("src:main", 1, {"kind": "user", "message": {"role": "user",
                                                             "content": "q"}})]))
    assert joint.platform.streams.views(session.session_id) == [] and seen == []


def test_a_failed_run_gets_one_status_record_in_its_commit(joint: Joint) -> None:
    session, run = ask(joint)
    joint.checkpoints.commit(Commit(run.run_id, 0, _head("running", src_main=1), [
        LogEntry("src:main", 1, {"kind": "user", "message": {"role": "user",
                                                             "content": "q"}})]))
    failed = {**_head("failed", src_main=1),
              "error": {"code": "model_error", "message": "boom " * 5_000}}
    joint.checkpoints.commit(Commit(run.run_id, 1, failed))
    records = stream(joint, session.session_id)
    assert [r.kind for r in records] == ["user", "status"]
    note = records[1].note or {}
    assert "model_error" in note["message"]["content"]
    assert len(note["message"]["content"]) < 2_500  # capped
    head = joint.platform.streams.head(session.session_id)
    assert head is not None and run.run_id not in head.value.open
    joint.checkpoints.commit(Commit(run.run_id, 2, failed))  # nothing more is noted
    assert len(stream(joint, session.session_id)) == 2
    assert joint.tracker.sync(session.session_id) == 0


async def test_model_completed_rides_in_the_commit_that_saves_the_call(
        joint: Joint) -> None:
    """The engine emits ``model.completed`` right before the commit that saves the call;
    a process that drives the run holds it for that commit's event item (with the
    call's ``model.usage``): in order, each once, no item of its own."""
    session, run = ask(joint)
    engine = build_engine(store=joint.checkpoints, model=KeyedScriptModel(_replies(3)),
                          tools=SideEffects().tools(),
                          emit=lambda topic, data: joint.tracker.event(run.run_id, topic,
                                                                       data))
    joint.commits.watch(run.run_id, view=engine.main_view)
    await engine.start("count", run_id=run.run_id)
    assert (await drive(engine)).status == "completed"
    joint.commits.unwatch(run.run_id)
    check_consistent(joint, session.session_id, run.run_id)
    events = joint.platform.events.read(run.run_id, limit=10_000)
    completed = [e for e in events if e.type == "model.completed"]
    usage = [e for e in events if e.type == "model.usage"]
    used = {e.data["op_id"] for e in usage}
    riding = [e for e in completed if e.data["op_id"] in used]
    assert len(riding) == len(usage) >= 4  # the review's call reports no usage
    for done in riding:  # its usage event follows it at once, in the same item
        after = events[events.index(done) + 1]
        assert (after.type, after.data["op_id"]) == ("model.usage", done.data["op_id"])
    assert len({e.data["op_id"] for e in completed}) == len(completed)
    items = joint.platform.items.query_raw(f"run#{run.run_id}", "ev#")
    assert len(items) == len(events) - len(riding)
    # an event held for a commit that never comes is appended when the run is let go
    joint.commits.watch(run.run_id, view=engine.main_view)
    assert joint.commits.hold(run.run_id, "model.completed", {"op_id": "late"})
    assert not joint.commits.hold(run.run_id, "tool.started", {})
    joint.commits.unwatch(run.run_id)
    last = joint.platform.events.read(run.run_id, after=events[-1].seq)
    assert [(e.type, e.data) for e in last] == [("model.completed", {"op_id": "late"})]
