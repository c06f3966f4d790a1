"""workspace_command through the step machine: the step returns next=command, a runner
executes the spec, the next step records the outcome; unknown fates never re-run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.engine import (
    Crash,
    CrashingStore,
    FakeRunner,
    build_engine,
    command_host,
    drive,
    records,
)

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.engine import Engine
from agentloom_runtime.testing import KeyedScriptModel, ScriptedModel
from agentloom_runtime.workspace import WorkspaceProvider, file_tools


def setup(tmp_path: Path, store: Any, run_id: str | None = None) -> tuple[Engine, FakeRunner]:
    runner, host = command_host(tmp_path / "ws")
    model = KeyedScriptModel([
        ScriptedModel.call("workspace_command", {"command": "make test"}, id="k1"),
        ScriptedModel.answer("tests pass")])
    engine = build_engine(store=store, model=model, tools=file_tools(), run_id=run_id, **host)
    return engine, runner


async def test_command_round_trip(tmp_path: Path) -> None:
    store = InMemoryCheckpointStore()
    engine, runner = setup(tmp_path, store)
    run_id = await engine.start("run the tests")
    result = await engine.step()
    assert result.kind == "action"
    result = await engine.step()
    assert (result.next, result.kind) == ("command", "command")
    assert result.request_id and "make test" == engine.command_spec()["command"]
    assert (await drive(engine, runner=runner)).status == "completed"
    assert runner.ran == ["make test"]
    record = records(store, run_id, "tool_result")
    assert record[0]["status"] == "ok" and "ok" in record[0]["message"]["content"]


@pytest.mark.parametrize("crash_after", [3, 4])
async def test_crash_around_dispatch(tmp_path: Path, crash_after: int) -> None:
    inner = InMemoryCheckpointStore()
    engine, runner = setup(tmp_path, CrashingStore(inner, crash_after))
    with pytest.raises(Crash):
        await engine.start("run the tests", run_id="r")
        await drive(engine, runner=runner)
    resumed, runner2 = setup(tmp_path, inner, "r")
    await resumed.begin_execution()
    assert (await drive(resumed, runner=runner2)).status == "completed"
    assert len(runner.ran + runner2.ran) == 1, "the command ran exactly once"


async def test_started_without_result_blocks_and_refuses_writes(tmp_path: Path) -> None:
    inner = InMemoryCheckpointStore()
    engine, runner = setup(tmp_path, inner)
    await engine.start("run the tests", run_id="r")
    await engine.step()
    result = await engine.step()
    assert result.next == "command"
    # the host dies after the sandbox started: a marker of unknown fate remains
    assert result.request_id is not None
    runner.markers.claim(result.request_id, {"state": "started"})
    resumed, _ = setup(tmp_path, inner, "r")
    await resumed.begin_execution()
    blocked = await resumed.step()
    assert (blocked.status, blocked.error_code) == ("blocked", "tool_outcome_unknown")
    store = WorkspaceProvider(tmp_path / "ws").for_instance("local", "tester", "s", "r",
                                                          "main").store()
    from agentloom_runtime.workspace import WorkspaceError

    with pytest.raises(WorkspaceError) as err:
        await store.write("x.txt", "data")
    assert err.value.code == "sandbox_marker_present"
    assert (await store.list("."))["entries"] == []  # read-only inspection still works
