"""The step service on moto, driven by the state machine's moves in Python: a whole run
with a plan, file tools and a command through the Fargate path; a duplicate invocation;
a stale generation; rollover; bad input."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from functional.aws.harness import ALICE, Bench, drive

from agentloom.aws import fence
from agentloom.aws.step_input import StepInputError
from agentloom_runtime.engine import Engine
from agentloom_runtime.testing.openai_server import OpenAICompatibleServer


def ask(bench: Bench, question: str = "Copy the notes") -> str:
    run, created = bench.api.sessions.ask(ALICE, bench.session_id, question)
    assert created
    return run.run_id


def test_a_run_with_a_plan_files_and_a_command_completes(
        bench: Bench, model_server: OpenAICompatibleServer) -> None:
    run_id = ask(bench)
    executions = bench.aws.sfn.list_executions(
        stateMachineArn=bench.resources.env["AGENTLOOM_STATE_MACHINE_ARN"])["executions"]
    assert [e["name"] for e in executions] == [f"{run_id}-g1"]
    replies = drive(bench, run_id)
    summary = bench.api.tracker.summary(run_id)
    assert replies[-1]["next"] == "done", (summary.error if summary else None,
                                           [r["next"] for r in replies])
    assert replies[-1]["status"] == "completed"
    assert [r["next"] for r in replies].count("command") == 1
    assert len(bench.ran) == 1
    command = next(r["command"] for r in replies if r["command"])
    assert command["task_definition"].startswith("arn:aws:ecs:")
    override = command["overrides"]["ContainerOverrides"][0]
    assert override["Name"] == "command"
    for reply in replies:  # tiny and without content
        assert len(json.dumps(reply)) < 4096
        assert "hello" not in json.dumps(reply)
    model_server.assert_consumed()
    view = bench.api.sessions.run(ALICE, bench.session_id, run_id)
    assert view.status == "completed" and view.answer == "Copied the notes."
    session_dir = bench.root / "spaces" / bench.space_id / "agents" / bench.agent_id / \
        "sessions" / bench.session_id / "main"
    assert (session_dir / "copy.txt").read_text() == "hello\n"
    page = bench.api.sessions.messages(ALICE, bench.session_id)
    assert page.items  # the session stream was kept current
    session = bench.api.store.sessions.get(bench.session_id)
    assert session is not None and session.value.active_run is None


def test_each_invocation_runs_one_model_call_and_then_its_tools(
        bench: Bench, model_server: OpenAICompatibleServer) -> None:
    """One model/tool cycle per invocation: a model call and the tool call it asked for
    are committed by the same invocation; no invocation sends two model requests."""
    run_id = ask(bench)
    per_invocation: list[tuple[int, str]] = []

    def counted(payload: dict[str, Any]) -> dict[str, Any]:
        before = len(model_server.bodies)
        reply = bench.service.handle(payload)
        per_invocation.append((len(model_server.bodies) - before, reply["next"]))
        return reply

    replies = drive(bench, run_id, invoke=counted)
    assert replies[-1]["status"] == "completed"
    model_server.assert_consumed()
    # 7 model requests (5 tool calls, the answer, the review), 7 invocations: the one
    # that dispatched the command ended there, the next recorded it and went on
    assert [calls for calls, _ in per_invocation] == [1] * 7
    assert [n for _, n in per_invocation].count("command") == 1


def test_an_invocation_near_its_timeout_stops_after_one_step(
        bench: Bench, model_server: OpenAICompatibleServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Less time left than the reserve: each invocation commits one step and hands back
    (``continue``), and the run still completes."""
    run_id = ask(bench)

    steps: list[int] = []
    real_step = Engine.step

    async def counted_step(self: Engine, **kwargs: Any) -> Any:
        steps[-1] += 1
        return await real_step(self, **kwargs)

    monkeypatch.setattr(Engine, "step", counted_step)

    def hurried(payload: dict[str, Any]) -> dict[str, Any]:
        steps.append(0)
        return bench.service.handle(payload,
                                    remaining_seconds=bench.service.reserve_seconds - 1)

    replies = drive(bench, run_id, invoke=hurried)
    assert replies[-1]["status"] == "completed"
    model_server.assert_consumed()
    assert set(steps) == {1} and len(steps) > len(model_server.bodies)


def test_a_stale_generation_does_nothing(bench: Bench) -> None:
    run_id = ask(bench)
    fence.advance(bench.api.store, run_id)  # generation 2 was started meanwhile
    reply = bench.service.handle({"run_id": run_id, "generation": 1, "command": None})
    assert reply["next"] == "stale"
    summary = bench.api.tracker.summary(run_id)
    assert summary is not None and summary.version == 1  # nothing was stepped


