"""Session records are numbered when they reach the session (seed 000 §4 rules 3–4),
through the real embedded store: a resumed older run lands after the newer runs."""

from __future__ import annotations

import threading
from pathlib import Path

from functional.test_local_sessions import asker, inherited, snapshot

from agentloom.local.app import LocalApp
from agentloom.local.driver import drive
from agentloom.local.sessions import LocalSessions, this_process
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore


def runs_in_order(records: list[dict[str, object]]) -> list[object]:
    out: list[object] = []
    for record in records:
        if not out or out[-1] != record["run_id"]:
            out.append(record["run_id"])
    return out


async def test_a_resumed_older_run_lands_after_newer_runs_and_d_sees_everything_once(
        tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    snap = snapshot(max_iterations=2)  # A stops after its two plan updates
    try:
        a = await app.run(snap, asker({"A": 2}), "Question A", session="s")
        assert a.status == "blocked" and a.error_code == "budget_exceeded"
        b = await app.run(snap, asker(), "Question B", session="s")
        c = await app.run(snap, asker(), "Question C", session="s")
        assert (b.status, c.status) == ("completed", "completed")
        assert inherited(app, c.run_id).count("Answer B") == 1
        model = asker({"A": 2})
        resumed = await app.resume(a.run_id, snap, model)
        assert resumed.status == "completed"
        assert "Question B" not in str(model.requests[-1].messages)  # A saw only itself
        d = await app.run(snap, asker(), "Question D", session="s")
        assert d.status == "completed"

        seen = inherited(app, d.run_id)
        once = ["Question A", "Question B", "Answer B", "Question C", "Answer C", "Answer A"]
        for text in once:
            assert seen.count(text) == 1, (text, seen)
        # commit order: A's first part, A left blocked, B, C, then A's late answer
        positions = [seen.index(t) for t in once]
        assert positions == sorted(positions)
        status = [i for i, t in enumerate(seen) if t.startswith("[Previous run")]
        assert len(status) == 1 and positions[0] < status[0] < positions[1]
        assert a.run_id in seen[status[0]] and "budget_exceeded" in seen[status[0]]

        records = app.sessions().records("s")
        assert runs_in_order(records) == [a.run_id, b.run_id, c.run_id, a.run_id, d.run_id]
        assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
        refs = [(r["run_id"], r["src"]) for r in records if "src" in r]
        assert len(refs) == len(set(refs))  # deduplicated by (run, instance, local seq)
    finally:
        app.close()


async def test_records_committed_without_a_sync_are_caught_up_by_the_next_sync(
        tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    try:
        first = await app.run(snapshot(), asker(), "Question A", session="s")
        # a run whose driver synced nothing (it crashed right after each commit) ...
        sessions = app.sessions()
        sessions.acquire("s", "crashed")
        engine, _ = app.engine(snapshot(), asker(), session="s")
        await engine.start("Question B", run_id="crashed", labels={"session": "s"})
        await drive(engine)
        await engine.close()
        assert [r["run_id"] for r in sessions.records("s", messages=False)] == \
            [first.run_id] * 2
        # ... is caught up when the next question builds its history
        c = await app.run(snapshot(), asker(), "Question C", session="s")
        assert inherited(app, c.run_id) == ["Question A", "Answer A", "Question B",
                                            "Answer B"]
    finally:
        app.close()


def test_concurrent_syncs_never_duplicate_a_record(tmp_path: Path) -> None:
    import asyncio

    app = LocalApp(tmp_path)
    try:
        sessions = app.sessions()
        lease = sessions.acquire("s", "r")
        engine, _ = app.engine(snapshot(), asker({"A": 3}), session="s")

        async def unsynced() -> None:
            await engine.start("Question A", run_id="r", labels={"session": "s"})
            await drive(engine)
            await engine.close()

        asyncio.run(unsynced())
        barrier = threading.Barrier(4)
        counts: list[int] = []

        def sync() -> None:
            store = SqliteCheckpointStore(tmp_path / "agentloom.sqlite3")
            try:
                barrier.wait()
                counts.append(LocalSessions(store).sync("s"))
            finally:
                store.close()

        threads = [threading.Thread(target=sync) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        records = sessions.records("s", messages=False)
        assert sum(counts) == len(records) > 0
        assert len({r["src"] for r in records}) == len(records)
        assert sessions.sync("s") == 0
        sessions.release("s", "r", lease)
        assert sessions.head("s")["active_run"] is None
        assert this_process()["pid"] == lease["pid"]
    finally:
        app.close()
