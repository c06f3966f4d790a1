"""The SQLite file at its floor (issue 18): a new file writes small pages, a file made
with SQLite's default pages keeps working, and the sizes a run keeps with its view
survive a restart of the process."""

from __future__ import annotations

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
