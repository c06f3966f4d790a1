"""Transient AWS faults on the synthesized run state machine, executed by moto: nothing
stalls and no operator is needed (issue 19, "Nothing stalls").

- RunTask throttled → retried by ``RunCommand``'s Retry; the command runs once.
- A task that never started (``States.TaskFailed`` with the stopped task's description,
  or ``AmazonECS.Unknown`` — RunTask's ``Failures`` — until the retries are spent): the
  step records the command as not run (``sandbox_not_started``), the model reads why and
  the run completes; nothing blocks, no verdict.
- StartExecution of the Rollover throttled → retried → the next generation completes the
  run; ``ExecutionAlreadyExists`` (a retried start whose first call went through) is
  success; a StartExecution that keeps failing fails the execution and leaves the run
  ``interrupted`` with the ``resume`` way out, which the resume route takes.

The faults are raised inside moto's integrations (``FailureEventException`` carrying the
error name Step Functions reports on AWS, or a botocore ``ClientError`` for
StartExecution, which moto's integration names ``StepFunctions.<Code>Exception``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from botocore.exceptions import ClientError
from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import (
    CustomErrorName,
)
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
    FailureEvent,
    FailureEventException,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
    StatesErrorName,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
    StatesErrorNameType,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
    state_task_service_ecs as ecs_module,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
    state_task_service_sfn as sfn_module,
)
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
from support.state_machine import Deployment, open_deployment

from agentloom_runtime.testing import ScriptedModel

PLAN_OPEN = {"steps": [{"id": "1", "title": "count", "status": "in_progress"}]}
PLAN_DONE = {"steps": [{"id": "1", "title": "count", "status": "completed"}]}
AGENT = {"prompt": "You work in the workspace.", "model": {"model": "scripted-model"},
         "tools": ["workspace", "workspace_command"], "mode": "plan"}
NEVER_STARTED = json.dumps({
    "LastStatus": "STOPPED", "StopCode": "TaskFailedToStart",
    "StoppedReason": "CannotPullContainerError: pull image manifest has been retried 5 "
                     "time(s)",
    "Containers": [{"Name": "command", "LastStatus": "STOPPED"}]})


@pytest.fixture
def script() -> list[Any]:
    return [ScriptedModel.call("update_plan", PLAN_OPEN, id="c1"),
            ScriptedModel.call("workspace_command", {"command": "echo hi > hi.txt"}, id="c2"),
            ScriptedModel.call("update_plan", PLAN_DONE, id="c3"),
            ScriptedModel.answer("Done."),
            ScriptedModel.verdict("complete")]


@pytest.fixture
def deployment(synthesized: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
               script: list[Any]) -> Iterator[Deployment]:
    with open_deployment(synthesized, monkeypatch, tmp_path, script, AGENT,
                         rollover=2) as opened:
        yield opened


def _failure(env: Any, error: str, cause: str) -> FailureEventException:
    name = StatesErrorName(typ=StatesErrorNameType.StatesTaskFailed) \
        if error == "States.TaskFailed" else CustomErrorName(error)
    return FailureEventException(FailureEvent(
        env=env, error_name=name, event_type=HistoryEventType.TaskFailed,
        # one kind of details set (the TypedDict lists every kind as required)
        event_details=cast(EventDetails, {"taskFailedEventDetails": TaskFailedEventDetails(
            error=error, cause=cause, resource="runTask.sync", resourceType="ecs")})))


def _run_task_fails(monkeypatch: pytest.MonkeyPatch, faults: list[tuple[str, str]]
                    ) -> list[str]:
    """The next RunTask calls fail with ``faults`` (error, cause), in order, before the
    shim's container runs; afterwards RunTask works. Returns the errors raised."""
    cls = ecs_module.StateTaskServiceEcs
    shimmed = cls._before_eval_execution  # casing_shim's: it plays the container
    raised: list[str] = []

    def before(self: Any, *args: Any, **kwargs: Any) -> None:
        if faults:
            error, cause = faults.pop(0)
            raised.append(error)
            raise _failure(kwargs["env"] if "env" in kwargs else args[0], error, cause)
        shimmed(self, *args, **kwargs)

    monkeypatch.setattr(cls, "_before_eval_execution", before)
    return raised


def _start_execution_fails(monkeypatch: pytest.MonkeyPatch,
                           codes: list[tuple[str, bool]]) -> list[str]:
    """The next StartExecution calls (the Rollover's) raise a ``ClientError`` with each
    ``(code, after_call)`` of ``codes`` in turn: before the call, or after it went
    through (``after_call``: its reply is lost)."""
    cls = sfn_module.StateTaskServiceSfn
    real = cls._eval_service_task
    raised: list[str] = []

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not codes:
            return real(self, *args, **kwargs)
        code, after_call = codes.pop(0)
        if after_call:
            real(self, *args, **kwargs)
        raised.append(code)
        raise ClientError(cast(Any, {"Error": {"Code": code, "Message": "injected"},
                                     "ResponseMetadata": {"HTTPStatusCode": 400,
                                                          "RequestId": "r"}}),
                          "StartExecution")

    monkeypatch.setattr(cls, "_eval_service_task", call)
    return raised


