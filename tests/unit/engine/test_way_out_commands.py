"""Ways out of a command of unknown outcome (issue 9): the command was dispatched, the
host's marker says it started, and no result exists. The run blocks with what the host
knows; an operator's verdict is committed first, and only then is the marker released
(a crash in between: the next step releases it)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.engine import Crash, build_engine

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import LookupState, ModelRequest, Verdict
from agentloom_runtime.errors import CheckpointConflict, ConfigError
from agentloom_runtime.testing import FunctionModel, ScriptedModel
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

RUN = "r"
COMMAND = "make deploy"


class FakeMarkers:
    """CommandMarkers over a dict; every call is logged in the shared ``events``."""

    def __init__(self, events: list[tuple[str, Any]], host: dict[str, Any] | None = None
                 ) -> None:
        self.events = events
        self.markers: dict[str, dict[str, Any]] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.host = host or {}

    def lookup(self, request_id: str) -> tuple[LookupState, dict[str, Any] | None]:
        if request_id in self.results:
            return "done", self.results[request_id]
        return ("started" if request_id in self.markers else "absent"), None

    def describe(self, request_id: str) -> dict[str, Any]:
        marker = self.markers.get(request_id)
        return {"request_id": request_id, "marker": "present" if marker else "absent",
                "exit_seen": request_id in self.results, **self.host}

    def release(self, request_id: str) -> None:
        self.events.append(("release", request_id))
        self.markers.pop(request_id, None)

    def forget(self, request_id: str) -> None:
        self.events.append(("forget", request_id))
        if request_id not in self.markers:
            self.results.pop(request_id, None)


class LoggingStore:
    """Logs each commit (with the streams it appends) into the shared ``events``; can
    die right after the commit that records a verdict."""

    def __init__(self, inner: Any, events: list[tuple[str, Any]],
                 crash_after_verdict: bool = False) -> None:
        self.inner = inner
        self.events = events
        self.crash_after_verdict = crash_after_verdict

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def commit(self, commit: Any) -> int:
        version = self.inner.commit(commit)
        streams = sorted({e.stream for e in commit.entries})
        self.events.append(("commit", streams))
        if self.crash_after_verdict and "verdicts" in streams:
            raise Crash("died between the verdict commit and the marker release")
        return int(version)


async def _spec(context: ToolContext, arguments: dict[str, Any]) -> Any:
    return {"request_id": context.request_id, "command": arguments["command"],
            "cwd": ".", "timeout_s": 60}


COMMAND_TOOL = ToolDefinition(
    name="run_command", description="run a shell command",
    parameters={"type": "object", "properties": {"command": {"type": "string"}},
                "required": ["command"], "additionalProperties": False},
    handler=_spec, implementation_id="run-command/v1", execution="command")


def deployer(request: ModelRequest) -> Any:
    if request.purpose == "verification":
        return ScriptedModel.verdict("complete")
    tool = [m for m in request.messages if m.get("role") == "tool"]
    if not tool:
        return ScriptedModel.call("run_command", {"command": COMMAND}, id="k1")
    return ScriptedModel.answer("deployed: " + str(tool[-1]["content"])[:300])


async def blocked_on_command(store: InMemoryCheckpointStore, markers: FakeMarkers) -> str:
    """Dispatch the command; the host writes its marker and dies; a resume blocks."""
    engine = build_engine(store=store, model=FunctionModel(deployer), tools=[COMMAND_TOOL],
                          commands=markers)
    await engine.start("deploy", run_id=RUN)
    assert (await engine.step()).kind == "action"
    result = await engine.step()
    assert result.next == "command" and result.request_id
    markers.markers[result.request_id] = {"state": "started"}
    resumed = build_engine(store=store, model=FunctionModel(deployer), tools=[COMMAND_TOOL],
                           commands=markers, run_id=RUN)
    await resumed.begin_execution()
    blocked = await resumed.step()
    assert (blocked.status, blocked.error_code) == ("blocked", "tool_outcome_unknown")
    return result.request_id


async def drive(engine: Any, markers: FakeMarkers, ran: list[str]) -> Any:
    """Step to the end; a dispatched command 'runs' here (recorded in ``ran``)."""
    command_result = None
    for _ in range(50):
        result = await engine.step(command_result=command_result)
        command_result = None
        if result.next == "command":
            spec = engine.command_spec()
            ran.append(spec["command"])
            command_result = {"request_id": spec["request_id"], "exit_code": 0,
                              "stdout_head": "ran again\n"}
        if result.next == "done":
            return result
    raise AssertionError("the run did not end")


async def test_unknown_command_shows_what_the_marker_store_knows() -> None:
    events: list[tuple[str, Any]] = []
    markers = FakeMarkers(events, host={"owner_alive": False, "sandbox_alive": False})
    store = InMemoryCheckpointStore()
    request_id = await blocked_on_command(store, markers)
    engine = build_engine(store=store, model=FunctionModel(deployer), tools=[COMMAND_TOOL],
                          commands=markers, run_id=RUN)
    unknown = engine.unknown()
    assert unknown is not None and unknown.kind == "command"
    assert unknown.host == markers.describe(request_id)
    assert unknown.request_id == request_id and unknown.tool == "run_command"
    assert unknown.command is not None and unknown.command["command"] == COMMAND
    assert json.loads(unknown.arguments or "") == {"command": COMMAND}
    assert set(unknown.verdicts) == {"ran", "did_not_run", "run_again"}
    assert engine.way_out() == "resolve"
    assert events == [], "describing changes nothing"


async def test_verdict_ran_with_exit_code_and_output_is_the_commands_result() -> None:
    events: list[tuple[str, Any]] = []
    markers = FakeMarkers(events)
    inner = InMemoryCheckpointStore()
    request_id = await blocked_on_command(inner, markers)
    model, ran = FunctionModel(deployer), list[str]()
    engine = build_engine(store=LoggingStore(inner, events), model=model, tools=[COMMAND_TOOL],
                          commands=markers, run_id=RUN)
    await engine.resolve(Verdict("ran", by="ops", exit_code=3, output="error: disk full"))
    assert events == [("commit", ["src:main", "verdicts", "view:main"]),
                      ("release", request_id)], "released only after the verdict commit"
    assert (await drive(engine, markers, ran)).status == "completed"
    assert ran == [], "the command did not run again"
    action = next(r for r in model.requests if r.purpose == "action")
    [tool] = [m for m in action.messages if m.get("role") == "tool"]
    account = json.loads(tool["content"])
    assert (account["exit_code"], account["output"], account["verdict"]) == (
        3, "error: disk full", "ran")
    record = next(e.body for e in inner.read(RUN, "src:main") if e.body["kind"] == "tool_result")
    assert record["status"] == "error", "a non-zero exit the operator saw is a failure"


@pytest.mark.parametrize("kind", ["ran", "did_not_run", "run_again"])
async def test_the_marker_is_released_only_after_the_verdict_commit(kind: str) -> None:
    events: list[tuple[str, Any]] = []
    markers = FakeMarkers(events)
    inner = InMemoryCheckpointStore()
    request_id = await blocked_on_command(inner, markers)
    engine = build_engine(store=LoggingStore(inner, events), model=FunctionModel(deployer),
                          tools=[COMMAND_TOOL], commands=markers, run_id=RUN)
    await engine.resolve(Verdict(kind, by="ops"))  # type: ignore[arg-type]
    first = events.index(("release", request_id))
    verdict_commit = next(i for i, e in enumerate(events)
                          if e[0] == "commit" and "verdicts" in e[1])
    assert verdict_commit < first
    ran: list[str] = []
    assert (await drive(engine, markers, ran)).status == "completed"
    assert ran == ([COMMAND] if kind == "run_again" else [])
    assert request_id not in markers.markers


async def test_a_crash_between_the_verdict_commit_and_the_release_releases_on_the_next_step(
        ) -> None:
    events: list[tuple[str, Any]] = []
    markers = FakeMarkers(events)
    inner = InMemoryCheckpointStore()
    request_id = await blocked_on_command(inner, markers)
    engine = build_engine(store=LoggingStore(inner, events, crash_after_verdict=True),
                          model=FunctionModel(deployer), tools=[COMMAND_TOOL], commands=markers,
                          run_id=RUN)
    with pytest.raises(Crash):
        await engine.resolve(Verdict("did_not_run", by="ops"))
    assert ("release", request_id) not in events
    assert request_id in markers.markers, "the marker outlived the crash"
    assert [e.body["verdict"] for e in inner.read(RUN, "verdicts")] == ["did_not_run"]
    next_process = build_engine(store=LoggingStore(inner, events), model=FunctionModel(deployer),
                                tools=[COMMAND_TOOL], commands=markers, run_id=RUN)
    await next_process.step()
    assert request_id not in markers.markers, "the next step released it"
    saved = inner.load_head(RUN)
    assert saved is not None and saved.body.get("release_marker") is None
    ran: list[str] = []
    assert (await drive(next_process, markers, ran)).status == "completed"
    assert ran == []


async def test_run_again_is_refused_while_the_sandbox_is_alive() -> None:
    events: list[tuple[str, Any]] = []
    markers = FakeMarkers(events, host={"sandbox_alive": True})
    inner = InMemoryCheckpointStore()
    await blocked_on_command(inner, markers)
    engine = build_engine(store=inner, model=FunctionModel(deployer), tools=[COMMAND_TOOL],
                          commands=markers, run_id=RUN)
    with pytest.raises(ConfigError, match="still running") as err:
        await engine.resolve(Verdict("run_again", by="ops"))
    assert err.value.details["code"] == "sandbox_alive"
    assert events == [] and inner.read(RUN, "verdicts") == []


def two_commands(request: ModelRequest) -> Any:
    if request.purpose == "verification":
        return ScriptedModel.verdict("complete")
    done = [m for m in request.messages if m.get("role") == "tool"]
    if len(done) < 2:
        return ScriptedModel.call("run_command", {"command": f"step {len(done) + 1}"},
                                  id=f"k{len(done) + 1}")
    return ScriptedModel.answer("both steps ran")


async def test_a_stale_command_result_is_never_recorded_for_another_command() -> None:
    """A duplicate step invocation (a retried host task) hands in the result of the first
    command while the second is waiting: it must change nothing."""
    events: list[tuple[str, Any]] = []
    markers, store = FakeMarkers(events), InMemoryCheckpointStore()
    engine = build_engine(store=store, model=FunctionModel(two_commands), tools=[COMMAND_TOOL],
                          commands=markers)
    await engine.start("run two steps")
    await engine.step()  # action: step 1
    first = await engine.step()
    assert first.next == "command"
    first_result = {"request_id": first.request_id, "exit_code": 0, "stdout_head": "one\n"}
    await engine.step(command_result=first_result)  # recorded
    await engine.step()  # action: step 2
    second = await engine.step()
    assert second.next == "command" and second.request_id != first.request_id
    version = engine.version
    with pytest.raises(CheckpointConflict, match="waiting"):
        await engine.step(command_result=first_result)  # the stale duplicate
    assert engine.version == version and engine.command_spec()["command"] == "step 2"
    ran: list[str] = []
    assert (await drive(engine, markers, ran)).status == "completed"
    assert ran == ["step 2"]
