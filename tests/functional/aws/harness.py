"""The AWS test bench: moto (DynamoDB, KMS, EFS, ECS, EC2, Step Functions) in-process, the
real step service on a temporary directory standing in for the EFS mount, the API
platform beside it (no mount), a scripted model on a local OpenAI-compatible server, and
``Container``, which plays the Fargate task of a ``command`` payload by running
``python -m agentloom.command_entry`` on the directories the session's access points
really name (read back from moto), so isolation is checked on the real parameters.

``drive`` plays the state machine in Python (the functional tests); the infra test runs
the synthesized definition in moto's interpreter instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from agentloom.aws.config import AwsConfig
from agentloom.aws.platform import AwsClients, AwsPlatform
from agentloom.aws.sandbox import SandboxRegistry
from agentloom.aws.steps import StepService
from agentloom.aws.workspaces import EfsWorkspaces
from agentloom.capabilities import Capabilities
from agentloom.platform.host import RunWorkspaces
from agentloom.platform.identity import Principal
from agentloom.platform.store.dynamodb import create_table as create_platform_table
from agentloom.stores.dynamodb_checkpoints import create_table as create_checkpoint_table
from agentloom_runtime.contracts import ModelGateway
from agentloom_runtime.model import ChatCompletionsGateway
from agentloom_runtime.snapshot import AgentSnapshot

REGION = "us-east-1"
ALICE = Principal("alice", "token")
STATE_MACHINE = "agentloom-test-run"
UID = GID = os.getuid() or 1000


def fake_credentials(monkeypatch: Any) -> None:
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_SESSION_TOKEN", "testing"), ("AWS_DEFAULT_REGION", REGION),
                        ("AWS_REGION", REGION)):
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_LAMBDA"):
        monkeypatch.delenv(name, raising=False)


def clients() -> AwsClients:
    return AwsClients.for_region(REGION)


@dataclass
class Resources:
    env: dict[str, str]
    subnets: list[str]
    security_group: str
    cluster_arn: str


def create_resources(aws: AwsClients, root: Path, *, state_machine_arn: str,
                     rollover: int = 500) -> Resources:
    create_checkpoint_table(aws.dynamodb, "checkpoints")
    create_platform_table(aws.dynamodb, "platform")
    key = aws.kms.create_key(Description="agentloom test")["KeyMetadata"]["Arn"]
    ec2 = boto3.client("ec2", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="sbx", Description="sandbox",
                                      VpcId=vpc)["GroupId"]
    fs = aws.efs.create_file_system(CreationToken="ws", Encrypted=True)["FileSystemId"]
    cluster = aws.ecs.create_cluster(clusterName="sbx")["cluster"]["clusterArn"]
    root.mkdir(parents=True, exist_ok=True)
    env = {
        "AGENTLOOM_CHECKPOINT_TABLE": "checkpoints", "AGENTLOOM_PLATFORM_TABLE": "platform",
        "AGENTLOOM_KMS_KEY_ID": key, "AGENTLOOM_STATE_MACHINE_ARN": state_machine_arn,
        "AGENTLOOM_STAGE": "test", "AWS_REGION": REGION,
        "AGENTLOOM_WORKSPACE_ROOT": "/mnt/workspaces", "AGENTLOOM_EFS_FILE_SYSTEM_ID": fs,
        "AGENTLOOM_SANDBOX_CLUSTER": cluster,
        "AGENTLOOM_SANDBOX_FAMILY_PREFIX": "agentloom-test-sbx",
        "AGENTLOOM_SANDBOX_EXECUTION_ROLE_ARN": "arn:aws:iam::123456789012:role/sbx-exec",
        "AGENTLOOM_SANDBOX_TASK_ROLE_ARN": "arn:aws:iam::123456789012:role/sbx-task",
        "AGENTLOOM_SANDBOX_IMAGE": "123456789012.dkr.ecr.us-east-1.amazonaws.com/sbx:1",
        "AGENTLOOM_SANDBOX_SUBNETS": subnet, "AGENTLOOM_SANDBOX_SECURITY_GROUP": group,
        "AGENTLOOM_SANDBOX_LOG_GROUP": "/agentloom/test/sandbox",
        "AGENTLOOM_SANDBOX_UID": str(UID), "AGENTLOOM_SANDBOX_GID": str(GID),
        "AGENTLOOM_ROLLOVER_CYCLES": str(rollover),
    }
    return Resources(env, [subnet], group, cluster)


def pass_machine(aws: AwsClients) -> str:
    """A recorded state machine (moto without its interpreter: executions are not run)."""
    return str(aws.sfn.create_state_machine(
        name=STATE_MACHINE, roleArn="arn:aws:iam::123456789012:role/sfn",
        definition='{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}}'
    )["stateMachineArn"])


def gateway_factory(base_url: str) -> Callable[[AgentSnapshot], ModelGateway]:
    def factory(snapshot: AgentSnapshot) -> ModelGateway:
        return ChatCompletionsGateway(base_url=base_url, model="scripted-model",
                                      api_key="test-key", timeout=10)
    return factory


@dataclass
class Bench:
    """The API platform and the step service of one deployment, on moto."""

    aws: AwsClients
    resources: Resources
    root: Path  # stands in for the step function's EFS mount
    api: AwsPlatform
    service: StepService
    step_platform: AwsPlatform
    agent_id: str = ""
    space_id: str = ""
    session_id: str = ""
    ran: list[str] = field(default_factory=list)
    # the capability set of every platform of the bench (None: AwsPlatform's default)
    capabilities: Callable[[AwsConfig], Capabilities] | None = None

    def open_platform(self, config: AwsConfig, factory: Any) -> AwsPlatform:
        wired = self.capabilities(config) if self.capabilities else None
        return AwsPlatform.open(config, self.aws, model_factory=factory,
                                capabilities=wired)

    def config(self, *, sandbox: bool) -> AwsConfig:
        env = dict(self.resources.env)
        env["AGENTLOOM_WORKSPACE_ROOT"] = "/mnt/workspaces"
        config = AwsConfig.from_environ(env, sandbox=sandbox)
        if config.sandbox is None:
            return config
        from dataclasses import replace
        return replace(config, sandbox=replace(config.sandbox, workspace_root=str(self.root)))

    def container(self) -> StepService:
        """Another warm container of the step function (nothing shared in memory)."""
        factory = self.step_platform.host.ports.models
        platform = self.open_platform(self.config(sandbox=True), factory)
        sandbox = SandboxRegistry(platform.config.require_sandbox(), platform.store,
                                  efs=self.aws.efs, ecs=self.aws.ecs, region=REGION)
        self.step_platform = platform
        return StepService(platform, sandbox)

    def new_step_service(self) -> StepService:
        """Replace the step container by a cold one (the previous one is closed)."""
        if self.service is not None:
            self.service.close()
        self.service = self.container()
        return self.service

    def end_execution(self, run_id: str, generation: int) -> None:
        """What the state machine does after the last step (Succeed): here the recorded
        moto execution is stopped, so it no longer counts as driving the run."""
        from agentloom.aws.fence import execution_name
        from agentloom.aws.launcher import execution_arn

        arn = execution_arn(self.resources.env["AGENTLOOM_STATE_MACHINE_ARN"],
                            execution_name(run_id, generation))
        try:
            self.aws.sfn.stop_execution(executionArn=arn)
        except Exception as exc:  # never started here (the test called the step)
            if "ExecutionDoesNotExist" not in str(exc):
                raise

    def agent(self, config: Mapping[str, Any]) -> None:
        admin = self.api.admin
        space = admin.create_space(ALICE, "Team")
        agent, _ = admin.create_agent(ALICE, space.space_id, "Helper", dict(config))
        admin.publish(ALICE, space.space_id, agent.agent_id)
        session = self.api.sessions.create_session(ALICE, space.space_id, agent.agent_id)
        self.space_id, self.agent_id = space.space_id, agent.agent_id
        self.session_id = session.session_id


def open_bench(aws: AwsClients, tmp_path: Path, model_url: str, *,
               state_machine_arn: str, rollover: int = 500,
               capabilities: Callable[[AwsConfig], Capabilities] | None = None) -> Bench:
    root = tmp_path / "efs"
    resources = create_resources(aws, root, state_machine_arn=state_machine_arn,
                                 rollover=rollover)
    factory = gateway_factory(model_url)
    env = dict(resources.env)
    api = AwsPlatform.open(AwsConfig.from_environ(env), aws, model_factory=factory,
                           capabilities=capabilities(AwsConfig.from_environ(env))
                           if capabilities else None)
    bench = Bench(aws, resources, root, api, service=None,  # type: ignore[arg-type]
                  step_platform=api, capabilities=capabilities)
    bench.step_platform = bench.open_platform(bench.config(sandbox=True), factory)
    bench.service = None  # type: ignore[assignment]
    bench.new_step_service()
    return bench


class Container:
    """Plays the Fargate task of a ``command`` payload: the access points' root
    directories (from EFS) become the task's ``/workspace`` and ``/agentloom-results``."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench

    def local(self, access_point: str) -> Path:
        found = self.bench.aws.efs.describe_access_points(AccessPointId=access_point)
        path = found["AccessPoints"][0]["RootDirectory"]["Path"]
        return self.bench.root / path.lstrip("/")

    def mounts(self, task_definition: str) -> dict[str, Path]:
        described = self.bench.aws.ecs.describe_task_definition(
            taskDefinition=task_definition)["taskDefinition"]
        volumes = {v["name"]: v["efsVolumeConfiguration"]["authorizationConfig"]
                   ["accessPointId"] for v in described["volumes"]
                   if "efsVolumeConfiguration" in v}
        container = described["containerDefinitions"][0]
        return {m["containerPath"]: self.local(volumes[m["sourceVolume"]])
                for m in container["mountPoints"] if m["sourceVolume"] in volumes}

    def run(self, command: Mapping[str, Any]) -> int:
        mounts = self.mounts(command["task_definition"])
        override = command["overrides"]["ContainerOverrides"][0]
        env = {e["Name"]: e["Value"] for e in override["Environment"]}
        inside = env["WORKSPACE"]
        workspace = mounts["/workspace"] / inside.removeprefix("/workspace").lstrip("/")
        argv = [sys.executable, "-m", "agentloom.command_entry", *override["Command"],
                "--results-dir", str(mounts["/agentloom-results"])]
        done = subprocess.run(argv, env={"REQUEST_ID": env["REQUEST_ID"],
                                         "WORKSPACE": str(workspace),
                                         "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                              capture_output=True, timeout=60, check=False)
        self.bench.ran.append(command["request_id"])
        return done.returncode


def drive(bench: Bench, run_id: str, generation: int = 1, *, max_steps: int = 200,
          invoke: Callable[[dict[str, Any]], dict[str, Any]] | None = None
          ) -> list[dict[str, Any]]:
    """The state machine in Python: Step → Next? → RunCommand → AfterCommand → Step, and
    Rollover into the next generation. Returns every step's reply."""
    call = invoke or (lambda payload: bench.service.handle(payload))
    container = Container(bench)
    payload: dict[str, Any] = {"run_id": run_id, "generation": generation, "command": None}
    replies: list[dict[str, Any]] = []
    for _ in range(max_steps):
        reply = call(payload)
        json.dumps(reply)  # the payload is JSON (and tiny)
        replies.append(reply)
        if reply["next"] in ("done", "blocked", "stale"):
            if invoke is None:
                bench.end_execution(run_id, reply["generation"])
            return replies
        if reply["next"] == "command":
            container.run(reply["command"])
            payload = {"run_id": run_id, "generation": reply["generation"],
                       "command": {"request_id": reply["command"]["request_id"]}}
        elif reply["next"] == "rollover":
            payload = {"run_id": run_id, "generation": reply["next_execution"]["generation"],
                       "command": None}
        else:
            payload = {"run_id": run_id, "generation": reply["generation"], "command": None}
    raise AssertionError("the run did not stop")


def event(method: str, path: str, body: Any = None, user: str = "alice") -> dict[str, Any]:
    """An HTTP API (payload 2.0) event of ``user`` for the api function."""
    return {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
            "headers": {"content-type": "application/json"},
            "requestContext": {"http": {"method": method, "path": path,
                                        "sourceIp": "127.0.0.1"},
                               "authorizer": {"jwt": {"claims": {"sub": user}}},
                               "requestId": "r", "stage": "$default"},
            "body": json.dumps(body) if body is not None else None, "isBase64Encoded": False}


def mock_config() -> dict[str, Any]:
    return {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}


def iterate(items: Iterator[Any]) -> list[Any]:
    return list(items)


def efs(workspaces: RunWorkspaces) -> EfsWorkspaces:
    """The AWS host's workspaces (``aws_host`` builds ``EfsWorkspaces``)."""
    assert isinstance(workspaces, EfsWorkspaces)
    return workspaces
