"""Checkpoint store throughput: commits/s and bytes per commit (no assertions).

Each commit is what a step writes: a small head and two log entries.

    python tests/benchmarks/bench_checkpoint_store.py [--commits N]

- ``payload B/commit``: head + entry bodies as serialized by the store;
- ``WAL B/commit``: bytes SQLite appends to its write-ahead log per commit (whole pages:
  what is fsynced), measured over the first commits after a checkpoint;
- ``file B/commit``: growth of the database file once the WAL is checkpointed;
- DynamoDB (moto, in-process: its commits/s say nothing about AWS latency):
  ``write units``, ``items`` and ``item B`` per commit from the adapter's counters
  (``write_units``, ``items_written``, ``bytes_written``: what AWS would bill);
- ``1 MB entry``: latency of a commit holding a small head and one 1 MB entry (spilled
  to a blob), median of a few, per backend.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore, Synchronous
from agentloom_runtime.checkpoint import BaseCheckpointStore, Commit, InMemoryCheckpointStore
from agentloom_runtime.checkpoint.store import LogEntry, dumps

RUN = "bench-run"
WAL_SAMPLE = 100  # commits; stays below SQLite's 1000-page autocheckpoint
DYNAMODB_COMMITS = 200  # moto is slow (~30 commits/s); the counters do not vary


def make_commit(version: int) -> Commit:
    head = {"format": 1, "phase": "model_action", "frame": "main", "iteration": version,
            "cursors": {"main": 2 * version, "view": version},
            "pending": [], "plan": {"revision": 3, "open": 2}, "counters": {"calls": version}}
    entries = [
        LogEntry("main", 2 * version + 1, {"kind": "assistant", "text": "a" * 180,
                                           "usage": {"in": 1200, "out": 90}}),
        LogEntry("main", 2 * version + 2, {"kind": "tool_result", "call": f"c{version}",
                                           "text": "r" * 180}),
    ]
    return Commit(RUN, version, head, entries)


def payload_bytes(commit: Commit) -> int:
    return len(dumps(commit.head).encode()) + sum(len(dumps(e.body).encode())
                                                  for e in commit.entries)


def run_commits(store: BaseCheckpointStore, first: int, count: int) -> tuple[float, int]:
    """Commit versions first..first+count-1 in order: (seconds, payload bytes per commit)."""
    commits = [make_commit(v) for v in range(first, first + count)]
    start = time.perf_counter()
    for commit in commits:
        store.commit(commit)
    seconds = time.perf_counter() - start
    return seconds, sum(payload_bytes(c) for c in commits) // count


def file_size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def checkpoint(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def bench_sqlite(directory: Path, commits: int,
                 synchronous: Synchronous) -> tuple[float, int, int, int]:
    path = directory / f"bench-{synchronous.lower()}.db"
    store = SqliteCheckpointStore(path, synchronous=synchronous)
    try:
        run_commits(store, 0, 1)  # the run exists, the tables have pages
        checkpoint(path)
        db_before = file_size(path)
        seconds, payload = run_commits(store, 1, commits)
        checkpoint(path)  # everything in the database file; the WAL is empty again
        db_after = file_size(path)
        run_commits(store, 1 + commits, WAL_SAMPLE)
        wal = file_size(path.with_name(path.name + "-wal"))
    finally:
        store.close()
    return commits / seconds, payload, wal // WAL_SAMPLE, (db_after - db_before) // commits


def report(name: str, rate: float, payload: int, wal: int | None, file: int | None) -> None:
    def cell(value: int | None) -> str:
        return "-" if value is None else f"{value:,}"

    print(f"{name:<16} {rate:>12,.0f} {payload:>18,} {cell(wal):>14} {cell(file):>15}")


@contextmanager
def moto_dynamodb() -> Iterator[Any]:
    """A DynamoDbCheckpointStore on moto (in-process, fake credentials, no network)."""
    import boto3
    from moto import mock_aws

    from agentloom.stores.dynamodb_checkpoints import DynamoDbCheckpointStore, create_table

    saved = {name: os.environ.pop(name, None) for name in (
        "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB")}
    try:
        with mock_aws():
            client = boto3.client("dynamodb", region_name="us-east-1")
            create_table(client, "bench-checkpoints")
            yield DynamoDbCheckpointStore("bench-checkpoints", client=client)
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})


def bench_dynamodb(commits: int) -> tuple[float, int, float, float, float]:
    """(commits/s on moto, payload B, write units, items and item bytes per commit)."""
    with moto_dynamodb() as store:
        run_commits(store, 0, 1)
        units, items, written = store.write_units, store.items_written, store.bytes_written
        seconds, payload = run_commits(store, 1, commits)
        return (commits / seconds, payload, (store.write_units - units) / commits,
                (store.items_written - items) / commits,
                (store.bytes_written - written) / commits)


def one_mb_latency(store: BaseCheckpointStore, rounds: int = 5) -> float:
    """Median seconds of a commit holding a small head and one 1 MB entry (each entry
    distinct, so every commit stores a new blob)."""
    head = store.load_head(RUN)
    version = head.version if head else 0
    times = []
    for n in range(rounds):
        body = {"kind": "tool_result", "text": os.urandom(500_000).hex()}
        commit = Commit(RUN, version, {"phase": "tool", "n": n}, [LogEntry("big", n + 1, body)])
        start = time.perf_counter()
        version = store.commit(commit)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_one_mb(directory: Path) -> list[tuple[str, float, str]]:
    results: list[tuple[str, float, str]] = []

    def measure(name: str, store: BaseCheckpointStore, note: Callable[[], str]) -> None:
        results.append((name, one_mb_latency(store), note()))

    measure("memory", InMemoryCheckpointStore(), lambda: "")
    modes: list[Synchronous] = ["FULL", "NORMAL"]
    for mode in modes:
        with SqliteCheckpointStore(directory / f"one-mb-{mode}.db",
                                   synchronous=mode) as sqlite_store:
            measure(f"sqlite {mode}", sqlite_store, lambda: "")
    try:
        with moto_dynamodb() as dynamo:
            before = dynamo.write_units, dynamo.items_written
            measure("dynamodb (moto)", dynamo, lambda: (
                f"{(dynamo.write_units - before[0]) / 5:,.0f} write units, "
                f"{(dynamo.items_written - before[1]) / 5:.0f} items per commit"))
    except ImportError as exc:
        results.append(("dynamodb (moto)", float("nan"), f"skipped: {exc}"))
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=2000)
    args = parser.parse_args(argv)
    commits: int = args.commits

    print(f"{commits} commits, each a small head + 2 log entries\n")
    print(f"{'store':<16} {'commits/s':>12} {'payload B/commit':>18} {'WAL B/commit':>14} "
          f"{'file B/commit':>15}")

    memory = InMemoryCheckpointStore()
    run_commits(memory, 0, 1)
    seconds, payload = run_commits(memory, 1, commits)
    report("memory", commits / seconds, payload, None, None)

    modes: list[Synchronous] = ["FULL", "NORMAL"]
    with tempfile.TemporaryDirectory(prefix="agentloom-bench-") as tmp:
        for mode in modes:
            rate, payload, wal, file = bench_sqlite(Path(tmp), commits, mode)
            report(f"sqlite {mode}", rate, payload, wal, file)

        dynamo_commits = min(commits, DYNAMODB_COMMITS)
        try:
            rate, payload, units, items, item_bytes = bench_dynamodb(dynamo_commits)
        except ImportError as exc:
            print(f"\ndynamodb: skipped ({exc}; pip install 'agentloom[aws]' moto)")
        else:
            print(f"\n{dynamo_commits} commits on moto")
            print(f"{'store':<16} {'commits/s':>12} {'payload B/commit':>18} "
                  f"{'write units/commit':>19} {'items/commit':>13} {'item B/commit':>14}")
            print(f"{'dynamodb (moto)':<16} {rate:>12,.0f} {payload:>18,} {units:>19.1f} "
                  f"{items:>13.1f} {item_bytes:>14,.0f}")

        print("\ncommit latency, small head + one 1 MB entry (spilled to a blob), median of 5:")
        for name, seconds, note in bench_one_mb(Path(tmp)):
            extra = f"  ({note})" if note else ""
            print(f"  1 MB entry  {name:<16} {seconds * 1000:>9.1f} ms{extra}")


if __name__ == "__main__":
    main()
