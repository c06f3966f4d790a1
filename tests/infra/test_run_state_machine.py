"""The run state machine as synthesized by CDK, executed by moto's Step Functions
interpreter end to end.

Its Lambda tasks (``Step``, ``RecordFailure``) reach a local HTTP endpoint
(``AWS_ENDPOINT_URL_LAMBDA``) that calls the real step service in-process; DynamoDB, KMS,
EFS and ECS are moto; the model is a scripted OpenAI-compatible server on 127.0.0.1; the
API is the real ``agentloom.handlers.api`` fed API Gateway v2 events. What moto cannot
execute, and how it is covered here:

- ``ecs:runTask.sync`` and ``states:startExecution`` (the rollover): moto's interpreter
  does not convert the integrations' parameter casing (getmoto/moto#10076);
  ``casing_shim`` maps parameters and responses onto botocore's shapes. The moto task
  stops at once and runs nothing, so the shim plays the container
  (``harness.Container``: ``python -m agentloom.command_entry`` on the directories the
  session's access points name) when RunTask is called. moto also sets ``StartedBy`` to
  "AWS Step Functions" for ``.sync``; cancel's ``ListTasks startedBy`` is covered in
  tests/functional/aws/test_api_aws.py.
- A Lambda killed by its timeout: the endpoint answers the function error
  ``Lambda.Unknown`` for the invocation the test kills (after the model request was
  sent), which is how Step Functions names a timeout; the retry and the Catch are moto's.
- Retry waits are real sleeps in moto: patched to return at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.state_machine import Deployment, Killed, open_deployment

from agentloom_runtime.testing import ScriptedModel

PLAN_OPEN = {"steps": [{"id": "1", "title": "write", "status": "in_progress"}]}
PLAN_DONE = {"steps": [{"id": "1", "title": "write", "status": "completed"}]}
AGENT = {"prompt": "You work in the workspace.", "model": {"model": "scripted-model"},
         "tools": ["workspace", "workspace_command"], "mode": "plan"}


@pytest.fixture
def script() -> list[Any]:
    return [
        ScriptedModel.call("update_plan", PLAN_OPEN, id="c1"),
        ScriptedModel.call("workspace_write", {"path": "a.txt", "content": "alpha\n"},
                           id="c2"),
        ScriptedModel.call("workspace_command", {"command": "wc -l a.txt > n.txt"},
                           id="c3"),
        ScriptedModel.call("workspace_read", {"path": "n.txt"}, id="c4"),
        ScriptedModel.call("update_plan", PLAN_DONE, id="c5"),
        ScriptedModel.answer("One line."),
        ScriptedModel.verdict("complete"),
    ]


@pytest.fixture
def deployment(synthesized: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
               script: list[Any]) -> Iterator[Deployment]:
    with open_deployment(synthesized, monkeypatch, tmp_path, script, AGENT) as opened:
        yield opened


def test_run_command_keeps_its_result_out_of_the_state(synthesized: Any) -> None:
    """The task description must not replace the state (AfterCommand reads $.run_id)."""
    values = {f"{lid}.Arn": f"arn:aws:test:::{lid}" for lid in synthesized.resources}
    values |= {lid: f"ref-{lid}" for lid in synthesized.resources}
    values |= {f"{lid}.GroupId": f"sg-{lid}" for lid in synthesized.resources}
    run_command = synthesized.definition(values)["States"]["RunCommand"]
    assert "ResultPath" in run_command and run_command["ResultPath"] != "$"


def test_a_run_with_a_plan_files_a_command_and_rollovers_completes(
        deployment: Deployment) -> None:
    run_id = deployment.ask("How many lines?")
    executions = deployment.settle(run_id)
    assert [e["status"] for e in executions] == ["SUCCEEDED"] * len(executions)
    assert len(executions) >= 2  # rolled over (4 commits per generation)
    view = deployment.view(run_id)
    assert view["status"] == "completed" and view["answer"] == "One line."
    deployment.model.assert_consumed()
    (task,) = deployment.seen
    assert task["LaunchType"] == "FARGATE" and task["PlatformVersion"] == "1.4.0"
    assert task["NetworkConfiguration"]["AwsvpcConfiguration"]["AssignPublicIp"] == \
        "DISABLED"
    assert task["TaskDefinition"].startswith("arn:aws:ecs:")
    names = {name for name, _ in deployment.endpoint.calls}
    assert all(name.startswith("arn:aws:lambda:") for name in names)
    out = deployment.bench.root.glob("spaces/*/agents/*/sessions/*/main/n.txt")
    assert [p.read_text().split()[0] for p in out] == ["1"]


def test_lambda_service_errors_are_retried_without_repeating_a_step(
        deployment: Deployment) -> None:
    """A throttled invocation (429 before the handler ran) and a lost reply (500 after
    it ran) are retried by the state machine; the retried step goes on from the
    committed head: every model call and the command happen once, the run completes."""
    deployment.endpoint.faults = {1: "throttle", 3: "lost", 6: "lost"}
    run_id = deployment.ask("How many lines?")
    executions = deployment.settle(run_id)
    assert [e["status"] for e in executions] == ["SUCCEEDED"] * len(executions)
    assert deployment.view(run_id)["status"] == "completed"
    deployment.model.assert_consumed()
    assert deployment.model.unexpected == []
    assert len(deployment.seen) == 1 and len(deployment.bench.ran) == 1
    history = deployment.bench.aws.sfn.get_execution_history(
        executionArn=executions[0]["executionArn"])["events"]
    failed = [e for e in history if e["type"] == "TaskFailed"]
    assert {e["taskFailedEventDetails"]["error"] for e in failed} == {
        "Lambda.TooManyRequestsException", "Lambda.ServiceException"}


class Dying:
    """The step function's model gateway, which can die mid call: the request was
    recorded as sent (committed) and the container is gone before any answer."""

    def __init__(self, real: Any, kills: dict[str, int]) -> None:
        self.real, self.kills = real, kills
        self.module_id = getattr(real, "module_id", "dying/v1")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    async def invoke(self, request: Any) -> Any:
        if self.kills["left"]:
            self.kills["left"] -= 1
            raise Killed
        return await self.real.invoke(request)

    async def aclose(self) -> None:
        await self.real.aclose()


@pytest.mark.parametrize("script", [[ScriptedModel.call("update_plan", PLAN_DONE, id="p1"),
                                      ScriptedModel.answer("Done."),
                                      ScriptedModel.verdict("complete")]])
def test_a_step_killed_mid_model_call_blocks_then_resolves_through_the_api(
        deployment: Deployment) -> None:
    bench = deployment.bench
    kills = {"left": 1}
    host = bench.service.host
    real_factory = host.ports.models
    host.ports = dataclasses.replace(host.ports,
                                     models=lambda snap: Dying(real_factory(snap), kills))
    deployment.endpoint.on_kill = bench.new_step_service  # the container is gone
    run_id = deployment.ask("Q")
    (first,) = deployment.settle(run_id)
    assert first["status"] == "FAILED"
    history = bench.aws.sfn.get_execution_history(executionArn=first["executionArn"])
    failed = [e for e in history["events"] if e["type"] == "LambdaFunctionFailed"
              or e["type"] == "TaskFailed"]
    assert failed, [e["type"] for e in history["events"]]
    view = deployment.view(run_id)
    assert view["status"] == "blocked" and view["way_out"] == "resolve", view
    assert view["unknown"]["kind"] == "model"
    status, body = deployment.api(
        "POST", f"/api/v1/sessions/{bench.session_id}/runs/{run_id}/resolve",
        {"verdict": "send_again"})
    assert status == 200, body
    executions = deployment.settle(run_id)
    assert executions[1]["name"] == f"{run_id}-g2"  # the resolve started generation 2
    assert [e["status"] for e in executions[1:]] == ["SUCCEEDED"] * (len(executions) - 1)
    final = deployment.view(run_id)
    assert final["status"] == "completed", final["error"]
    assert final["answer"] == "Done."
    deployment.model.assert_consumed()


def test_a_model_tool_cycle_enters_two_states(deployment: Deployment) -> None:
    """As Step Functions bills it, from the executions' own history: each model/tool
    cycle is one Step and one Next?; the command adds RunCommand and AfterCommand, the
    end one Succeed — no state per engine step."""
    deployment.bench.service.rollover_cycles = 1000  # no rollover in this run
    run_id = deployment.ask("How many lines?")
    executions = deployment.settle(run_id)
    assert [e["status"] for e in executions] == ["SUCCEEDED"]
    events = deployment.bench.aws.sfn.get_execution_history(
        executionArn=executions[0]["executionArn"], maxResults=1000)["events"]
    entered = [e["stateEnteredEventDetails"]["name"] for e in events
               if e["type"].endswith("StateEntered")]
    cycles = len(deployment.model.bodies)  # 7 model requests, each with its tool call
    assert entered.count("Step") == entered.count("Next?") == cycles
    assert len(entered) == 2 * cycles + 2 + 1
