"""workspace_command through the step machine: the step returns next=command, a runner
executes the spec, the next step records the outcome; unknown fates never re-run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.engine import Crash, CrashingStore, make_snapshot

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.context import NoCompaction
from agentloom_runtime.engine import create_engine
from agentloom_runtime.testing import KeyedScriptModel, ScriptedModel
from agentloom_runtime.workspace import (
    CommandResult,
    MarkerStore,
    WorkspaceProvider,
    file_tools,
)


class FakeRunner:
    """Follows the runner contract (marker, result, marker removed) without a sandbox."""

    def __init__(self, lock_dir: Path) -> None:
        self.markers = MarkerStore(lock_dir)
        self.ran: list[str] = []

    def ensure_available(self) -> None:
        return None

    async def run(self, spec: dict[str, Any], instance: str) -> dict[str, Any]:
        self.markers.claim(spec["request_id"], {"state": "started"})
        self.ran.append(spec["command"])
        result = CommandResult(request_id=spec["request_id"], exit_code=0,
                               stdout_head="ok\n", duration_s=0.01)
        self.markers.write_result(result)
        self.markers.remove(spec["request_id"])
        return result.to_dict()


def setup(tmp_path: Path, store, run_id=None):
    provider = WorkspaceProvider(tmp_path / "ws")
    lock_dir = provider.lock_dir("local", "tester", "s")
    runner = FakeRunner(lock_dir)
    model = KeyedScriptModel([
        ScriptedModel.call("workspace_command", {"command": "make test"}, id="k1"),
        ScriptedModel.answer("tests pass")])
    engine = create_engine(
        make_snapshot(), save=store, model_gateway=model, compaction_policy=NoCompaction(),
        tools=file_tools(), commands=MarkerStore(lock_dir),
        services={"command_runner": runner},
        workspace=lambda inst: provider.for_instance("local", "tester", "s", "r", inst).store(),
        checkpoint=run_id)
    return engine, runner


async def drive(engine, runner):
    result = None
    command_result = None
    for _ in range(30):
        result = await engine.step(command_result=command_result)
        command_result = None
        if result.next == "command":
            command_result = await runner.run(engine.command_spec(), result.instance)
        if result.next == "done":
            return result
    raise AssertionError("no end")


async def test_command_round_trip(tmp_path: Path) -> None:
    store = InMemoryCheckpointStore()
    engine, runner = setup(tmp_path, store)
    run_id = await engine.start("run the tests")
    result = await engine.step()
    assert result.kind == "action"
    result = await engine.step()
    assert (result.next, result.kind) == ("command", "command")
    assert result.request_id and "make test" == engine.command_spec()["command"]
    assert (await drive(engine, runner)).status == "completed"
    assert runner.ran == ["make test"]
    record = [e.body for e in store.read(run_id, "src:main") if e.body["kind"] == "tool_result"]
    assert record[0]["status"] == "ok" and "ok" in record[0]["message"]["content"]


@pytest.mark.parametrize("crash_after", [3, 4])
async def test_crash_around_dispatch(tmp_path: Path, crash_after: int) -> None:
    inner = InMemoryCheckpointStore()
    engine, runner = setup(tmp_path, CrashingStore(inner, crash_after))
    with pytest.raises(Crash):
        await engine.start("run the tests", run_id="r")
        await drive(engine, runner)
    resumed, runner2 = setup(tmp_path, inner, "r")
    await resumed.begin_execution()
    assert (await drive(resumed, runner2)).status == "completed"
    assert len(runner.ran + runner2.ran) == 1, "the command ran exactly once"


async def test_started_without_result_blocks_and_refuses_writes(tmp_path: Path) -> None:
    inner = InMemoryCheckpointStore()
    engine, runner = setup(tmp_path, inner)
    await engine.start("run the tests", run_id="r")
    await engine.step()
    result = await engine.step()
    assert result.next == "command"
    # the host dies after the sandbox started: a marker of unknown fate remains
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
