"""The checkpoint store contract, run unchanged against every adapter (see conftest)."""

from __future__ import annotations

import hashlib
import importlib
import json
import multiprocessing
import os
import queue
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.checkpoint import BaseCheckpointStore, Commit, Head, LogEntry
from agentloom_runtime.checkpoint.store import ENTRY_INLINE_BYTES, blob_key
from agentloom_runtime.errors import CheckpointConflict, ConfigError

RUN = "run-1"


def entry(stream: str, seq: int, /, **body: Any) -> LogEntry:
    return LogEntry(stream, seq, {"seq": seq, **body})


def snapshot(store: BaseCheckpointStore, run_id: str,
             streams: tuple[str, ...] = ("s", "t")) -> tuple[Head | None, dict[str, Any]]:
    return store.load_head(run_id), {s: store.read(run_id, s) for s in streams}


def seqs(entries: list[LogEntry]) -> list[int]:
    return [e.seq for e in entries]


# -- versioning ----------------------------------------------------------------------


def test_delete_run_removes_the_run_and_nothing_else(store: BaseCheckpointStore) -> None:
    big = "x" * (ENTRY_INLINE_BYTES + 10)  # spilled: a blob of the run
    for run_id in (RUN, "run-2"):
        store.commit(Commit(run_id, 0, {"n": 1}, [entry("s", 1, text=big), entry("t", 1)]))
    text = json.dumps({"seq": 1, "text": big}, ensure_ascii=False, separators=(",", ":"),
                      sort_keys=True)
    spilled = blob_key(text.encode())  # the spilled body's blob, as the store names it
    assert store.get_blob(RUN, spilled) == text.encode()
    store.delete_run(RUN)
    with pytest.raises(KeyError):
        store.get_blob(RUN, spilled)
    assert snapshot(store, RUN) == (None, {"s": [], "t": []})
    head, kept = snapshot(store, "run-2")
    assert head is not None and kept["s"][0].body["text"] == big
    store.delete_run(RUN)  # absent is done
    store.commit(Commit(RUN, 0, {"n": 2}, []))  # the id is free again
    assert store.load_head(RUN) == Head(1, {"n": 2})


def test_absent_run_reads_empty(store: BaseCheckpointStore) -> None:
    assert store.load_head(RUN) is None
    assert store.read(RUN, "s") == []


def test_create_at_zero_then_each_commit_advances_by_one(store: BaseCheckpointStore) -> None:
    for expected in range(5):
        body = {"phase": "model", "n": expected}
        assert store.commit(Commit(RUN, expected, body, [entry("s", expected + 1)])) \
            == expected + 1
        assert store.load_head(RUN) == Head(expected + 1, body)
    assert seqs(store.read(RUN, "s")) == [1, 2, 3, 4, 5]


def test_commit_without_entries(store: BaseCheckpointStore) -> None:
    assert store.commit(Commit(RUN, 0, {"a": 1})) == 1
    assert store.commit(Commit(RUN, 1, {"a": 2})) == 2
    assert store.load_head(RUN) == Head(2, {"a": 2})


@pytest.mark.parametrize("expected", [0, 1, 3])  # run exists / stale / ahead
def test_stale_or_future_version_conflicts_and_changes_nothing(
        store: BaseCheckpointStore, expected: int) -> None:
    store.commit(Commit(RUN, 0, {"v": 1}, [entry("s", 1), entry("t", 1)]))
    store.commit(Commit(RUN, 1, {"v": 2}, [entry("s", 2)]))
    before = snapshot(store, RUN)
    with pytest.raises(CheckpointConflict) as info:
        store.commit(Commit(RUN, expected, {"v": "lost"}, [entry("s", 3), entry("t", 2)]))
    assert info.value.details["run_id"] == RUN
    assert snapshot(store, RUN) == before


def test_version_on_absent_run_conflicts_and_creates_nothing(
        store: BaseCheckpointStore) -> None:
    with pytest.raises(CheckpointConflict):
        store.commit(Commit(RUN, 1, {"v": 2}, [entry("s", 1)]))
    assert snapshot(store, RUN) == (None, {"s": [], "t": []})


def test_row_clash_conflicts_and_is_atomic(store: BaseCheckpointStore) -> None:
    store.commit(Commit(RUN, 0, {"v": 1}, [entry("s", 1, text="original")]))
    before = snapshot(store, RUN)
    clash = Commit(RUN, 1, {"v": 2}, [entry("t", 1), entry("s", 2), entry("s", 1, text="new")])
    with pytest.raises(CheckpointConflict):
        store.commit(clash)
    assert snapshot(store, RUN) == before  # head not moved, t#1 and s#2 not written


