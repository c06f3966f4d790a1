"""Fargate RunTask parameters, the task definition and the container entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentloom.sandbox.fargate import FargateTaskSpec, task_definition
from agentloom_runtime.workspace import CommandLimits, CommandResult, CommandSpec, WorkspaceError

SPEC = FargateTaskSpec(cluster="agentloom", task_definition="agentloom-cmd-sess1-main:3",
                       subnets=("subnet-a", "subnet-b"), security_groups=("sg-sandbox",))


def test_run_task_parameters() -> None:
    spec = CommandSpec(request_id="req-42", command="pytest -q", cwd="src", timeout_s=60)
    params = SPEC.run_task(spec)
    assert params["launchType"] == "FARGATE" and params["platformVersion"] == "1.4.0"
    assert params["cluster"] == "agentloom" and params["count"] == 1
    net = params["networkConfiguration"]["awsvpcConfiguration"]
    assert net == {"subnets": ["subnet-a", "subnet-b"], "securityGroups": ["sg-sandbox"],
                   "assignPublicIp": "DISABLED"}
    (override,) = params["overrides"]["containerOverrides"]
    assert {e["name"]: e["value"] for e in override["environment"]} == {
        "REQUEST_ID": "req-42", "WORKSPACE": "/workspace"}
    assert override["command"][0] == "--spec-json"
    assert CommandSpec.from_dict(json.loads(override["command"][1])) == spec
    assert params["clientToken"] == "req-42" and params["enableExecuteCommand"] is False
    assert "taskRoleArn" not in json.dumps(params)
    long_id = CommandSpec(request_id="r" * 100, command="ls")
    assert len(SPEC.run_task(long_id)["clientToken"]) == 64


def test_run_task_refusals() -> None:
    with pytest.raises(ValueError):
        FargateTaskSpec(cluster="c", task_definition="t", subnets=("s",),
                        security_groups=("g",), platform_version="1.3.0")
    with pytest.raises(ValueError):
        FargateTaskSpec(cluster="c", task_definition="t", subnets=("s",),
                        security_groups=("g",), platform_version="LATEST")
    with pytest.raises(WorkspaceError) as big:
        SPEC.run_task(CommandSpec(request_id="r", command="x" * 9000))
    assert big.value.code == "too_large"
    # skills are no refusal: the task receives their container paths (agentloom.aws.sandbox
    # mounts them read-only at /skills/<id>), never the step's host paths
    params = SPEC.run_task(CommandSpec(request_id="r", command="ls", skills={"pdf": "/s"}))
    sent = json.loads(params["overrides"]["containerOverrides"][0]["command"][1])
    assert sent["skills"] == {"pdf": "/skills/pdf"}


def test_task_definition_requirements() -> None:
    td = task_definition(family="agentloom-cmd", image="repo/agentloom:1",
                         execution_role_arn="arn:aws:iam::1:role/exec",
                         task_role_arn="arn:aws:iam::1:role/task", file_system_id="fs-1",
                         workspace_access_point="fsap-ws", results_access_point="fsap-res",
                         cpu=512, memory_mb=1024, nproc=64)
    assert td["requiresCompatibilities"] == ["FARGATE"] and td["networkMode"] == "awsvpc"
    assert (td["cpu"], td["memory"]) == ("512", "1024")
    assert td["taskRoleArn"] == "arn:aws:iam::1:role/task"  # mounts EFS, nothing else
    (container,) = td["containerDefinitions"]
    assert container["readonlyRootFilesystem"] is True and container["privileged"] is False
    assert not container["user"].startswith("0")
    assert {"name": "nproc", "softLimit": 64, "hardLimit": 64} in container["ulimits"]
    assert container["linuxParameters"]["capabilities"]["drop"] == ["ALL"]
    mounts = {m["containerPath"]: m["sourceVolume"] for m in container["mountPoints"]}
    assert mounts == {"/workspace": "workspace", "/agentloom-results": "results",
                      "/tmp": "tmp"}
    volumes = {v["name"]: v for v in td["volumes"]}
    for name, ap in (("workspace", "fsap-ws"), ("results", "fsap-res")):
        efs = volumes[name]["efsVolumeConfiguration"]
        assert efs["transitEncryption"] == "ENABLED"
        assert efs["authorizationConfig"] == {"accessPointId": ap, "iam": "ENABLED"}
    assert "efsVolumeConfiguration" not in volumes["tmp"]


# ---------------------------------------------------------------- the entry point


def _entry(tmp_path: Path, spec: CommandSpec, **env: str) -> tuple[int, CommandResult | None]:
    workspace, results = tmp_path / "ws", tmp_path / "results"
    workspace.mkdir(exist_ok=True)
    environ = {"PATH": os.environ["PATH"], "REQUEST_ID": spec.request_id,
               "WORKSPACE": str(workspace), "PYTHONPATH": os.pathsep.join(sys.path), **env}
    done = subprocess.run(
        [sys.executable, "-m", "agentloom.command_entry", "--spec-json",
         json.dumps(spec.to_dict()), "--results-dir", str(results)],
        env=environ, capture_output=True, timeout=60)
    path = results / f"{spec.request_id}.json"
    return done.returncode, (CommandResult.from_dict(json.loads(path.read_text()))
                             if path.exists() else None)


def _run(tmp_path: Path, command: str, **kwargs: Any) -> CommandResult:
    code, result = _entry(tmp_path, CommandSpec(request_id="req-1", command=command, **kwargs),
                          AWS_SECRET_ACCESS_KEY="leak", OPENAI_API_KEY="leak")
    assert code == 0 and result is not None
    return result


def test_entry_runs_and_writes_the_result(tmp_path: Path) -> None:
    result = _run(tmp_path, "echo out; echo err >&2; env; pwd; exit 3")
    assert result.exit_code == 3 and result.stderr_head == "err\n"
    assert "out\n" in result.stdout_head and str(tmp_path / "ws") in result.stdout_head
    assert "leak" not in result.stdout_head and "REQUEST_ID" not in result.stdout_head


def test_entry_caps_output_times_out_and_limits(tmp_path: Path) -> None:
    capped = _run(tmp_path, "head -c 100000 /dev/zero | tr '\\0' a",
                  limits=CommandLimits(output_cap_bytes=100))
    assert capped.stdout_truncated and capped.stdout_bytes == 100_000
    assert len(capped.stdout_head) == len(capped.stdout_tail) == 50
    background = _run(tmp_path, "sleep 30 & echo started", timeout_s=20)
    assert background.exit_code == 0 and not background.timed_out
    assert background.duration_s < 10 and background.stdout_head == "started\n"
    slow = _run(tmp_path, "sleep 30", timeout_s=0.5)
    assert slow.timed_out and slow.exit_code is None and slow.duration_s < 10
    big = _run(tmp_path, "head -c 3000000 /dev/zero > big.bin",
               limits=CommandLimits(file_size_mb=1))
    assert big.exit_code != 0 and (tmp_path / "ws" / "big.bin").stat().st_size <= 1024 * 1024


def test_entry_refuses_bad_invocations(tmp_path: Path) -> None:
    spec = CommandSpec(request_id="req-1", command="true")
    code, result = _entry(tmp_path, spec, REQUEST_ID="other")
    assert code == 2 and result is None
    escaped = _run(tmp_path, "true", cwd="missing-dir")
    assert escaped.exit_code is None and escaped.error
