"""Checkpoint store throughput: commits/s and bytes per commit (no assertions).

Each commit is what a step writes: a small head and two log entries.

    python tests/benchmarks/bench_checkpoint_store.py [--commits N]

- ``payload B/commit``: head + entry bodies as serialized by the store;
- ``WAL B/commit``: bytes SQLite appends to its write-ahead log per commit (whole pages:
  what is fsynced), measured over the first commits after a checkpoint;
- ``file B/commit``: growth of the database file once the WAL is checkpointed.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore, Synchronous
from agentloom_runtime.checkpoint import BaseCheckpointStore, Commit, InMemoryCheckpointStore
from agentloom_runtime.checkpoint.store import LogEntry, dumps

RUN = "bench-run"
WAL_SAMPLE = 100  # commits; stays below SQLite's 1000-page autocheckpoint


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

if __name__ == "__main__":
    main()