def test_replayed_commit_conflicts(store: BaseCheckpointStore) -> None:
    store.commit(Commit(RUN, 0, {"v": 1}))
    step = Commit(RUN, 1, {"v": 2}, [entry("s", 1), entry("s", 2)])
    assert store.commit(step) == 2
    before = snapshot(store, RUN)
    with pytest.raises(CheckpointConflict):
        store.commit(step)
    assert snapshot(store, RUN) == before


def test_two_writers_same_version_one_wins(store: BaseCheckpointStore) -> None:
    store.commit(Commit(RUN, 0, {"v": 1}))
    first, second = store.load_head(RUN), store.load_head(RUN)
    assert first is not None and second is not None
    store.commit(Commit(RUN, first.version, {"by": "first"}, [entry("s", 1, by="first")]))
    with pytest.raises(CheckpointConflict):
        store.commit(Commit(RUN, second.version, {"by": "second"},
                            [entry("s", 2, by="second")]))
    assert store.load_head(RUN) == Head(2, {"by": "first"})
    assert [e.body["by"] for e in store.read(RUN, "s")] == ["first"]


# -- reads ---------------------------------------------------------------------------


def test_read_orders_by_seq_numerically(store: BaseCheckpointStore) -> None:
    store.commit(Commit(RUN, 0, {}, [entry("s", 10), entry("s", 2), entry("s", 100)]))
    store.commit(Commit(RUN, 1, {}, [entry("s", 1), entry("s", 9)]))
    assert seqs(store.read(RUN, "s")) == [1, 2, 9, 10, 100]
    assert seqs(store.read(RUN, "s", after=2)) == [9, 10, 100]
    assert seqs(store.read(RUN, "s", after=3, limit=2)) == [9, 10]
    assert store.read(RUN, "s", limit=0) == []
    assert store.read(RUN, "s", after=100) == []


# 40 entries just under the inline limit (stored in their rows): ~1.3 MB of rows, more
# than one DynamoDB Query page (1 MB).
PAGE_PAD = "x" * (ENTRY_INLINE_BYTES - 100)


def test_read_after_and_limit_across_pages(store: BaseCheckpointStore) -> None:
    for batch in range(4):
        store.commit(Commit(RUN, batch, {"batch": batch}, [
            entry("s", seq, pad=PAGE_PAD) for seq in range(batch * 10 + 1, batch * 10 + 11)]))
    everything = store.read(RUN, "s")
    assert seqs(everything) == list(range(1, 41))
    assert all(e.body == {"seq": e.seq, "pad": PAGE_PAD} for e in everything)
    assert seqs(store.read(RUN, "s", after=7, limit=30)) == list(range(8, 38))
    assert seqs(store.read(RUN, "s", after=35)) == [36, 37, 38, 39, 40]
    assert seqs(store.read(RUN, "s", limit=35)) == list(range(1, 36))
    assert seqs(store.read(RUN, "s", after=39, limit=5)) == [40]


def test_dynamodb_read_follows_query_pages(dynamodb_backend: Any) -> None:
    """Keeps the test above honest: the read really spans more than one Query."""
    store, calls = dynamodb_backend.store, []
    dynamodb_backend.client.meta.events.register(
        "before-call.dynamodb.Query", lambda **_: calls.append(1))
    store.commit(Commit(RUN, 0, {}, [entry("s", n, pad=PAGE_PAD) for n in range(1, 41)]))
    calls.clear()
    assert seqs(store.read(RUN, "s")) == list(range(1, 41))
    assert len(calls) >= 2


def test_streams_are_isolated(store: BaseCheckpointStore) -> None:
    streams = ["a", "ab", "A", "a#1", "a%231", "a#", "流"]
    for version, stream in enumerate(streams):
        store.commit(Commit(RUN, version, {}, [entry(stream, n, stream=stream)
                                               for n in (1, 2, 3)]))
    for stream in streams:
        got = store.read(RUN, stream)
        assert seqs(got) == [1, 2, 3]
        assert {e.stream for e in got} == {stream}
        assert {e.body["stream"] for e in got} == {stream}
        assert seqs(store.read(RUN, stream, after=1, limit=1)) == [2]


def test_runs_are_isolated(store: BaseCheckpointStore) -> None:
    runs = ["run", "run-2", "run#2", "RUN", "运行"]
    for n, run_id in enumerate(runs):
        store.commit(Commit(run_id, 0, {"run": run_id}, [entry("s", 1, run=run_id)]))
        for _ in range(n):
            head = store.load_head(run_id)
            assert head is not None
            store.commit(Commit(run_id, head.version, {"run": run_id}))
    for n, run_id in enumerate(runs):
        assert store.load_head(run_id) == Head(n + 1, {"run": run_id})
        assert [e.body["run"] for e in store.read(run_id, "s")] == [run_id]
    assert store.load_head("ru") is None


