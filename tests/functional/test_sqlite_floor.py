"""The SQLite file at its floor (issue 18): a new file writes small pages, a file made
with SQLite's default pages keeps working, and the sizes a run keeps with its view
survive a restart of the process."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from support.engine import COUNT_SCHEMA, build_engine, make_snapshot

from agentloom.platform.store.sqlite import SqliteItemStore
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom.stores.sqlite_connections import PAGE_SIZE
from agentloom_runtime.checkpoint import Commit, LogEntry
from agentloom_runtime.context import estimators
from agentloom_runtime.context.estimators import clear_text_caches
from agentloom_runtime.testing import ScriptedModel
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition


def page_size(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        conn.close()


def test_a_new_file_gets_small_pages(tmp_path: Path) -> None:
    path = tmp_path / "agentloom.sqlite3"
    path.touch()  # as layout.prepare leaves it: an empty file
    store = SqliteCheckpointStore(path)
    items = SqliteItemStore(path)
    store.commit(Commit("run-1", 0, {"n": 1}, [LogEntry("main", 1, {"text": "x" * 600})]))
    items.close()
    store.close()
    assert PAGE_SIZE == 1024
    assert page_size(path) == PAGE_SIZE


def test_a_file_with_default_pages_keeps_them_and_works(tmp_path: Path) -> None:
    path = tmp_path / "agentloom.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size = 4096")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE other (k INTEGER PRIMARY KEY)")  # a file made earlier
    conn.close()
    store = SqliteCheckpointStore(path)
    store.commit(Commit("run-1", 0, {"n": 1}, [LogEntry("main", 1, {"text": "y" * 600})]))
    assert store.read("run-1", "main")[0].body == {"text": "y" * 600}
    store.close()
    assert page_size(path) == 4096


def wal_bytes(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def stored_head(path: Path, run_id: str) -> tuple[str, int]:
    conn = sqlite3.connect(path)
    try:
        kind, size = conn.execute("SELECT typeof(body), length(body) FROM heads "
                                  "WHERE run_id = ?", (run_id,)).fetchone()
        return str(kind), int(size)
    finally:
        conn.close()


def large_head(n: int) -> dict[str, Any]:
    """A head of ~1.7 KB, like the engine's with a pending call's 400-character
    arguments: more than one 1 KiB page as text."""
    return {"n": n, "frames": {"main": {"pending": [{"arguments": words(n), "src": n}],
                                        "counters": {f"c{i}": i for i in range(40)}}},
            "bindings": "sha256:" + "ab" * 32}


def words(seed: int) -> str:
    return " ".join(random.Random(seed).choice(("alpha", "beta", "gamma", "delta", "epsilon",
                                                "zeta", "theta", "kappa")) + str(i)
                    for i in range(60))


def test_a_large_head_is_stored_deflated_in_one_page(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    store = SqliteCheckpointStore(path)
    store.commit(Commit("run-1", 0, large_head(1), []))
    store._conn().execute("PRAGMA wal_autocheckpoint = 0")
    before = wal_bytes(path)
    store.commit(Commit("run-1", 1, large_head(2), []))
    frames = (wal_bytes(path) - before) // (PAGE_SIZE + 24)
    head = store.load_head("run-1")
    store.close()
    assert head is not None and head.body == large_head(2) and head.version == 2
    kind, size = stored_head(path, "run-1")
    assert kind == "blob" and size < PAGE_SIZE - 100
    assert frames == 1, f"a head-only commit wrote {frames} pages"
    reopened = SqliteCheckpointStore(path)  # a fresh reader inflates it too
    assert reopened.load_head("run-1").body == large_head(2)  # type: ignore[union-attr]
    reopened.close()


def test_a_head_stored_as_text_reads_and_commits_on(tmp_path: Path) -> None:
    """A file whose heads an earlier version wrote as JSON text."""
    path = tmp_path / "runs.sqlite3"
    store = SqliteCheckpointStore(path)
    store.commit(Commit("run-1", 0, {"n": 0}, []))
    conn = sqlite3.connect(path)
    conn.execute("UPDATE heads SET body = ? WHERE run_id = 'run-1'",
                 (json.dumps(large_head(1)),))
    conn.commit()
    conn.close()
    assert store.load_head("run-1").body == large_head(1)  # type: ignore[union-attr]
    store.commit(Commit("run-1", 1, {"n": 2}, []))
    assert store.load_head("run-1").body == {"n": 2}  # type: ignore[union-attr]
    assert stored_head(path, "run-1")[0] == "text"  # small heads stay text
    store.close()


async def count_words(context: ToolContext, arguments: dict[str, Any]) -> Any:
    return {"count": len(arguments["text"].split())}


def engine(store: Any, *, run_id: str | None = None, steps: int = 0) -> Any:
    tools = [ToolDefinition(name="count_words", description="count words",
                            parameters=COUNT_SCHEMA, handler=count_words,
                            implementation_id="count-words/v1", read_only=True)]
    snapshot = make_snapshot(model={"model": "m", "context_window": 10_000_000,
                                    "max_output_tokens": 4096})
    script = [ScriptedModel.call("count_words", {"text": f"a b {i}"}, id=f"c{i}")
              for i in range(steps)]
    return build_engine(store=store, script=script, tools=tools, snapshot=snapshot,
                        run_id=run_id, compaction="default")


async def test_kept_sizes_survive_a_restart(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "runs.sqlite3"
    store = SqliteCheckpointStore(path)
    first = engine(store, steps=2)
    history = [{"role": "user" if i % 2 == 0 else "assistant",
                "content": f"message {i}: " + "lorem ipsum " * 20} for i in range(1_000)]
    run_id = await first.start("count the words", history=history)
    await first.step()
    await first.step()
    store.close()
    measured: list[int] = []
    real = estimators.message_json_bytes

    def counted(message: Any) -> int:
        measured.append(1)
        return real(message)

    monkeypatch.setattr(estimators, "message_json_bytes", counted)
    clear_text_caches()  # a new process
    reopened = SqliteCheckpointStore(path)
    assert (await engine(reopened, run_id=run_id, steps=1).step()).kind == "action"
    reopened.close()
    assert len(measured) < 20, f"{len(measured)} messages measured after the restart"
