"""``FargateTaskSpec``: a CommandSpec as ECS RunTask parameters (pure dicts, no boto3).

The run state machine calls ``ecs:runTask.sync`` with the session's revision and the
overrides of ``run_task(spec)`` (in the integration's casing: ``sfn_overrides``) after the
step has claimed the marker; the step after the task reads the result and removes the
marker.
The container entry point (``agentloom.command_entry``) runs the command and writes the
``CommandResult`` to ``<lock_dir>/results/<request_id>.json``; the container exits 0 when
that file was written (the command's own exit code is inside it).

Task definition requirements (``task_definition`` builds them; Fargate facts in
docs/contract.md#aws-limits):

- one task definition revision per session (``agentloom.aws.sandbox``; ADR 0004): RunTask
  cannot override volumes, so the workspace volume names the session's EFS access point
  (root directory = the session's workspace directory, POSIX user = the sandbox's) and
  ``WORKSPACE`` names the instance's directory below ``/workspace``;
  ``transitEncryption: ENABLED``. A second access point rooted at the session's
  ``<lock_dir>/results`` is mounted at ``/agentloom-results`` (never the whole lock
  directory: markers and the write lock stay out of reach). The command can write there
  as well, so a result is as trustworthy as the command's own output: treat it as
  untrusted data.
- the skills of the instance (``CommandSpec.skills``) are read-only volumes at
  ``/skills/<id>``, each through the skill version's own access point; the spec in the
  overrides names those container paths.
- ``readonlyRootFilesystem``, a non-root ``user``, all capabilities dropped, an ``nproc``
  ulimit (Fargate has no pid limit), task ``cpu``/``memory``; ``/tmp`` is a task-storage
  volume (Fargate has no tmpfs).
- EFS IAM authorization (``authorizationConfig.iam: ENABLED``): the mount is made with the
  task role, whose only permission is ``ClientMount``/``ClientWrite`` on the file system
  through an access point, and the file-system policy refuses every mount that is not
  TLS, not IAM-authorized, not through an access point, or root (infra workspace.py).
  The command can read that role's credentials (the container credential endpoint): they
  grant nothing beyond mounting an access point of this file system whose id it knows,
  and there is no route out of the subnet (docs/deploy.md, "Threat model of the sandbox").
- platform version >= 1.4.0 (EFS); ``awsvpc`` in isolated subnets, no public IP, a security
  group whose only egress is EFS (2049) and the VPC endpoints the task needs to start.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentloom_runtime.workspace import CommandSpec, WorkspaceError

WORKSPACE = "/workspace"
RESULTS = "/agentloom-results"
SKILLS = "/skills"
ENTRY = ["python", "-m", "agentloom.command_entry"]
MAX_OVERRIDES_BYTES = 8192  # RunTask: total overrides JSON


def _platform_ok(version: str) -> bool:
    try:
        parts = tuple(int(p) for p in version.split("."))
    except ValueError:
        return False
    return parts >= (1, 4, 0)


def _client_token(request_id: str) -> str:
    """RunTask idempotency token (<= 64 chars): the id itself, or its sha256 if longer."""
    return request_id if len(request_id) <= 64 else hashlib.sha256(request_id.encode()
                                                                   ).hexdigest()


@dataclass(frozen=True)
class FargateTaskSpec:
    cluster: str
    task_definition: str  # family:revision (or ARN) registered for this instance workspace
    subnets: Sequence[str]  # isolated: no NAT, no internet gateway route
    security_groups: Sequence[str]  # egress only to EFS and the required endpoints
    container_name: str = "command"
    platform_version: str = "1.4.0"

    def __post_init__(self) -> None:
        if not _platform_ok(self.platform_version):
            raise ValueError("Fargate platform version must be an explicit >= 1.4.0 (EFS)")
        if not self.subnets or not self.security_groups:
            raise ValueError("subnets and security groups are required")

    def run_task(self, spec: CommandSpec, *, workspace: str = WORKSPACE) -> dict[str, Any]:
        """RunTask parameters. ``clientToken`` = request id: a retried call cannot start a
        second task for the same command. ``workspace``: the instance's directory inside
        the task (the session's workspace is mounted at ``/workspace``; ``main`` or a
        child's directory below it)."""
        if workspace != WORKSPACE and not workspace.startswith(WORKSPACE + "/"):
            raise WorkspaceError("invalid_argument", "the workspace must be under /workspace")
        # the task definition mounts each skill at /skills/<id> (agentloom.aws.sandbox)
        spec = replace(spec, skills={name: f"{SKILLS}/{name}" for name in spec.skills})
        overrides = {"containerOverrides": [{
            "name": self.container_name,
            "command": ["--spec-json", json.dumps(spec.to_dict(), separators=(",", ":"))],
            "environment": [{"name": "REQUEST_ID", "value": spec.request_id},
                            {"name": "WORKSPACE", "value": workspace}],
        }]}
        if len(json.dumps(overrides)) > MAX_OVERRIDES_BYTES:
            raise WorkspaceError("too_large", "the command is too long for a Fargate task")
        return {
            "cluster": self.cluster, "taskDefinition": self.task_definition,
            "launchType": "FARGATE", "platformVersion": self.platform_version, "count": 1,
            "networkConfiguration": {"awsvpcConfiguration": {
                "subnets": list(self.subnets), "securityGroups": list(self.security_groups),
                "assignPublicIp": "DISABLED"}},
            "overrides": overrides, "clientToken": _client_token(spec.request_id),
            "startedBy": "agentloom", "enableExecuteCommand": False,
            "propagateTags": "TASK_DEFINITION",
            "tags": [{"key": "agentloom:request_id", "value": spec.request_id}],
        }


def sfn_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """RunTask ``overrides`` in the casing of the Step Functions ECS integration
    (``containerOverrides`` → ``ContainerOverrides``; keys only, never values)."""

    def convert(value: Any) -> Any:
        if isinstance(value, dict):
            return {k[:1].upper() + k[1:]: convert(v) for k, v in value.items()}
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value

    converted: dict[str, Any] = convert(overrides)
    return converted


def task_definition(*, family: str, image: str, execution_role_arn: str,
                    task_role_arn: str, file_system_id: str, workspace_access_point: str,
                    results_access_point: str, cpu: int = 1024, memory_mb: int = 2048,
                    user: str = "65534:65534", nproc: int = 256, nofile: int = 1024,
                    log_group: str | None = None, region: str | None = None,
                    skills: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """RegisterTaskDefinition parameters that satisfy the requirements above. ``skills``:
    (skill id, access point) pairs, each mounted read-only at ``/skills/<id>``."""

    def efs(access_point: str) -> dict[str, Any]:
        return {"fileSystemId": file_system_id, "transitEncryption": "ENABLED",
                "authorizationConfig": {"accessPointId": access_point, "iam": "ENABLED"}}

    container: dict[str, Any] = {
        "name": "command", "image": image, "essential": True, "entryPoint": ENTRY,
        "user": user, "readonlyRootFilesystem": True, "workingDirectory": WORKSPACE,
        "memory": memory_mb,
        "mountPoints": [
            {"sourceVolume": "workspace", "containerPath": WORKSPACE, "readOnly": False},
            {"sourceVolume": "results", "containerPath": RESULTS, "readOnly": False},
            {"sourceVolume": "tmp", "containerPath": "/tmp", "readOnly": False},
            *({"sourceVolume": f"skill-{i}", "containerPath": f"{SKILLS}/{name}",
               "readOnly": True} for i, (name, _) in enumerate(skills))],
        "ulimits": [{"name": "nproc", "softLimit": nproc, "hardLimit": nproc},
                    {"name": "nofile", "softLimit": nofile, "hardLimit": nofile},
                    {"name": "core", "softLimit": 0, "hardLimit": 0}],
        "linuxParameters": {"capabilities": {"drop": ["ALL"]}, "initProcessEnabled": True},
        "privileged": False,
    }
    if log_group:
        container["logConfiguration"] = {"logDriver": "awslogs", "options": {
            "awslogs-group": log_group, "awslogs-region": region or "",
            "awslogs-stream-prefix": "command"}}
    return {
        "family": family, "networkMode": "awsvpc", "requiresCompatibilities": ["FARGATE"],
        "cpu": str(cpu), "memory": str(memory_mb), "executionRoleArn": execution_role_arn,
        "taskRoleArn": task_role_arn,
        "runtimePlatform": {"operatingSystemFamily": "LINUX"},
        "containerDefinitions": [container],
        "volumes": [{"name": "workspace", "efsVolumeConfiguration": efs(workspace_access_point)},
                    {"name": "results", "efsVolumeConfiguration": efs(results_access_point)},
                    {"name": "tmp"},
                    *({"name": f"skill-{i}", "efsVolumeConfiguration": efs(point)}
                      for i, (_, point) in enumerate(skills))],
    }


NOT_STARTED = "sandbox_not_started"
# Stopped reasons of a task whose container never ran (ECS "stopped tasks error codes").
_START_FAILURES = ("CannotPullContainerError", "ResourceInitializationError",
                   "CannotStartContainerError", "CannotCreateVolumeError",
                   "TaskFailedToStart", "ResourceNotFoundException")


# A RunTask answered with a server error may have created the task before it failed:
# its command may run, so it is not "never started" (the state machine does not retry it
# either; the command's outcome is then the result file's, or unknown).
_AMBIGUOUS = frozenset({"ECS.ServerException"})


def never_started(error: str | None, cause: str | None) -> str | None:
    """Why the sandbox task of a command never ran its container, from the error the
    ``ecs:runTask.sync`` state reported (its ``Error`` and ``Cause``); None when the
    command ran or may have run (its fate is then the result file's, or unknown).

    ``ECS.*`` and ``AmazonECS.*`` errors come from the RunTask call itself (an API error,
    or ``Failures`` such as no capacity): no task exists — except a server error
    (``_AMBIGUOUS``), after which one may. ``States.TaskFailed`` carries the
    stopped task's description as JSON: it never ran when its stop code is
    ``TaskFailedToStart``, or when it never reached RUNNING (no ``startedAt``) and no
    container has an exit code.
    """
    if not error:
        return None
    if error.startswith(("ECS.", "AmazonECS.")) and error not in _AMBIGUOUS:
        return f"RunTask failed ({error[:120]})"
    if error != "States.TaskFailed" or not cause:
        return None  # a timeout, or a failure without the task's description
    try:
        task = json.loads(cause)
    except ValueError:
        return None
    if not isinstance(task, dict):
        return None
    task = {str(k).lower(): v for k, v in task.items()}  # PascalCase or camelCase
    containers = [c for c in task.get("containers") or [] if isinstance(c, dict)]
    exited = any("exitcode" in {str(k).lower() for k in c} for c in containers)
    stop_code = str(task.get("stopcode") or "")
    reason = str(task.get("stoppedreason") or "")
    if stop_code == "TaskFailedToStart" or (not exited and "startedat" not in task) or \
            (not exited and reason.startswith(_START_FAILURES)):
        return f"{stop_code or 'stopped'}: {reason}"[:300].rstrip(": ")
    return None
