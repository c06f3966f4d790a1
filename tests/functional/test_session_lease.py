"""One active run per session (the platform's one lease), atomically, and a refusal that
says who drives it; a session is bound to its agent."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from functional.test_local_sessions import asker, inherited, snapshot

from agentloom.local.app import LocalApp
from agentloom.platform.lease import Driver, liveness, this_process
from agentloom.sandbox._liveness import proc_start
from agentloom_runtime.contracts import StepResult
from agentloom_runtime.errors import ConfigError


def other_process(*, alive: bool) -> tuple[Driver, subprocess.Popen[bytes]]:
    """The identity of a real other process of this host, killed unless ``alive``."""
    child = subprocess.Popen(["sleep", "60"])
    start = proc_start(child.pid)
    assert start is not None
    driver = Driver(**{**this_process(), "pid": child.pid, "start": start})
    if not alive:
        child.kill()
        child.wait()
    return driver, child


@pytest.mark.parametrize("attempt", [1, 2, 3])
def test_two_questions_started_together_in_one_session_start_exactly_one(
        tmp_path: Path, attempt: int) -> None:
    barrier = threading.Barrier(2)
    results: list[StepResult | ConfigError] = []

    def ask(letter: str) -> None:
        app = LocalApp(tmp_path)  # its own connection, as another process would have
        try:
            barrier.wait()
            results.append(asyncio.run(app.run(snapshot(), asker(delay=0.2),
                                               f"Question {letter}", session="s")))
        except ConfigError as err:
            results.append(err)
        finally:
            app.close()

    threads = [threading.Thread(target=ask, args=(x,)) for x in "AB"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    started = [r for r in results if isinstance(r, StepResult)]
    refused = [r for r in results if isinstance(r, ConfigError)]
    assert len(started) == 1 and len(refused) == 1, results
    assert started[0].status == "completed"
    message = refused[0].message
    assert f"run {started[0].run_id} is being driven by process {os.getpid()}" in message
    assert "on this host; wait for it or cancel it" in message
    assert "resume" not in message  # never an advice to take over a live driver's run
    assert refused[0].details["way_out"] == "wait"
    app = LocalApp(tmp_path)
    try:
        assert app.sessions().details("s")["active_run"] is None  # given back with its end
        assert app.runs("s") == [started[0].run_id]
    finally:
        app.close()


async def test_a_live_driver_is_named_and_a_dead_one_is_offered_for_resume(
        tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    driver, child = other_process(alive=True)
    try:
        app.open_run("s", "r1", snapshot(), driver)  # another process's question
        engine, _ = app.engine(snapshot(), asker(), session="s")
        await engine.start("Question A", run_id="r1", labels={"session": "s"})
        await engine.close()
        assert liveness(driver) == "alive"
        live = f"run r1 is being driven by process {child.pid} on this host; wait for it"
        with pytest.raises(ConfigError, match=live):
            await app.run(snapshot(), asker(), "Question B", session="s")
        with pytest.raises(ConfigError, match=live):  # not even resume takes it over
            await app.resume("r1", snapshot(), asker())
        report = await app.inspect("r1")
        assert report.driver == "alive" and report.way_out is None

        child.kill()
        child.wait()
        assert liveness(driver) == "gone"
        with pytest.raises(ConfigError, match=r"run r1 was interrupted; continue it with "
                           r"`agentloom resume r1`") as refused:
            await app.run(snapshot(), asker(), "Question B", session="s")
        assert refused.value.details["way_out"] == "resume"
        report = await app.inspect("r1")
        assert report.driver == "gone" and report.way_out == "resume"

        resumed = await app.resume("r1", snapshot(), asker())
        assert resumed.status == "completed"
        b = await app.run(snapshot(), asker(), "Question B", session="s")
        assert b.status == "completed"
        assert inherited(app, b.run_id) == ["Question A", "Answer A"]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        app.close()


async def test_a_driver_that_cannot_be_checked_is_waited_for(tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    try:
        elsewhere = Driver(**{**this_process(), "hostname": "build-box-7"})
        app.open_run("s", "r1", snapshot(), elsewhere)
        engine, _ = app.engine(snapshot(), asker(), session="s")
        await engine.start("Question A", run_id="r1", labels={"session": "s"})
        await engine.close()
        with pytest.raises(ConfigError, match=r"run r1 is being driven by process \d+ on "
                           r"host 'build-box-7', which cannot be checked from here") as err:
            await app.resume("r1", snapshot(), asker())
        assert "resume" not in err.value.message
    finally:
        app.close()


async def test_a_lease_whose_run_never_started_holds_nothing_once_its_driver_is_gone(
        tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    driver, _ = other_process(alive=False)
    try:
        app.open_run("s", "never-started", snapshot(), driver)  # then it crashed
        done = await app.run(snapshot(), asker(), "Question A", session="s")
        assert done.status == "completed"
        assert app.sessions().details("s")["active_run"] is None
    finally:
        app.close()


async def test_a_driver_that_stops_mid_run_leaves_it_interrupted_with_a_way_out(
        tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    calls: list[str] = []

    def crash(request: Any) -> Any:
        calls.append(request.purpose)
        return RuntimeError("the host went down mid-call")  # raised by the model double

    from agentloom_runtime.testing import FunctionModel

    try:
        with pytest.raises(RuntimeError, match="went down"):
            await app.run(snapshot(), FunctionModel(crash), "Question A", session="s")
        lease = app.sessions().details("s")
        run_id = lease["active_run"]
        assert run_id is not None
        assert lease["driver"] is None  # this process let go of it: interrupted
        with pytest.raises(ConfigError, match=f"run {run_id} was interrupted; continue it"):
            await app.run(snapshot(), asker(), "Question B", session="s")
        # the model call was sent and no response saved: resuming blocks on it, and show
        # says what is unknown and the way out
        blocked = await app.resume(run_id, snapshot(), FunctionModel(crash))
        assert blocked.status == "blocked" and blocked.error_code == "model_outcome_unknown"
        out = io.StringIO()
        report = await asyncio.to_thread(app.show, run_id, out,
                                         gateway=FunctionModel(crash))
        assert report.way_out == "resolve" and report.unknown is not None
        assert report.unknown.kind == "model" and "treat_as_failed" in report.unknown.verdicts
        text = out.getvalue()
        assert "status: blocked (model_outcome_unknown" in text
        assert "unknown: model call (action)" in text and "way out: resolve" in text
        assert calls == ["action"]  # the unknown call was never sent again
        b = await app.run(snapshot(), asker(), "Question B", session="s")  # blocked: not active
        assert b.status == "completed"
    finally:
        app.close()


async def test_a_session_is_bound_to_its_agent_and_version(tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    try:
        await app.run(snapshot(agent="notes"), asker(), "Question A", session="s")
        with pytest.raises(ConfigError, match=r"session 's' belongs to agent 'notes' version "
                           r"1 .*agent 'other' version 1 .*cannot ask in it"):
            await app.run(snapshot(agent="other"), asker(), "Question B", session="s")
        with pytest.raises(ConfigError, match=r"agent 'notes' version 2"):
            await app.run(snapshot(agent="notes", version=2), asker(), "Question B",
                          session="s")
        assert len(app.runs("s")) == 1  # the refused questions left no run
        other = await app.run(snapshot(agent="other"), asker(), "Question B", session="t")
        assert other.status == "completed"
    finally:
        app.close()
