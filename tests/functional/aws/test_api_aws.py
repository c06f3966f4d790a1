"""The API function wired for AWS (moto): the environment picks DynamoDB, KMS and Step
Functions; asks start executions with derived names; cancel stops the execution and the
session's sandbox task and marks the run; a duplicate start starts nothing new."""

from __future__ import annotations

import json
from typing import Any

import pytest
from functional.aws.harness import ALICE, Bench, drive, event

from agentloom.aws import fence
from agentloom.aws.config import AwsConfig
from agentloom.handlers import api as api_handler
from agentloom.platform.errors import Conflict
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.testing.openai_server import OpenAICompatibleServer

ENV = {"AGENTLOOM_CHECKPOINT_TABLE": "c", "AGENTLOOM_PLATFORM_TABLE": "p",
       "AGENTLOOM_KMS_KEY_ID": "arn:aws:kms:us-east-1:1:key/k",
       "AGENTLOOM_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:1:stateMachine:m",
       "AGENTLOOM_STAGE": "t", "AGENTLOOM_WORKSPACE_ROOT": "/mnt/workspaces",
       "AGENTLOOM_EFS_FILE_SYSTEM_ID": "fs-1", "AGENTLOOM_SANDBOX_CLUSTER": "arn:c",
       "AGENTLOOM_SANDBOX_FAMILY_PREFIX": "p-sbx", "AGENTLOOM_SANDBOX_EXECUTION_ROLE_ARN": "r",
       "AGENTLOOM_SANDBOX_TASK_ROLE_ARN": "t",
       "AGENTLOOM_SANDBOX_IMAGE": "i", "AGENTLOOM_SANDBOX_SUBNETS": "subnet-1,subnet-2",
       "AGENTLOOM_SANDBOX_SECURITY_GROUP": "sg-1", "AGENTLOOM_SANDBOX_LOG_GROUP": "/l",
       "AGENTLOOM_SANDBOX_UID": "1000", "AGENTLOOM_SANDBOX_GID": "1000"}


def test_the_contract_parses() -> None:
    config = AwsConfig.from_environ(ENV, sandbox=True)
    sandbox = config.require_sandbox()
    assert sandbox.subnets == ("subnet-1", "subnet-2") and config.rollover_cycles == 500
    assert AwsConfig.from_environ(ENV).sandbox is None  # the api function: none needed
    with pytest.raises(ConfigError):
        AwsConfig.from_environ(ENV).require_sandbox()


