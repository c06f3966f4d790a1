"""Per-session isolation on the real parameters (moto EFS/ECS): each session's revision
mounts access points rooted at that session's directories only; the registry creates
them once (cached in the platform table and in memory)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from functional.aws.harness import ALICE, Bench, Container, efs

from agentloom.sandbox.fargate import FargateTaskSpec, sfn_overrides
from agentloom_runtime.workspace import CommandSpec, WorkspaceError


def _record(bench: Bench, session_id: str) -> tuple[str, dict[str, object]]:
    run, _ = bench.api.sessions.ask(ALICE, session_id, "Copy the notes")
    found = bench.api.store.runs.find(run.run_id)
    assert found is not None
    snapshot = bench.service._snapshot(found.value)
    workspaces = efs(bench.service.host.ports.workspaces(snapshot, found.value.session_id))
    spec = CommandSpec(request_id=f"{run.run_id}.main.1", command="true")
    instance = workspaces.session_dir() / "main"
    instance.mkdir(parents=True, exist_ok=True)
    return str(workspaces.session_dir()), bench.service.sandbox.command(
        workspaces, spec, str(instance))


def test_each_session_mounts_only_its_own_directories(bench: Bench) -> None:
    first_dir, first = _record(bench, bench.session_id)
    other = bench.api.sessions.create_session(ALICE, bench.space_id, bench.agent_id)
    second_dir, second = _record(bench, other.session_id)
    container = Container(bench)
    mounts_a = container.mounts(str(first["task_definition"]))
    mounts_b = container.mounts(str(second["task_definition"]))
    assert str(mounts_a["/workspace"]) == first_dir
    assert str(mounts_b["/workspace"]) == second_dir
    assert mounts_a["/agentloom-results"] != mounts_b["/agentloom-results"]
    assert mounts_a["/agentloom-results"].name == "results"
    assert first["task_definition"] != second["task_definition"]
    described = bench.aws.ecs.describe_task_definition(
        taskDefinition=str(first["task_definition"]))["taskDefinition"]
    container_def = described["containerDefinitions"][0]
    assert container_def["readonlyRootFilesystem"] is True
    assert container_def["user"] != "0"
    # the mount is IAM-authorized with the task role (the file-system policy requires it)
    assert described["taskRoleArn"] == "arn:aws:iam::123456789012:role/sbx-task"
    for volume in described["volumes"]:
        if "efsVolumeConfiguration" in volume:
            efs_volume = volume["efsVolumeConfiguration"]
            assert efs_volume["transitEncryption"] == "ENABLED"
            assert efs_volume["authorizationConfig"]["iam"] == "ENABLED"
    override = first["overrides"]["ContainerOverrides"][0]  # type: ignore[index]
    env = {e["Name"]: e["Value"] for e in override["Environment"]}
    assert env["WORKSPACE"] == "/workspace/main"


def test_the_registry_creates_once(bench: Bench) -> None:
    _record(bench, bench.session_id)
    made = bench.service.sandbox.created
    cold = bench.container()
    try:
        run = bench.api.store.runs.of_session(bench.session_id)[0]
        workspaces = efs(cold.host.ports.workspaces(cold._snapshot(run), run.session_id))
        cold.sandbox.record(workspaces)
        assert cold.sandbox.created == 0  # read from the platform table
    finally:
        cold.close()
    assert made == 3  # two access points and a revision


def test_a_deploy_that_changes_the_revision_shape_registers_a_fresh_revision(
        bench: Bench) -> None:
    """The cached revision is keyed on what it takes from the deployment: after a new
    image (or the task role EFS IAM authorization now needs) a session's next command
    runs on a new revision with the new image, mounting the same session directories
    (on AWS through the same access points: their client tokens do not change; moto
    ignores client tokens)."""
    from dataclasses import replace

    from agentloom.aws.sandbox import SandboxRegistry

    _, before = _record(bench, bench.session_id)
    run = bench.api.store.runs.of_session(bench.session_id)[0]
    workspaces = efs(bench.service.host.ports.workspaces(bench.service._snapshot(run),
                                                         run.session_id))
    old = bench.service.sandbox.record(workspaces)
    config = replace(bench.service.sandbox.config, image="repo/sbx:2")
    deployed = SandboxRegistry(config, bench.service.sandbox.store, efs=bench.aws.efs,
                               ecs=bench.aws.ecs, region="us-east-1")
    new = deployed.record(workspaces)
    assert new.task_definition != before["task_definition"] == old.task_definition
    container = Container(bench)
    assert container.mounts(new.task_definition) == container.mounts(old.task_definition)
    described = bench.aws.ecs.describe_task_definition(
        taskDefinition=new.task_definition)["taskDefinition"]
    assert described["containerDefinitions"][0]["image"] == "repo/sbx:2"
    # the previous deployment's containers keep their own (still cached) revision
    assert bench.service.sandbox.record(workspaces) == old


def test_overrides_are_in_the_integration_casing_and_stay_in_the_workspace() -> None:
    task = FargateTaskSpec(cluster="c", task_definition="td", subnets=["s"],
                           security_groups=["g"])
    spec = CommandSpec(request_id="r.main.1", command="echo hi")
    params = task.run_task(spec, workspace="/workspace/runs/r/children/sub-1")
    converted = sfn_overrides(params["overrides"])
    override = converted["ContainerOverrides"][0]
    assert override["Command"][0] == "--spec-json"
    assert {"Name": "WORKSPACE", "Value": "/workspace/runs/r/children/sub-1"} in \
        override["Environment"]
    with pytest.raises(WorkspaceError):
        task.run_task(spec, workspace="/etc")


def test_an_existing_access_point_of_the_token_is_reused(aws_env: None, tmp_path: Any) -> None:
    """EFS answers a repeated client token with 409 AccessPointAlreadyExists naming the
    access point (a skill version another session mounts, a retry after a crash): the
    registry uses that one. The 409 goes through botocore's real parser."""
    from botocore.awsrequest import AWSResponse, HTTPHeaders

    from agentloom.aws.config import SandboxConfig
    from agentloom.aws.sandbox import SandboxRegistry

    efs = boto3.client("efs", region_name="us-east-1")
    body = json.dumps({"ErrorCode": "AccessPointAlreadyExists", "Message": "exists",
                       "AccessPointId": "fsap-0123456789abcdef0"}).encode()

    class Raw:
        def stream(self, **_: Any) -> Any:
            yield body

    def conflict(**_: Any) -> Any:  # a before-send handler's response replaces the call
        return AWSResponse("https://efs", 409, HTTPHeaders.from_dict({
            "x-amzn-ErrorType": "AccessPointAlreadyExists",
            "content-type": "application/json"}), Raw())

    efs.meta.events.register("before-send.efs.CreateAccessPoint", conflict)
    config = SandboxConfig(
        workspace_root=str(tmp_path), file_system_id="fs-1", cluster="c", family_prefix="p",
        execution_role_arn="arn:aws:iam::1:role/x", task_role_arn="arn:aws:iam::1:role/t",
        image="i", subnets=("s",),
        security_group="g", log_group="l", uid=1000, gid=1000, efs_root_path="/")
    registry = SandboxRegistry(config, None, efs=efs, ecs=None,  # type: ignore[arg-type]
                               region="us-east-1")
    found = registry._access_point("skill:x", str(tmp_path / "x"), {"agentloom:mount": "s"})
    assert found == "fsap-0123456789abcdef0" and registry.created == 0
