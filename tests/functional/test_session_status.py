"""A run that fails, is cancelled, or is left blocked for a new question leaves a status
record in the session that later runs see (issue 9: every failure has a way out)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from functional.test_local_sessions import asker, inherited, snapshot

from agentloom.local.app import LocalApp
from agentloom_runtime.contracts import StepResult, Verdict
from agentloom_runtime.engine import read_run
from agentloom_runtime.testing import FunctionModel


def notes(texts: list[str]) -> list[str]:
    return [t for t in texts if t.startswith("[Previous run")]


async def test_a_cancelled_run_leaves_a_status_record_the_next_question_sees(
        tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    snap = snapshot(max_iterations=1)
    try:
        a = await app.run(snap, asker({"A": 1}), "Question A", session="s")
        assert a.status == "blocked"
        cancelled = await app.cancel(a.run_id, snap, asker())
        assert cancelled.status == "cancelled" and cancelled.way_out == "new_question"
        b = await app.run(snap, asker(), "Question B", session="s")
        seen = notes(inherited(app, b.run_id))
        assert len(seen) == 1, seen  # cancelled, noted once (not also as abandoned)
        assert seen[0].startswith(f"[Previous run {a.run_id} ended: cancelled — "
                                  "run_cancelled: cancelled by the user")
        c = await app.run(snap, asker(), "Question C", session="s")
        assert notes(inherited(app, c.run_id)) == seen  # once, however often synced
    finally:
        app.close()


async def test_a_blocked_run_left_for_a_new_question_is_noted_as_abandoned(
        tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    snap = snapshot(max_iterations=1)
    try:
        a = await app.run(snap, asker({"A": 1}), "Question A", session="s")
        assert a.status == "blocked"
        assert notes([str(r["message"]["content"]) for r in app.records("s")]) == []
        b = await app.run(snap, asker(), "Question B", session="s")
        seen = notes(inherited(app, b.run_id))
        assert len(seen) == 1 and f"run {a.run_id} ended: blocked — budget_exceeded" in seen[0]
        assert "left unfinished when a new question was asked" in seen[0]
    finally:
        app.close()


async def test_a_failed_run_leaves_a_status_record_the_next_question_sees(
        tmp_path: Path) -> None:
    app = LocalApp(tmp_path)

    def crash(request: Any) -> Any:
        return RuntimeError("the host went down mid-call")

    try:
        try:
            await app.run(snapshot(), FunctionModel(crash), "Question A", session="s")
        except RuntimeError:
            pass
        run_id = app.sessions().details("s")["active_run"]
        assert run_id is not None
        blocked = await app.resume(run_id, snapshot(), FunctionModel(crash))
        assert blocked.error_code == "model_outcome_unknown"
        engine, _ = app.engine(snapshot(), FunctionModel(crash), session="s", run_id=run_id)
        await engine.resolve(Verdict(kind="treat_as_failed", by="operator"))
        await engine.close()
        summary = read_run(app.store, run_id)
        assert summary is not None and summary.status == "failed"
        b = await app.run(snapshot(), asker(), "Question B", session="s")
        seen = notes(inherited(app, b.run_id))
        assert [s for s in seen if "ended: failed" in s and run_id in s], seen
    finally:
        app.close()


def test_cancelling_a_run_another_driver_is_driving_stops_it_at_its_next_step(
        tmp_path: Path) -> None:
    results: list[StepResult] = []

    def drive_slowly() -> None:
        app = LocalApp(tmp_path)
        try:
            results.append(asyncio.run(app.run(snapshot(), asker({"A": 50}, delay=0.05),
                                               "Question A", session="s")))
        finally:
            app.close()

    thread = threading.Thread(target=drive_slowly)
    thread.start()
    app = LocalApp(tmp_path)
    try:
        deadline = time.monotonic() + 30
        run_id = None
        while run_id is None or read_run(app.store, run_id) is None:
            assert time.monotonic() < deadline
            time.sleep(0.02)
            run_id = app.sessions().details("s")["active_run"]
        time.sleep(0.2)
        summary = asyncio.run(app.cancel(run_id, snapshot(), asker()))
        assert summary.status == "cancelled"
        thread.join(timeout=60)
        assert results and results[0].status == "cancelled"
        assert app.sessions().details("s")["active_run"] is None
        b = asyncio.run(app.run(snapshot(), asker(), "Question B", session="s"))
        seen = notes(inherited(app, b.run_id))
        assert len(seen) == 1 and "ended: cancelled" in seen[0]
    finally:
        thread.join(timeout=60)
        app.close()


async def test_an_older_blocked_run_finished_after_newer_ones_leaves_no_stale_blocked_note(
        tmp_path: Path) -> None:
    """Issue 17: A is blocked and left for B, resumed (blocked again) and left for C, then
    resumed to its answer. D's request carries A's status once, as it stands: no stale
    "ended: blocked" (one per resume), and A's late answer led by a note naming A."""
    app = LocalApp(tmp_path)
    snap = snapshot(max_iterations=1)  # A stops after each of its two plan updates
    try:
        a = await app.run(snap, asker({"A": 2}), "Question A", session="s")
        assert a.status == "blocked"
        await app.run(snap, asker(), "Question B", session="s")
        again = await app.resume(a.run_id, snap, asker({"A": 2}))
        assert again.status == "blocked"
        c = await app.run(snap, asker(), "Question C", session="s")
        seen = notes(inherited(app, c.run_id))
        assert len(seen) == 1 and "ended: blocked" in seen[0], seen  # once, not per resume
        assert (await app.resume(a.run_id, snap, asker({"A": 2}))).status == "completed"
        d = await app.run(snap, asker(), "Question D", session="s")
        seen = inherited(app, d.run_id)
        assert notes(seen) == [], notes(seen)  # A went on: "ended: blocked" is stale
        lead = seen[seen.index("Answer A") - 1]
        assert lead.startswith(f"[Platform note: the messages that follow continue run "
                               f'{a.run_id} (its question: "Question A")'), lead
        assert seen.index("Answer C") < seen.index("Answer A")  # in commit order
    finally:
        app.close()