def test_every_invocation_delivered_twice_repeats_no_side_effect(
        bench: Bench, model_server: OpenAICompatibleServer) -> None:
    """Each step is invoked twice, by two containers (a duplicate delivery, a retry of
    an invocation that had succeeded): every model call and the command happen once."""
    run_id = ask(bench)
    first, second = bench.service, bench.container()

    def twice(payload: dict[str, Any]) -> dict[str, Any]:
        reply = first.handle(payload)
        second.handle(payload)
        return reply

    try:
        replies = drive(bench, run_id, invoke=twice)
    finally:
        second.close()
    assert replies[-1]["status"] == "completed"
    model_server.assert_consumed()
    assert model_server.unexpected == []
    assert len(bench.ran) == 1


def test_rollover_moves_to_the_next_generation(bench: Bench) -> None:
    bench.service.rollover_cycles = 2
    run_id = ask(bench)
    replies = drive(bench, run_id)
    rollovers = [r for r in replies if r["next"] == "rollover"]
    assert rollovers and replies[-1]["status"] == "completed"
    assert rollovers[0]["next_execution"] == {"name": f"{run_id}-g2", "generation": 2}
    assert max(r["generation"] for r in replies) == len(rollovers) + 1


BAD_EVENTS: list[dict[str, object]] = [
    {}, {"run_id": "x", "generation": 1}, {"run_id": "run_abc", "generation": 0},
    {"run_id": "run_abc", "generation": True},
    {"run_id": "run_abc", "generation": 1, "command": {"request_id": "../x"}},
    {"run_id": "run_abc", "generation": 1, "command": None, "failure": "x"},
    {"run_id": "run_abc", "generation": 1, "command": None},  # no such run
]


def test_bad_input_is_refused(bench: Bench) -> None:
    for event in BAD_EVENTS:
        with pytest.raises(StepInputError):
            bench.service.handle(event)


def test_a_retried_rollover_step_answers_the_same_rollover(bench: Bench) -> None:
    """The rollover step's reply was lost and the state machine retried it: the same
    next execution is named (not ``stale``, which would leave the run undriven)."""
    bench.service.rollover_cycles = 2
    run_id = ask(bench)
    payload: dict[str, Any] = {"run_id": run_id, "generation": 1, "command": None}
    reply = bench.service.handle(payload)
    while reply["next"] != "rollover":
        assert reply["next"] == "continue"
        reply = bench.service.handle(payload)
    again = bench.service.handle(payload)
    assert again["next"] == "rollover"
    assert again["next_execution"] == reply["next_execution"] == {
        "name": f"{run_id}-g2", "generation": 2}
    bench.service.handle({"run_id": run_id, "generation": 2, "command": None})
    late = bench.service.handle(payload)  # generation 2 claimed the run: 1 is stale now
    assert late["next"] == "stale"


def test_a_command_task_without_a_result_blocks_and_is_resolved(
        bench: Bench, model_server: OpenAICompatibleServer) -> None:
    """The task stopped without writing its result (OOM, stopped by hand): the next step
    finds the marker without a result and blocks with tool_outcome_unknown; the verdict
    (recorded by the API, which has no workspace) is applied and the marker released by
    the next step of generation 2, and the run completes."""
    run_id = ask(bench)
    payload: dict[str, Any] = {"run_id": run_id, "generation": 1, "command": None}
    reply = bench.service.handle(payload)
    while reply["next"] != "command":
        reply = bench.service.handle(payload)
    request_id = reply["command"]["request_id"]
    after = bench.service.handle({"run_id": run_id, "generation": 1,
                                  "command": {"request_id": request_id}})
    assert after["next"] == "blocked"
    bench.end_execution(run_id, 1)
    view = bench.api.sessions.run(ALICE, bench.session_id, run_id)
    assert view.way_out == "resolve" and view.unknown is not None
    assert view.unknown["kind"] == "command"
    session = bench.api.store.sessions.get(bench.session_id)
    assert session is not None and session.value.active_run is None
    bench.api.sessions.resolve(ALICE, bench.session_id, run_id, "did_not_run")
    replies = drive(bench, run_id, 2)
    assert replies[-1]["status"] == "completed"
    markers = list(bench.root.glob(".agentloom-locks/*/markers/*.json"))
    assert markers == []  # released after the verdict's commit
    assert bench.ran == []  # the command never ran


def test_an_unexpected_error_reaches_the_state_machine_without_its_message(
        bench: Bench, caplog: pytest.LogCaptureFixture) -> None:
    from agentloom.aws.steps import StepFailed

    run_id = ask(bench)

    content = "".join(["the sec", "ret question"])  # not on a source line of the trace

    def broken(snapshot: object) -> object:
        raise RuntimeError(content)

    host = bench.service.host
    host.ports = dataclasses.replace(host.ports, models=broken)  # type: ignore[arg-type]
    with pytest.raises(StepFailed) as failed:
        bench.service.handle({"run_id": run_id, "generation": 1, "command": None})
    assert "secret" not in str(failed.value) and "RuntimeError" in str(failed.value)
    assert "secret" not in caplog.text
