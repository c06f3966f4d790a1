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
import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from functional.aws.harness import (
    REGION,
    Bench,
    Container,
    clients,
    fake_credentials,
    mock_config,
    open_bench,
)
from moto import mock_aws

from agentloom.api.app import build_app
from agentloom.handlers import api as api_handler
from agentloom.platform.identity import JwtClaims
from agentloom_runtime.testing import ScriptedModel
from agentloom_runtime.testing.openai_server import OpenAICompatibleServer

STEP = "agentloom.handlers.step.handler"
MACHINE = "agentloom-test-run"
MACHINE_ARN = f"arn:aws:states:{REGION}:123456789012:stateMachine:{MACHINE}"
PLAN_OPEN = {"steps": [{"id": "1", "title": "write", "status": "in_progress"}]}
PLAN_DONE = {"steps": [{"id": "1", "title": "write", "status": "completed"}]}
AGENT = {"prompt": "You work in the workspace.", "model": {"model": "scripted-model"},
         "tools": ["workspace", "workspace_command"], "mode": "plan"}


class Killed(BaseException):
    """The step function's container dies (a timeout): nothing after this runs."""


# -- the Lambda endpoint -------------------------------------------------------------------


class LambdaEndpoint:
    """``POST /2015-03-31/functions/{name}/invocations`` → ``invoke(event)``."""

    def __init__(self, invoke: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.invoke = invoke
        self.on_kill: Callable[[], Any] | None = None
        # invocation numbers (1-based) answered with a Lambda service error: "throttle"
        # before the handler runs (429), "lost" after it ran (500: its reply is lost)
        self.faults: dict[int, str] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                name = urllib.parse.unquote(self.path.split("/functions/", 1)[1]
                                            .split("/invocations", 1)[0])
                event = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.calls.append((name, event))
                number = len(owner.calls)
                headers = {"x-amzn-RequestId": f"req-{number}"}
                fault = owner.faults.get(number)
                if fault == "throttle":
                    self._error(429, "TooManyRequestsException", headers)
                    return
                try:
                    body = owner.invoke(event)
                except Killed:
                    if owner.on_kill is not None:
                        owner.on_kill()
                    body = {"errorType": "Lambda.Unknown", "errorMessage": "Task timed out"}
                    headers["X-Amz-Function-Error"] = "Unhandled"
                except Exception as exc:
                    body = {"errorType": type(exc).__name__, "errorMessage": str(exc)[:300]}
                    headers["X-Amz-Function-Error"] = "Unhandled"
                if fault == "lost":
                    self._error(500, "ServiceException", headers)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, status: int, kind: str, headers: dict[str, str]) -> None:
                data = json.dumps({"Type": "Service", "message": kind}).encode()
                self.send_response(status)
                for key, value in {**headers, "x-amzn-ErrorType": kind}.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- the ECS .sync shim ----------------------------------------------------------------------


def casing_shim(monkeypatch: pytest.MonkeyPatch, bench: Bench) -> list[dict[str, Any]]:
    """Parameters and responses of moto's ECS and Step Functions integrations in
    botocore's shapes (moto leaves the conversion out), and the container played when
    RunTask is called. Returns the RunTask parameters seen."""
    import boto3
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service as base_module,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service_ecs as ecs_module,
    )

    models = {name: boto3.client(name, region_name=REGION).meta.service_model
              for name in ("ecs", "stepfunctions")}
    seen: list[dict[str, Any]] = []
    container = Container(bench)

    def operation(self: Any, action: str | None) -> Any:
        model = models.get(self._get_boto_service_name())
        if model is None:
            return None
        names = {camel_to_snake(n): n for n in model.operation_names}
        return model.operation_model(names[action or self._get_boto_service_action()])

    def params(self: Any, parameters: dict[str, Any], boto_service_name: Any = None,
               service_action_name: Any = None) -> None:
        found = operation(self, service_action_name)
        if found is not None:
            self._to_boto_request(parameters, found.input_shape)

    def response(self: Any, response: Any, boto_service_name: Any = None,
                 service_action_name: Any = None) -> None:
        found = operation(self, service_action_name)
        if found is not None:
            self._from_boto_response(response, found.output_shape)

    cls = ecs_module.StateTaskServiceEcs
    original = cls._before_eval_execution

    def before(self: Any, env: Any, resource_runtime_part: Any, raw_parameters: dict[str, Any],
               state_credentials: Any) -> None:
        original(self, env, resource_runtime_part, raw_parameters, state_credentials)
        seen.append(json.loads(json.dumps(raw_parameters)))
        environment = raw_parameters["Overrides"]["ContainerOverrides"][0]["Environment"]
        request_id = next(e["Value"] for e in environment if e["Name"] == "REQUEST_ID")
        container.run({"request_id": request_id,
                       "task_definition": raw_parameters["TaskDefinition"],
                       "overrides": raw_parameters["Overrides"]})

    base = base_module.StateTaskService
    monkeypatch.setattr(base, "_normalise_parameters", params)
    monkeypatch.setattr(base, "_normalise_response", response)
    monkeypatch.setattr(cls, "_before_eval_execution", before)
    return seen


