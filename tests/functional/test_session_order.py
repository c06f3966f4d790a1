"""Records are numbered when they reach the session (rules 3–4, docs/contract.md#a-b-c-resume-a-d),
through the real embedded store: a resumed older run lands after the newer runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from functional.test_local_sessions import asker, inherited, own_calls, snapshot, task_of

from agentloom.local.app import LocalApp
from agentloom.local.runs import drive
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.errors import ModelStatusError
from agentloom_runtime.testing import FunctionModel, ScriptedModel


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
        # commit order: A's first part, B, C, then A's late answer, led by a note naming
        # A; the note of how A was left (blocked) is stale once A went on, and is not shown
        positions = [seen.index(t) for t in once]
        assert positions == sorted(positions)
        assert not [t for t in seen if t.startswith("[Previous run")]
        notes = [i for i, t in enumerate(seen) if t.startswith("[Platform note")]
        assert notes == [positions[-1] - 1] and a.run_id in seen[notes[0]]

        records = app.records("s")
        assert runs_in_order(records) == [a.run_id, b.run_id, c.run_id, a.run_id, d.run_id]
        assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
        refs = [(r["run_id"], r["src"]) for r in records if "src" in r]
        assert len(refs) == len(set(refs))  # deduplicated by (run, instance, local seq)
    finally:
        app.close()


async def test_each_commit_writes_its_records_no_sync_follows(tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    try:
        first = await app.run(snapshot(), asker(), "Question A", session="s")
        # a run driven by a bare loop (no driver, no sync, as if it crashed after each
        # commit): its records are in the session's stream as soon as each step commits
        app.open_run("s", "bare", snapshot())
        engine, _ = app.engine(snapshot(), asker(), session="s")
        await engine.start("Question B", run_id="bare", labels={"session": "s"})
        assert runs_in_order(app.records("s")) == [first.run_id, "bare"]
        await drive(engine)
        await engine.close()
        records = app.records("s")
        assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
        assert [str(r["message"].get("content")) for r in records if r["run_id"] == "bare"
                ] == ["Question B", "Answer B"]
        c = await app.run(snapshot(), asker(), "Question C", session="s")
        assert inherited(app, c.run_id) == ["Question A", "Answer A", "Question B",
                                            "Answer B"]
    finally:
        app.close()


def notes_then_answer(request: ModelRequest) -> ModelResponse | str:
    """C takes twelve long notes (enough to be compacted; keyed on the notes visible, so
    compaction cannot confuse it); every other question is answered at once."""
    if request.purpose == "verification":
        return ScriptedModel.verdict("complete")
    text = " ".join(str(m.get("content")) + str(m.get("tool_calls")) for m in request.messages)
    seen = [int(x) for x in re.findall(r"C note (\d+)", text)]
    if request.purpose == "compaction":
        return ModelResponse(content=f"C took notes up to C note {max(seen, default=0)}.")
    letter = task_of(request).split()[1]
    k = max(seen) + 1 if seen else 0
    if letter == "C" and k < 12:
        return ScriptedModel.call("update_plan", {"steps": [
            {"id": "1", "title": f"C note {k} " + "detail " * 30, "status": "completed"}]},
            id=f"c{k}")
    if letter == "A" and own_calls(request) == 0:
        return ScriptedModel.call("update_plan", {"steps": [
            {"id": "1", "title": "A plan", "status": "completed"}]}, id="a0")
    return f"Answer {letter}"


async def test_a_view_saved_before_an_old_run_resumed_never_hides_its_late_answer(
        tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    snap = snapshot(window=6_000)
    provider_down = ModelStatusError("provider down", status=503)

    def a_fails_after_its_plan(request: ModelRequest) -> Any:
        if own_calls(request) == 1:
            return provider_down
        return notes_then_answer(request)

    try:
        a = await app.run(snap, FunctionModel(a_fails_after_its_plan), "Question A",
                          session="s")
        assert (a.status, a.error_code) == ("blocked", "model_status_error")
        for letter in "BC":
            done = await app.run(snap, FunctionModel(notes_then_answer),
                                 f"Question {letter}", session="s")
            assert done.status == "completed"
        [view] = app.tracker.store.streams.views("s")  # C's compacted view, over A, B and C
        assert view.run_id == done.run_id
        assert (await app.resume(a.run_id, snap, FunctionModel(notes_then_answer))
                ).status == "completed"
        d = await app.run(snap, FunctionModel(notes_then_answer), "Question D", session="s")
        seen = inherited(app, d.run_id)
        assert seen.count("Answer C") == 1, seen  # from the view, not again after it
        assert seen.count("Answer A") == 1, seen  # A's late answer, after the view
        assert seen.index("Answer C") < seen.index("Answer A")
        assert any("C took notes" in t for t in seen)
    finally:
        app.close()


async def test_a_session_of_the_earlier_cli_stream_is_refused_with_a_way_on(
        tmp_path: Path) -> None:
    """ADR 0003: no migrations. A session whose document holds the CLI's earlier record
    stream is refused for new questions and resumes, naming a new session."""
    from agentloom_runtime.checkpoint.store import Commit, LogEntry
    from agentloom_runtime.errors import ConfigError

    app = LocalApp(tmp_path)
    try:
        engine, _ = app.engine(snapshot(), asker(), session="s")
        await engine.start("Question A", run_id="old", labels={"session": "s"})
        await engine.close()
        app.store.commit(Commit("session:s", 0, {"runs": 1},  # as the earlier CLI wrote it
                                [LogEntry("runs", 1, {"run_id": "old"})]))
        for attempt in (app.run(snapshot(), asker(), "Question B", session="s"),
                        app.resume("old", snapshot(), asker())):
            with pytest.raises(ConfigError, match=r"session 's' .* earlier version of the "
                               r"CLI.*ask in a new session \(`agentloom run --session NEW"
                               ) as refused:
                await attempt
            assert refused.value.details["code"] == "session_stream_outdated"
        assert app.runs("s") == []  # nothing was opened
        other = await app.run(snapshot(), asker(), "Question B", session="s2")
        assert other.status == "completed"
    finally:
        app.close()


async def test_a_stopping_commit_gives_the_lease_back_with_the_run_status(
        tmp_path: Path) -> None:
    """The session's lease is released in the run's own stopping commit: a run driven by
    a bare loop (no driver lets go, nothing is synced after it) leaves its session free
    and its status recorded as soon as its last commit holds."""
    app = LocalApp(tmp_path)
    try:
        app.open_run("s", "bare", snapshot())
        assert app.sessions().details("s")["active_run"] == "bare"
        engine, _ = app.engine(snapshot(), asker(), session="s")
        await engine.start("Question B", run_id="bare", labels={"session": "s"})
        assert (await drive(engine)).status == "completed"
        await engine.close()
        assert app.sessions().details("s") == {"active_run": None, "driver": None}
        found = app.tracker.store.runs.get("s", "bare")
        assert found is not None and found.value.status == "completed"
        assert app.tracker.store.runs.active() == []
        nxt = await app.run(snapshot(), asker(), "Question C", session="s")
        assert nxt.status == "completed"
    finally:
        app.close()