def test_the_environment_wires_the_aws_platform(bench: Bench,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    api_env = {k: v for k, v in bench.resources.env.items()
               if not k.startswith(("AGENTLOOM_SANDBOX", "AGENTLOOM_WORKSPACE",
                                    "AGENTLOOM_EFS"))}
    for name, value in api_env.items():
        monkeypatch.setenv(name, value)
    api_handler.configure(None)
    try:
        out = api_handler.handler(event("GET", f"/api/v1/sessions/{bench.session_id}"), None)
        assert out["statusCode"] == 200, out
        assert json.loads(out["body"])["session_id"] == bench.session_id
        out = api_handler.handler(event("POST", f"/api/v1/sessions/{bench.session_id}/runs",
                                        {"question": "Copy the notes"}), None)
        assert out["statusCode"] == 201, out
        run_id = json.loads(out["body"])["run"]["run_id"]
        listed = bench.aws.sfn.list_executions(
            stateMachineArn=api_env["AGENTLOOM_STATE_MACHINE_ARN"])["executions"]
        assert [e["name"] for e in listed] == [f"{run_id}-g1"]
        started = bench.aws.sfn.describe_execution(executionArn=listed[0]["executionArn"])
        assert json.loads(started["input"]) == {"run_id": run_id, "generation": 1,
                                                "command": None}  # no question in it
        other = api_handler.handler(event("GET", f"/api/v1/sessions/{bench.session_id}",
                                          user="mallory"), None)
        assert other["statusCode"] == 404
    finally:
        api_handler.configure(None)


def test_a_second_question_waits_while_an_execution_drives_the_run(bench: Bench) -> None:
    bench.api.sessions.ask(ALICE, bench.session_id, "first")
    with pytest.raises(Conflict) as refused:
        bench.api.sessions.ask(ALICE, bench.session_id, "second")
    assert refused.value.code == "run_active"


def test_a_duplicate_start_starts_nothing_new(bench: Bench) -> None:
    run, _ = bench.api.sessions.ask(ALICE, bench.session_id, "Copy the notes")
    launcher = bench.api.launcher
    assert launcher.start(run.run_id, 1) == f"{run.run_id}-g1"
    listed = bench.aws.sfn.list_executions(
        stateMachineArn=bench.resources.env["AGENTLOOM_STATE_MACHINE_ARN"])["executions"]
    assert len(listed) == 1


def test_cancel_stops_the_execution_and_the_sandbox_task(
        bench: Bench, model_server: OpenAICompatibleServer) -> None:
    run, _ = bench.api.sessions.ask(ALICE, bench.session_id, "Copy the notes")
    replies = drive_until_command(bench, run.run_id)
    command = replies[-1]["command"]
    ecs = bench.aws.ecs
    cluster = bench.resources.cluster_arn
    task = ecs.run_task(cluster=cluster, taskDefinition=command["task_definition"],
                        launchType="FARGATE", startedBy=run.run_id, networkConfiguration={
                            "awsvpcConfiguration": {"subnets": bench.resources.subnets,
                                                    "securityGroups": [
                                                        bench.resources.security_group]}}
                        )["tasks"][0]["taskArn"]
    assert bench.api.launcher.driving(run.run_id)
    view = bench.api.sessions.cancel(ALICE, bench.session_id, run.run_id, "enough")
    assert view.status == "cancelled"
    arn = bench.aws.sfn.list_executions(
        stateMachineArn=bench.resources.env["AGENTLOOM_STATE_MACHINE_ARN"]
    )["executions"][0]["executionArn"]
    assert bench.aws.sfn.describe_execution(executionArn=arn)["status"] == "ABORTED"
    described = ecs.describe_tasks(cluster=cluster, tasks=[task])["tasks"][0]
    assert described["desiredStatus"] == "STOPPED"
    calls = len(model_server.received)
    late = bench.service.handle({"run_id": run.run_id, "generation": 1,
                                "command": {"request_id": command["request_id"]}})
    assert late["next"] == "done" and late["status"] == "cancelled"
    assert len(model_server.received) == calls  # nothing after the cancel


def drive_until_command(bench: Bench, run_id: str) -> list[dict[str, Any]]:
    replies: list[dict[str, Any]] = []
    payload: dict[str, Any] = {"run_id": run_id, "generation": 1, "command": None}
    while not replies or replies[-1]["next"] != "command":
        replies.append(bench.service.handle(payload))
        assert replies[-1]["next"] in ("continue", "command")
    return replies


def test_the_fence_names_executions_and_refuses_old_generations(bench: Bench) -> None:
    run, _ = bench.api.sessions.ask(ALICE, bench.session_id, "Copy the notes")
    assert fence.claim(bench.api.store, run.run_id, 2, 1) is None  # never started
    assert fence.claim(bench.api.store, run.run_id, 1, 1) is not None
    assert fence.execution_name(run.run_id, 3) == f"{run.run_id}-g3"
    with pytest.raises(ValueError):
        fence.execution_name("run_" + "x" * 80, 1)


@pytest.mark.parametrize("missing", ["AGENTLOOM_PLATFORM_TABLE", "AGENTLOOM_KMS_KEY_ID",
                                     "AGENTLOOM_SANDBOX_SUBNETS",
                                     "AGENTLOOM_EFS_FILE_SYSTEM_ID"])
def test_a_missing_variable_is_named(missing: str) -> None:
    env = dict(ENV)
    del env[missing]
    with pytest.raises(ConfigError) as err:
        AwsConfig.from_environ(env, sandbox=True)
    assert missing in err.value.message and err.value.details["variable"] == missing


@pytest.mark.parametrize(("name", "value"), [("AGENTLOOM_ROLLOVER_CYCLES", "0"),
                                             ("AGENTLOOM_ROLLOVER_CYCLES", "lots"),
                                             ("AGENTLOOM_SANDBOX_UID", "-1"),
                                             ("AGENTLOOM_WORKSPACE_ROOT", "/tmp/ws")])
def test_a_malformed_variable_is_named(name: str, value: str) -> None:
    env = dict(ENV, **{name: value})
    with pytest.raises(ConfigError) as err:
        AwsConfig.from_environ(env, sandbox=True)
    assert name in err.value.message


def test_a_failed_start_leaves_the_run_to_resume(bench: Bench) -> None:
    from agentloom.platform.errors import Unavailable

    launcher = bench.api.launcher
    real = launcher.state_machine_arn
    launcher.state_machine_arn = real + "-missing"
    with pytest.raises(Unavailable) as failed:
        bench.api.sessions.ask(ALICE, bench.session_id, "Copy the notes")
    assert failed.value.code == "launch_failed"
    (run,) = bench.api.sessions.runs(ALICE, bench.session_id)
    view = bench.api.sessions.run(ALICE, bench.session_id, run.run_id)
    assert view.status == "interrupted" and view.way_out == "resume"
    launcher.state_machine_arn = real
    resumed = bench.api.sessions.resume(ALICE, bench.session_id, run.run_id)
    assert resumed.status in ("queued", "running")
    listed = bench.aws.sfn.list_executions(stateMachineArn=real)["executions"]
    assert [e["name"] for e in listed] == [f"{run.run_id}-g2"]
    replies = drive(bench, run.run_id, 2)
    assert replies[-1]["status"] == "completed"
