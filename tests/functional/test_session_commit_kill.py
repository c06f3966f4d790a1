"""A process killed inside a run's commit, on the embedded pair (checkpoints and platform
in one SQLite file): ``os._exit`` after the session records joined the transaction and
before ``COMMIT`` leaves neither the head nor the records (nor the run's usage and its
``model.usage`` event); after ``COMMIT`` all of them. The next process reads a
consistent file and commits on."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentloom.platform.domain import Run, Session, now
from agentloom.platform.store import PlatformStore, SqliteItemStore
from agentloom.platform.store.session_commits import SessionCommits
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.checkpoint import Commit, LogEntry

CHILD = textwrap.dedent('''
    import os, sys
    from agentloom.platform.store import PlatformStore, SqliteItemStore
    from agentloom.platform.store.session_commits import SessionCommits
    from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
    from agentloom_runtime.checkpoint import Commit, LogEntry

    path, where = sys.argv[1], sys.argv[2]
    platform = PlatformStore(SqliteItemStore(path))
    commits = SessionCommits(platform)
    store = SqliteCheckpointStore(path, companion=commits)
    prepare = commits.prepare

    def dying_prepare(checkpoints, commit):
        joined = prepare(checkpoints, commit)
        join = joined.join
        def dying_join(conn):
            join(conn)
            if where == "before-commit":
                os._exit(9)  # the records are in the open transaction, not committed
        joined.join = dying_join
        return joined

    commits.prepare = dying_prepare
    write = store._write
    def dying_write(*args):
        write(*args)
        os._exit(9)  # committed; the process dies before it hears so
    store._write = dying_write
    head = {"status": "running", "frames": {"main": {}}, "execution": 1, "error": None,
            "streams": {"src:main": 2}}
    entries = [LogEntry("src:main", 1, {"kind": "user", "message": {"role": "user",
               "content": "secret question"}}),
               LogEntry("src:main", 2, {"kind": "assistant", "message": {
                   "role": "assistant", "content": "secret answer"}, "call": {
                   "op_id": "m1-1", "usage": {"prompt_tokens": 30,
                                              "completion_tokens": 7}}})]
    store.commit(Commit("run_1", 0, head, entries))
''')


def _pair(path: Path) -> tuple[PlatformStore, SqliteCheckpointStore]:
    platform = PlatformStore(SqliteItemStore(path))
    store = SqliteCheckpointStore(path, companion=SessionCommits(platform))
    return platform, store


@pytest.mark.parametrize(("where", "committed"), [("before-commit", False),
                                                  ("after-commit", True)])
def test_killed_inside_the_commit(tmp_path: Path, where: str, committed: bool) -> None:
    path = tmp_path / "agentloom.sqlite3"
    platform, store = _pair(path)
    session = Session(session_id="ses_1", space_id="spc_1", agent_id="agt_1", version=1,
                      user_id="alice", created_at=now())
    platform.sessions.create(session)
    stored = platform.sessions.get("ses_1")
    assert stored is not None
    platform.runs.start(stored, Run(run_id="run_1", session_id="ses_1", space_id="spc_1",
                                    agent_id="agt_1", version=1, user_id="alice",
                                    created_at=now(), updated_at=now()))
    platform.close()
    store.close()
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), where], timeout=60,
                          capture_output=True, text=True)
    assert done.returncode == 9, done.stderr

    platform, store = _pair(path)
    head = store.load_head("run_1")
    records = platform.streams.records("ses_1")
    stream = platform.streams.head("ses_1")
    assert stream is not None
    run = platform.runs.get("ses_1", "run_1")
    assert run is not None
    usage = [e.data for e in platform.events.read("run_1") if e.type == "model.usage"]
    if committed:
        assert head is not None and [r.src for r in records] == [1, 2]
        assert stream.value.seq == 2 and stream.value.open["run_1"].src == {"main": 2}
        assert run.value.usage.calls == 1 and run.value.usage.input_tokens == 30
        assert [(u["op_id"], u["input_tokens"], u["output_tokens"]) for u in usage] == \
            [("m1-1", 30, 7)]  # the event rode in the commit's transaction
    else:
        assert head is None and records == [] and stream.value.seq == 0
        assert run.value.usage.calls == 0 and usage == []
    # the next process commits on (or again) from what is there
    version = head.version if head else 0
    store.commit(Commit("run_1", version, {
        "status": "running", "frames": {"main": {}}, "execution": 1, "error": None,
        "streams": {"src:main": 3 if committed else 1}},
        [LogEntry("src:main", 3 if committed else 1,
                  {"kind": "user", "message": {"role": "user", "content": "more"}})]))
    assert [r.seq for r in platform.streams.records("ses_1")] == \
        list(range(1, 4 if committed else 2))
    platform.close()
    store.close()


def test_an_event_appended_while_a_commit_prepares_is_a_conflict_then_a_retry(
        tmp_path: Path) -> None:
    """The usage event rides in the commit with the run's event counter conditioned on
    the version read: another event appended between ``prepare`` and the transaction
    (an observer, a cancel's status) makes the commit ask again, not lose an event."""
    path = tmp_path / "agentloom.sqlite3"
    platform = PlatformStore(SqliteItemStore(path))
    commits = SessionCommits(platform)
    store = SqliteCheckpointStore(path, companion=commits)
    platform.sessions.create(Session(session_id="ses_1", space_id="spc_1", agent_id="agt_1",
                                     version=1, user_id="alice", created_at=now()))
    stored = platform.sessions.get("ses_1")
    assert stored is not None
    platform.runs.start(stored, Run(run_id="run_1", session_id="ses_1", space_id="spc_1",
                                    agent_id="agt_1", version=1, user_id="alice",
                                    created_at=now(), updated_at=now()))
    prepare, raced = commits.prepare, list[int]()

    def racing_prepare(checkpoints: Any, commit: Commit) -> Any:
        joined = prepare(checkpoints, commit)
        if len(raced) < 2:  # an observer's event lands first
            raced.append(platform.events.append("run_1", [("tool.started", {"n": 1})]))
        return joined

    commits.prepare = racing_prepare  # type: ignore[method-assign, assignment]
    try:
        store.commit(Commit("run_1", 0, {
            "status": "running", "frames": {"main": {}}, "execution": 1, "error": None,
            "streams": {"src:main": 1}}, [LogEntry("src:main", 1, {
                "kind": "assistant", "message": {"role": "assistant", "content": "a"},
                "call": {"op_id": "m1-1", "usage": {"prompt_tokens": 3,
                                                    "completion_tokens": 2}}})]))
        events = platform.events.read("run_1")
        assert raced == [1, 2]  # the first two attempts lost the counter
        assert [e.seq for e in events] == [1, 2, 3]
        assert [e.type for e in events] == ["tool.started", "tool.started", "model.usage"]
        run = platform.runs.get("ses_1", "run_1")
        assert run is not None and run.value.usage.calls == 1  # counted once
        assert [r.src for r in platform.streams.records("ses_1")] == [1]
    finally:
        platform.close()
        store.close()