def test_unicode_and_json_values_round_trip(store: BaseCheckpointStore) -> None:
    body = {"text": "héllo wörld — 你好 🌍 \u200fעברית\u200e e\u0301 \U0001f9d1\u200d\U0001f4bb",
            "ctrl": "\x00\x01\x1f\x7f\n\t\"\\", "big": 2**70, "neg": -1, "float": 0.1,
            "none": None, "list": [True, False, [], {}], "ключ": {"🔑": "значение"}}
    store.commit(Commit("运行-é", 0, body, [LogEntry("流-🌊", 1, body)]))
    assert store.load_head("运行-é") == Head(1, body)
    assert store.read("运行-é", "流-🌊") == [LogEntry("流-🌊", 1, body)]


# -- limits: refused before the backend is touched -----------------------------------


@pytest.fixture
def untouchable(store: BaseCheckpointStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.commit(Commit(RUN, 0, {"v": 1}, [entry("s", 1)]))

    def touched(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the backend was written to")

    monkeypatch.setattr(store, "_write", touched)
    monkeypatch.setattr(store, "_put_blob", touched)


LONE = "\udc80"  # a lone surrogate: json.loads accepts it, UTF-8 cannot encode it
BIG = "x" * (2 * ENTRY_INLINE_BYTES)  # would be spilled: nothing may reach the blobs


@pytest.mark.parametrize("bad", [
    pytest.param(Commit(RUN, 1, {"text": LONE}), id="surrogate-in-head"),
    pytest.param(Commit(RUN, 1, {"pad": BIG, "text": LONE}), id="surrogate-in-large-head"),
    pytest.param(Commit(RUN, 1, {}, [entry("s", 2, text=LONE)]), id="surrogate-in-entry"),
    pytest.param(Commit(RUN, 1, {"pad": BIG}, [entry("s", 2, pad=BIG), entry("s", 3, pad=BIG,
                                                                         **{LONE: 1})]),
                 id="surrogate-in-key-after-large-values"),
    pytest.param(Commit(RUN, 1, {}, [entry("s" + LONE, 2)]), id="surrogate-in-stream"),
    pytest.param(Commit(RUN + LONE, 0, {"pad": BIG}), id="surrogate-in-run-id"),
    pytest.param(Commit(RUN, 1, {}, [entry("s", 2), entry("s", 2)]), id="duplicate-entry"),
    pytest.param(Commit(RUN, 1, {}, [entry("s", 0)]), id="seq-zero"),
    pytest.param(Commit(RUN, -1, {}), id="negative-version"),
])
def test_invalid_commit_is_refused_before_the_backend(
        store: BaseCheckpointStore, untouchable: None, bad: Commit) -> None:
    before = snapshot(store, RUN)
    with pytest.raises(ConfigError):
        store.commit(bad)
    assert snapshot(store, RUN) == before


def test_lone_surrogate_is_a_clear_config_error(store: BaseCheckpointStore) -> None:
    with pytest.raises(ConfigError, match="lone surrogate"):
        store.commit(Commit(RUN, 0, {"text": "tool output " + LONE}))
    with pytest.raises(ConfigError, match="lone surrogate"):
        store.read(RUN, "s" + LONE)
    assert snapshot(store, RUN) == (None, {"s": [], "t": []})


def test_entries_per_commit_limit(backend: Any) -> None:
    store, limit = backend.store, backend.max_entries_per_commit
    store.commit(Commit(RUN, 0, {}, [entry("s", n) for n in range(1, 100)]))  # 99 always fit
    many = Commit(RUN, 1, {"v": 2}, [entry("t", n) for n in range(1, 101)])
    if limit is None:
        assert store.commit(many) == 2
        assert len(store.read(RUN, "t")) == 100
        return
    assert limit < 100
    before = snapshot(store, RUN)
    with pytest.raises(ConfigError, match=str(limit)):
        store.commit(many)
    assert snapshot(store, RUN) == before


# -- blobs ---------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 1000, 1_000_000])
def test_blob_round_trip_content_addressed(store: BaseCheckpointStore, size: int) -> None:
    data = os.urandom(size)
    key = store.put_blob(RUN, data)
    assert key == "sha256:" + hashlib.sha256(data).hexdigest() == blob_key(data)
    assert store.get_blob(RUN, key) == data
    assert store.put_blob(RUN, data) == key  # idempotent
    assert store.get_blob(RUN, key) == data


def test_blob_unknown_key_and_other_run(store: BaseCheckpointStore) -> None:
    key = store.put_blob(RUN, b"payload")
    for run_id, unknown in [(RUN, blob_key(b"other")), (RUN, "not-a-key"), (RUN, ""),
                            ("run-2", key)]:
        with pytest.raises(KeyError):
            store.get_blob(run_id, unknown)


def test_blobs_leave_head_and_logs_alone(store: BaseCheckpointStore) -> None:
    store.put_blob(RUN, b"x" * 10)
    assert snapshot(store, RUN) == (None, {"s": [], "t": []})


# -- concurrency ---------------------------------------------------------------------


def test_threads_race_one_winner_per_version(backend: Any) -> None:
    if backend.thread_race is not None:
        pytest.skip(f"{backend.name}: {backend.thread_race}")
    store, workers, rounds = backend.store, 6, 8
    start, loaded = threading.Barrier(workers), threading.Barrier(workers)
    winners: list[list[int]] = [[] for _ in range(rounds)]
    losers: list[list[int]] = [[] for _ in range(rounds)]

    def worker(me: int) -> None:
        for r in range(rounds):
            start.wait(timeout=60)
            head = store.load_head(RUN)
            version = head.version if head else 0
            loaded.wait(timeout=60)
            try:
                store.commit(Commit(RUN, version, {"by": me}, [entry("s", version + 1, by=me)]))
                winners[r].append(me)
            except CheckpointConflict:
                losers[r].append(me)

    with ThreadPoolExecutor(workers) as pool:
        for future in [pool.submit(worker, n) for n in range(workers)]:
            future.result(timeout=120)
    assert [len(w) for w in winners] == [1] * rounds
    assert [len(w) + len(lo) for w, lo in zip(winners, losers, strict=True)] == [workers] * rounds
    final = store.load_head(RUN)
    assert final == Head(rounds, {"by": winners[-1][0]})
    log = store.read(RUN, "s")
    assert seqs(log) == list(range(1, rounds + 1))
    assert [e.body["by"] for e in log] == [w[0] for w in winners]


def _process_worker(path: str, me: str, rounds: int, barrier: Any, results: Any) -> None:
    """One OS process of the race below; defined at module level for spawn."""
    won: list[int] = []
    lost: list[int] = []
    try:
        barrier.wait(timeout=60)  # both open the fresh file at once
        store = SqliteCheckpointStore(path)
        for _ in range(rounds):
            barrier.wait(timeout=60)
            head = store.load_head(RUN)
            version = head.version if head else 0
            barrier.wait(timeout=60)  # both have read the same version
            try:
                store.commit(Commit(RUN, version, {"by": me}, [entry("s", version + 1, by=me)]))
                won.append(version + 1)
            except CheckpointConflict:
                lost.append(version + 1)
        store.close()
        results.put((me, won, lost, None))
    except BaseException as exc:
        barrier.abort()
        results.put((me, won, lost, repr(exc)))


def _collect(procs: list[Any], results: Any, timeout: float) -> list[Any]:
    """Results of every process; fails fast if one dies without reporting."""
    deadline, got = time.monotonic() + timeout, list[Any]()
    while len(got) < len(procs):
        try:
            got.append(results.get(timeout=0.5))
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                pytest.fail(f"race processes: exit codes {dead}, {len(got)} reported")
    return got


def test_sqlite_processes_race_one_winner_per_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # spawn re-imports this module by name in each child: give it our import root
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[__name__.count(".")]))
    path, rounds = str(tmp_path / "race.db"), 15
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_process_worker, args=(path, me, rounds, barrier, results))
             for me in ("p1", "p2")]
    for proc in procs:
        proc.start()
    try:
        outcome = {me: (won, lost, err) for me, won, lost, err in
                   _collect(procs, results, timeout=180)}
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
                proc.join()
    assert [err for _, _, err in outcome.values()] == [None, None]
    (won1, lost1, _), (won2, lost2, _) = outcome["p1"], outcome["p2"]
    assert sorted(won1 + won2) == list(range(1, rounds + 1))  # one winner per version
    assert sorted(lost1) == won2 and sorted(lost2) == won1
    with SqliteCheckpointStore(path) as store:
        head = store.load_head(RUN)
        assert head is not None and head.version == rounds
        log = store.read(RUN, "s")
    assert seqs(log) == list(range(1, rounds + 1))  # no gaps
    assert all(e.body["by"] == ("p1" if e.seq in won1 else "p2") for e in log)
    assert all(p.exitcode == 0 for p in procs)


# -- adapter construction ------------------------------------------------------------


def test_sqlite_refuses_memory_path_and_closed_use(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        SqliteCheckpointStore(":memory:")
    store = SqliteCheckpointStore(tmp_path / "c.db")
    store.close()
    with pytest.raises(ConfigError, match="closed"):
        store.load_head(RUN)


def test_dynamodb_module_without_boto3_names_the_extra(
        monkeypatch: pytest.MonkeyPatch) -> None:
    name = "agentloom.stores.dynamodb_checkpoints"
    monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "botocore", None)
    monkeypatch.setitem(sys.modules, "botocore.exceptions", None)
    with pytest.raises(ImportError, match=r"agentloom\[aws\]"):
        importlib.import_module(name)