def _failed_errors(deployment: Deployment, execution: dict[str, Any]) -> list[str]:
    events = deployment.bench.aws.sfn.get_execution_history(
        executionArn=execution["executionArn"], maxResults=1000)["events"]
    return [e["taskFailedEventDetails"]["error"] for e in events
            if e["type"] == "TaskFailed"]


def _tool_results(deployment: Deployment) -> list[str]:
    """The tool messages the model was sent, as text."""
    return [json.dumps(m) for body in deployment.model.bodies
            for m in body.get("messages", []) if m.get("role") == "tool"]


def test_a_throttled_run_task_is_retried_and_the_command_runs_once(
        deployment: Deployment, monkeypatch: pytest.MonkeyPatch) -> None:
    raised = _run_task_fails(monkeypatch, [
        ("ECS.AmazonECSException", "Rate exceeded (Error Code: ThrottlingException)")])
    run_id = deployment.ask("Say hi")
    executions = deployment.settle(run_id)
    assert [e["status"] for e in executions] == ["SUCCEEDED"] * len(executions)
    assert raised == ["ECS.AmazonECSException"]
    assert deployment.bench.ran and len(deployment.bench.ran) == 1
    assert deployment.view(run_id)["status"] == "completed"
    assert not any("sandbox_not_started" in text for text in _tool_results(deployment))


@pytest.mark.parametrize("faults", [
    [("States.TaskFailed", NEVER_STARTED)],
    [("AmazonECS.Unknown", "Failures: RESOURCE:FARGATE capacity unavailable")] * 6,
], ids=["task-failed-to-start", "no-capacity-after-retries"])
def test_a_task_that_never_started_is_a_command_not_run_and_the_run_goes_on(
        deployment: Deployment, monkeypatch: pytest.MonkeyPatch,
        faults: list[tuple[str, str]]) -> None:
    raised = _run_task_fails(monkeypatch, list(faults))
    run_id = deployment.ask("Say hi")
    executions = deployment.settle(run_id)
    assert [e["status"] for e in executions] == ["SUCCEEDED"] * len(executions)
    assert raised == [error for error, _ in faults]  # retried only while nothing started
    assert deployment.bench.ran == []  # zero commands ran
    view = deployment.view(run_id)
    assert view["status"] == "completed" and view["way_out"] != "resolve", view
    assert view.get("unknown") is None
    deployment.model.assert_consumed()
    results = {t for t in _tool_results(deployment) if "sandbox_not_started" in t}
    assert results and all("did not run" in text for text in results)


def test_a_throttled_rollover_is_retried_and_the_run_completes(
        deployment: Deployment, monkeypatch: pytest.MonkeyPatch) -> None:
    raised = _start_execution_fails(monkeypatch, [("ThrottlingException", False)] * 2)
    run_id = deployment.ask("Say hi")
    executions = deployment.settle(run_id)
    assert len(executions) >= 2 and raised == ["ThrottlingException"] * 2
    assert [e["status"] for e in executions] == ["SUCCEEDED"] * len(executions)
    assert _failed_errors(deployment, executions[0]).count(
        "StepFunctions.ThrottlingExceptionException") == 2
    assert deployment.view(run_id)["status"] == "completed"
    deployment.model.assert_consumed()


def test_a_rollover_whose_start_went_through_counts_as_started(
        deployment: Deployment, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first StartExecution started the next generation but its reply was lost; the
    retry's ExecutionAlreadyExists is caught as success."""
    raised = _start_execution_fails(monkeypatch, [("ThrottlingException", True),
                                                  ("ExecutionAlreadyExists", False)])
    run_id = deployment.ask("Say hi")
    executions = deployment.settle(run_id)
    assert raised == ["ThrottlingException", "ExecutionAlreadyExists"]
    assert [e["status"] for e in executions] == ["SUCCEEDED"] * len(executions)
    assert len(executions) >= 2 and deployment.view(run_id)["status"] == "completed"


def test_a_rollover_that_keeps_failing_leaves_the_run_to_resume(
        deployment: Deployment, monkeypatch: pytest.MonkeyPatch) -> None:
    codes = [("ThrottlingException", False)] * 7  # the first call and its 6 retries
    _start_execution_fails(monkeypatch, codes)
    run_id = deployment.ask("Say hi")
    (first,) = deployment.settle(run_id)
    assert first["status"] == "FAILED" and codes == []
    view = deployment.view(run_id)
    assert view["status"] == "interrupted" and view["way_out"] == "resume", view
    status, events = deployment.api(
        "GET", f"/api/v1/sessions/{deployment.bench.session_id}/runs/{run_id}/events")
    assert status == 200, events
    failed = [e["data"] for e in events["items"] if e["type"] == "run.step_failed"]
    assert failed == [{"run_id": run_id, "generation": 1, "during": "rollover",
                       "code": "StepFunctions.ThrottlingExceptionException"}]
    status, body = deployment.api(
        "POST", f"/api/v1/sessions/{deployment.bench.session_id}/runs/{run_id}/resume", {})
    assert status == 200, body
    executions = deployment.settle(run_id)
    assert [e["status"] for e in executions[1:]] == ["SUCCEEDED"] * (len(executions) - 1)
    assert deployment.view(run_id)["status"] == "completed"
    deployment.model.assert_consumed()
