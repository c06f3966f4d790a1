"""``LocalApp`` owns the operator's ways out (issue 9): a verdict on a run that was
killed (stored ``running``, its driver provably gone) takes one call; ``examine`` shows
what is unknown about it; a run that already ended is not resumed; engines get the hook
registry the app was given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from functional.test_local_sessions import asker, snapshot
from functional.test_session_lease import other_process

from agentloom.local.app import LocalApp
from agentloom_runtime.contracts import ModelRequest, Verdict
from agentloom_runtime.engine import read_run
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.hooks import Continue, HookDefinition, HookRegistry
from agentloom_runtime.testing import FunctionModel


def _crash(calls: list[str]) -> FunctionModel:
    """A model whose host goes down while the request is in flight."""

    def reply(request: ModelRequest) -> Any:
        calls.append(request.purpose)
        return RuntimeError("the host went down mid-call")

    return FunctionModel(reply)


async def _killed_in_a_model_call(app: LocalApp, calls: list[str]) -> str:
    """A run whose driver died while its model request was in flight: still ``running``,
    the lease released by a driver that is gone."""
    with pytest.raises(RuntimeError, match="went down"):
        await app.run(snapshot(), _crash(calls), "Question A", session="s")
    run_id = app.sessions().details("s")["active_run"]
    assert run_id is not None
    summary = app.summary(run_id)
    assert summary.status == "running" and summary.in_flight == "model"
    return run_id


async def test_a_verdict_on_a_killed_run_takes_one_call(tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    calls: list[str] = []
    try:
        run_id = await _killed_in_a_model_call(app, calls)
        done = await app.resolve(run_id, snapshot(), asker(),
                                 Verdict(kind="send_again", by="ada", note="resend"))
        assert done.unknown.kind == "model" and done.ended is None
        assert done.result is not None and done.result.status == "completed"
        assert done.status == "completed"
        [verdict] = [e.body for e in app.store.read(run_id, "verdicts")]
        assert (verdict["verdict"], verdict["by"], verdict["note"]) == ("send_again", "ada",
                                                                       "resend")
        assert calls == ["action"]  # the crashed request was sent by the new model only
        assert app.sessions().details("s")["active_run"] is None  # the lease is given back
    finally:
        app.close()


async def test_a_verdict_that_ends_a_killed_run_is_reported(tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    try:
        run_id = await _killed_in_a_model_call(app, [])
        done = await app.resolve(run_id, snapshot(), asker(),
                                 Verdict(kind="treat_as_failed", by="ada"))
        assert done.status == "failed" and done.result is None
        assert done.ended is not None and "treated" in done.ended.reason
        assert done.way_out == "new_question"
    finally:
        app.close()


async def test_a_verdict_that_does_not_apply_leaves_the_killed_run_blocked_on_it(
        tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    try:
        run_id = await _killed_in_a_model_call(app, [])
        with pytest.raises(ConfigError) as refused:
            await app.resolve(run_id, snapshot(), asker(), Verdict(kind="ran", by="ada"))
        assert refused.value.details["code"] == "verdict_not_applicable"
        assert refused.value.details["verdicts"] == ["send_again", "treat_as_failed"]
        report = await app.inspect(run_id, gateway=asker())
        assert report.way_out == "resolve" and report.unknown is not None
        assert list(app.store.read(run_id, "verdicts")) == []
    finally:
        app.close()


async def test_examine_brings_a_killed_run_to_its_unknown_outcome(tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    calls: list[str] = []
    try:
        run_id = await _killed_in_a_model_call(app, calls)
        before = await app.inspect(run_id)
        assert before.driver == "gone" and before.way_out == "resume"
        assert before.unknown is None
        report = await app.examine(run_id, snapshot(), _crash(calls))
        assert report.run.status == "blocked" and report.way_out == "resolve"
        assert report.unknown is not None and report.unknown.kind == "model"
        assert report.run.execution == before.run.execution + 1
        assert calls == ["action"]  # examining sends nothing
        assert app.sessions().details("s")["active_run"] is None
    finally:
        app.close()


async def test_a_killed_run_with_nothing_in_flight_has_nothing_to_resolve(
        tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    driver, _ = other_process(alive=False)
    try:
        app.open_run("s", "r1", snapshot(), driver)
        engine, _ = app.engine(snapshot(), asker(), session="s")
        await engine.start("Question A", run_id="r1", labels={"session": "s"})
        await engine.close()  # then its driver died, between steps
        before = app.summary("r1")
        with pytest.raises(ConfigError, match="interrupted between steps") as refused:
            await app.resolve("r1", snapshot(), asker(), Verdict(kind="ran", by="ada"))
        assert refused.value.details == {"code": "nothing_to_resolve", "run_id": "r1",
                                         "status": "running", "way_out": "resume"}
        report = await app.examine("r1", snapshot(), asker())
        assert report.unknown is None and report.way_out == "resume"
        assert app.summary("r1").version == before.version  # nothing was taken
        done = await app.resume("r1", snapshot(), asker())
        assert done.status == "completed"
    finally:
        app.close()


async def test_a_run_that_ended_is_not_resumed(tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    snap = snapshot(max_iterations=1)
    try:
        done = await app.run(snapshot(), asker(), "Question A", session="s")
        version = app.summary(done.run_id).version
        again = await app.resume(done.run_id, snapshot(), asker())
        assert (again.status, again.next, again.version) == ("completed", "done", version)
        outcome = await app.outcome(done.run_id, snapshot(), asker())
        assert outcome is not None and outcome.answer == "Answer A"
        blocked = await app.run(snap, asker({"B": 1}), "Question B", session="t")
        await app.cancel(blocked.run_id, snap, asker())
        cancelled = await app.resume(blocked.run_id, snap, asker())
        assert cancelled.status == "cancelled" and cancelled.error_code == "run_cancelled"
        with pytest.raises(ConfigError) as refused:
            await app.resolve(blocked.run_id, snap, asker(), Verdict(kind="ran", by="ada"))
        assert refused.value.details["way_out"] == "new_question"
    finally:
        app.close()


async def test_engines_get_the_hook_registry_the_app_was_given(tmp_path: Path) -> None:
    seen: list[str] = []

    async def note(ctx: Any, payload: Any) -> Continue:
        seen.append(payload["task"])
        return Continue()

    registry = HookRegistry([HookDefinition("note-run", "1", note, replay_safe=True)])
    snap = snapshot(hooks=[{"hook_id": "note-run", "version": "1", "point": "run.before"}])
    app = LocalApp(tmp_path, hooks=lambda _: registry)
    try:
        done = await app.run(snap, asker(), "Question A", session="s")
        assert done.status == "completed" and seen == ["Question A"]
        summary = read_run(app.store, done.run_id)
        assert summary is not None and summary.status == "completed"
    finally:
        app.close()
