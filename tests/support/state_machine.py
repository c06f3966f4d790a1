"""Running the synthesized run state machine on moto, shared by the infra tests and the
serverless benchmark (tests/benchmarks/bench_serverless.py).

- ``synthesize()`` builds the CDK app (asset bundling skipped) into its template;
  ``Synthesized.definition(values)`` resolves the state machine's ``DefinitionString``
  (``Fn::Join`` of strings, ``Ref`` and ``Fn::GetAtt``; pseudo parameters such as
  ``AWS::Partition`` have defaults) into the ASL dict moto executes. ``values`` maps
  ``"LogicalId"`` (a Ref) or ``"LogicalId.Attribute"`` (a GetAtt) to the string to use
  (``resource_values`` maps every resource onto a bench); an unmapped reference raises
  ``KeyError`` naming it. ``logical_id(type, **properties)`` finds the one resource of a
  type whose properties include the given ones, e.g.
  ``logical_id("AWS::Lambda::Function", Handler="agentloom.handlers.step.handler")``.
- ``LambdaEndpoint``: the local ``lambda:invoke`` endpoint moto's interpreter reaches
  (``AWS_ENDPOINT_URL_LAMBDA``); it calls the real step service in-process.
- ``casing_shim``: the parameter casing moto's ECS and Step Functions integrations leave
  out (getmoto/moto#10076), and the Fargate container played when RunTask is called.
  Any ``pytest.MonkeyPatch`` works (a fixture's, or ``pytest.MonkeyPatch()`` undone by
  its owner).
- ``Deployment``: the API handler fed API Gateway v2 events, and the executions of a run;
  ``open_deployment`` sets one up on moto (the synthesized machine, the bench, the local
  Lambda endpoint, the ECS shim) for a scripted model.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
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

from agentloom.api.app import build_app
from agentloom.handlers import api as api_handler
from agentloom.platform.identity import JwtClaims
from agentloom_runtime.testing.openai_server import OpenAICompatibleServer

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

MACHINE = "agentloom-test-run"
MACHINE_ARN = f"arn:aws:states:{REGION}:123456789012:stateMachine:{MACHINE}"
STEP_HANDLER = "agentloom.handlers.step.handler"
API_HANDLER = "agentloom.handlers.api.handler"


# -- the template ----------------------------------------------------------------------------

PSEUDO = {"AWS::Partition": "aws", "AWS::Region": "us-east-1",
          "AWS::AccountId": "123456789012", "AWS::URLSuffix": "amazonaws.com",
          "AWS::StackName": "AgentLoom-test"}
# a disposable stage (retain=false): one AZ, one NAT, data deleted with the stack
CONTEXT = {"aws:cdk:bundling-stacks": [], "stage": "test", "retain": False}


def resolve(node: Any, values: Mapping[str, str]) -> Any:
    """A CloudFormation value with intrinsics replaced from ``values`` (+ ``PSEUDO``)."""
    if isinstance(node, list):
        return [resolve(item, values) for item in node]
    if not isinstance(node, dict):
        return node
    if set(node) == {"Ref"}:
        name = node["Ref"]
        return values[name] if name in values else _pseudo(name)
    if set(node) == {"Fn::GetAtt"}:
        logical, attribute = node["Fn::GetAtt"]
        return values[f"{logical}.{attribute}"]
    if set(node) == {"Fn::Join"}:
        separator, parts = node["Fn::Join"]
        return separator.join(str(resolve(part, values)) for part in parts)
    return {key: resolve(value, values) for key, value in node.items()}


def _pseudo(name: str) -> str:
    if name not in PSEUDO:
        raise KeyError(f"no value for Ref {name!r}: pass it in values")
    return PSEUDO[name]


@dataclass(frozen=True)
class Synthesized:
    """The synthesized template (a dict) and its ``assertions.Template``."""

    template: dict[str, Any]
    assertions: Any  # aws_cdk.assertions.Template

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.template["Resources"]

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.resources.items() if v["Type"] == resource_type}

    def logical_id(self, resource_type: str, **properties: Any) -> str:
        found = [k for k, v in self.of_type(resource_type).items()
                 if all(v.get("Properties", {}).get(p) == want
                        for p, want in properties.items())]
        if len(found) != 1:
            raise LookupError(f"{len(found)} {resource_type} match {properties}")
        return found[0]

    def definition(self, values: Mapping[str, str]) -> dict[str, Any]:
        """The run state machine's ASL with every reference resolved."""
        (machine,) = self.of_type("AWS::StepFunctions::StateMachine").values()
        result: dict[str, Any] = json.loads(resolve(machine["Properties"]["DefinitionString"],
                                                    values))
        return result

    def function_env(self, handler: str) -> dict[str, Any]:
        lid = self.logical_id("AWS::Lambda::Function", Handler=handler)
        env: dict[str, Any] = self.resources[lid]["Properties"]["Environment"]["Variables"]
        return env


def synthesize() -> dict[str, Any]:
    """The app's template (``build_app``, cdk-nag included, bundling skipped)."""
    import aws_cdk as cdk
    from agentloom_infra import build_app
    from aws_cdk.assertions import Template

    # from_stack runs the app's cdk-nag checks: an unacknowledged finding raises here
    return dict(Template.from_stack(build_app(cdk.App(context=CONTEXT))).to_json())


def synthesized_app() -> Synthesized:
    """``synthesize()`` as a ``Synthesized`` (outside pytest: the benchmark)."""
    from aws_cdk.assertions import Template

    template = synthesize()
    return Synthesized(template=template, assertions=Template.from_json(template))


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
    """``sfn``: the client that lists the executions (default: the bench's own; the
    benchmark passes one its meter does not count)."""

    def __init__(self, bench: Bench, endpoint: LambdaEndpoint, seen: list[dict[str, Any]],
                 model: OpenAICompatibleServer, *, sfn: Any = None) -> None:
        self.bench, self.endpoint, self.seen, self.model = bench, endpoint, seen, model
        self.sfn = sfn if sfn is not None else bench.aws.sfn
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
        listed = self.sfn.list_executions(stateMachineArn=MACHINE_ARN)["executions"]
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


def resource_values(synthesized: Synthesized, bench: Bench) -> dict[str, str]:
    """Every resource of the template as a value on ``bench``'s moto resources."""
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



@contextlib.contextmanager
def open_deployment(synthesized: Synthesized, monkeypatch: pytest.MonkeyPatch,
                    tmp_path: Path, script: list[Any], agent: dict[str, Any], *,
                    rollover: int = 4) -> Iterator[Deployment]:
    """The synthesized state machine on moto, driving runs of ``agent`` against a model
    server that plays ``script``; the step service rolls over every ``rollover`` commits."""
    from moto import mock_aws

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
                           rollover=rollover)
        bench.agent(agent)
        bench.service.rollover_cycles = rollover
        endpoint = LambdaEndpoint(lambda event: bench.service.handle(event))
        monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", endpoint.url)
        definition = synthesized.definition(resource_values(synthesized, bench))
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