def camel_to_snake(name: str) -> str:
    from botocore import xform_name

    return str(xform_name(name))


# -- the deployment ------------------------------------------------------------------------


class Deployment:
    def __init__(self, bench: Bench, endpoint: LambdaEndpoint, seen: list[dict[str, Any]],
                 model: OpenAICompatibleServer) -> None:
        self.bench, self.endpoint, self.seen, self.model = bench, endpoint, seen, model
        api_handler.configure(build_app(bench.api.admin, bench.api.sessions, JwtClaims()))

    def api(self, method: str, path: str, body: Any = None, user: str = "alice"
            ) -> tuple[int, dict[str, Any]]:
        event = {"version": "2.0", "routeKey": "$default", "rawPath": path,
                 "rawQueryString": "", "headers": {"content-type": "application/json"},
                 "requestContext": {"http": {"method": method, "path": path,
                                             "sourceIp": "127.0.0.1"},
                                    "authorizer": {"jwt": {"claims": {"sub": user}}},
                                    "requestId": "r", "stage": "$default"},
                 "body": json.dumps(body) if body is not None else None,
                 "isBase64Encoded": False}
        out = api_handler.handler(event, None)
        return out["statusCode"], json.loads(out["body"]) if out.get("body") else {}

    def ask(self, question: str) -> str:
        status, body = self.api("POST", f"/api/v1/sessions/{self.bench.session_id}/runs",
                                {"question": question})
        assert status == 201, body
        return str(body["run"]["run_id"])

    def executions(self, run_id: str) -> list[dict[str, Any]]:
        listed = self.bench.aws.sfn.list_executions(stateMachineArn=MACHINE_ARN)["executions"]
        return sorted((dict(e) for e in listed if e["name"].startswith(run_id)),
                      key=lambda e: int(e["name"].rsplit("-g", 1)[1]))

    def settle(self, run_id: str, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Wait until no execution of the run is running (rollovers included)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.executions(run_id)
            if found and all(e["status"] != "RUNNING" for e in found):
                time.sleep(0.2)  # a rollover's next execution may be starting
                again = self.executions(run_id)
                if len(again) == len(found) and all(e["status"] != "RUNNING" for e in again):
                    return again
            time.sleep(0.05)
        raise AssertionError(f"the executions of {run_id} did not settle")

    def view(self, run_id: str) -> dict[str, Any]:
        status, body = self.api("GET", f"/api/v1/sessions/{self.bench.session_id}/runs/"
                                       f"{run_id}")
        assert status == 200, body
        return body


def _values(synthesized: Any, bench: Bench) -> dict[str, str]:
    values: dict[str, str] = {}
    for lid, resource in synthesized.resources.items():
        kind = resource["Type"]
        values[lid] = f"ref-{lid}"
        values[f"{lid}.Arn"] = f"arn:aws:lambda:{REGION}:123456789012:function:{lid}" \
            if kind == "AWS::Lambda::Function" else f"arn:aws:test:::{lid}"
        if kind == "AWS::EC2::Subnet":
            values[lid] = bench.resources.subnets[0]
        if kind == "AWS::EC2::SecurityGroup":
            values[f"{lid}.GroupId"] = bench.resources.security_group
        if kind == "AWS::ECS::Cluster":
            values[f"{lid}.Arn"] = bench.resources.cluster_arn
    return values


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
    fake_credentials(monkeypatch)
    # retry waits are real sleeps in moto: give the retrier its own clock (patching
    # ``time.sleep`` itself would turn every sleep of the process — the settle loop's
    # too — into a busy loop that starves the execution of the GIL)
    monkeypatch.setattr("moto.stepfunctions.parser.asl.component.common.retry.retrier_decl."
                        "time", SimpleNamespace(sleep=lambda seconds: None))
    model = OpenAICompatibleServer(script).start()
    with mock_aws(config=mock_config()):  # type: ignore[call-overload]
        aws = clients()
        bench = open_bench(aws, tmp_path, model.base_url, state_machine_arn=MACHINE_ARN,
                           rollover=4)
        bench.agent(AGENT)
        bench.service.rollover_cycles = 4
        endpoint = LambdaEndpoint(lambda event: bench.service.handle(event))
        monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", endpoint.url)
        definition = synthesized.definition(_values(synthesized, bench))
        aws.sfn.create_state_machine(name=MACHINE, definition=json.dumps(definition),
                                     roleArn="arn:aws:iam::123456789012:role/sfn")
        seen = casing_shim(monkeypatch, bench)
        try:
            yield Deployment(bench, endpoint, seen, model)
        finally:
            api_handler.configure(None)
            endpoint.close()
            bench.service.close()
            model.stop()


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
