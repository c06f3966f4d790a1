"""Per-session command isolation on Fargate (docs/adr/0004-per-session-command-isolation.md).

RunTask cannot override a task definition's volumes, so each session gets, on first use,
two EFS access points — its workspace directory (seed 002 §10 layout, mounted at
``/workspace``) and its lock directory's ``results/`` (mounted at
``/agentloom-results``) — and a task-definition revision whose volumes name them (family
``{prefix}-{hash of the read-only skill mounts}``, one family while no skills are
mounted). The revision's ARN is cached in the platform table (``sandbox#{session}`` /
``taskdef``) and in memory; RunTask carries only that ARN and the command overrides, so a
command can reach its own session's files and nothing else: the access point enforces the
root directory and the POSIX uid/gid for every request made through it.

Creation is idempotent: ``CreateAccessPoint`` has a client token derived from the session
and the mount, and a repeated ``RegisterTaskDefinition`` only adds an unused revision.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from pydantic import BaseModel

from agentloom.aws.config import SandboxConfig
from agentloom.aws.workspaces import EfsWorkspaces
from agentloom.platform.store import ABSENT, PlatformStore, WriteConflict
from agentloom.platform.store.base import put
from agentloom.sandbox.fargate import FargateTaskSpec, sfn_overrides, task_definition
from agentloom_runtime.workspace import CommandSpec

CACHE = 512


class SandboxRecord(BaseModel):
    task_definition: str
    workspace_access_point: str
    results_access_point: str
    family: str


def family(prefix: str, skills: tuple[str, ...] = ()) -> str:
    digest = hashlib.sha256("\n".join(sorted(skills)).encode()).hexdigest()[:12]
    return f"{prefix}-{digest}"


class SandboxRegistry:
    def __init__(self, config: SandboxConfig, store: PlatformStore, *, efs: Any,
                 ecs: Any, region: str) -> None:
        self.config = config
        self.store = store
        self.efs = efs
        self.ecs = ecs
        self.region = region
        self._cache: dict[str, SandboxRecord] = {}
        self.created = 0  # access points + revisions made by this container (benchmarks)

    def efs_path(self, local: str) -> str:
        """The file-system path of a directory under the Lambda's mount."""
        relative = os.path.relpath(local, self.config.workspace_root)
        if relative.startswith(".."):
            raise ValueError("the directory is not on the workspace volume")
        base = self.config.efs_root_path.rstrip("/")
        return f"{base}/{relative}" if relative != "." else base or "/"

    def _access_point(self, session_id: str, kind: str, local: str) -> str:
        token = hashlib.sha256(f"{session_id}:{kind}".encode()).hexdigest()[:32]
        made = self.efs.create_access_point(
            ClientToken=token, FileSystemId=self.config.file_system_id,
            PosixUser={"Uid": self.config.uid, "Gid": self.config.gid},
            RootDirectory={"Path": self.efs_path(local), "CreationInfo": {
                "OwnerUid": self.config.uid, "OwnerGid": self.config.gid,
                "Permissions": "0750"}},
            Tags=[{"Key": "agentloom:session", "Value": session_id},
                  {"Key": "agentloom:mount", "Value": kind}])
        self.created += 1
        return str(made["AccessPointId"])

    def record(self, workspaces: EfsWorkspaces) -> SandboxRecord:
        """The session's access points and revision: cached, or made now."""
        session_id = workspaces.session
        if session_id in self._cache:
            return self._cache[session_id]
        found = self.store.get(f"sandbox#{session_id}", "taskdef", SandboxRecord)
        if found is not None:
            record = found.value
        else:
            record = self._create(workspaces)
            try:
                self.store.transact([put(f"sandbox#{session_id}", "taskdef", record, ABSENT)])
            except WriteConflict:  # made meanwhile by another step: use that one
                again = self.store.get(f"sandbox#{session_id}", "taskdef", SandboxRecord)
                record = again.value if again else record
        if len(self._cache) >= CACHE:
            self._cache.clear()
        self._cache[session_id] = record
        return record

    def _create(self, workspaces: EfsWorkspaces) -> SandboxRecord:
        snap = workspaces.snapshot
        session_dir = workspaces.session_dir()
        session_dir.mkdir(parents=True, exist_ok=True)
        lock_dir = workspaces.provider.lock_dir(snap.space_id, snap.agent_id,
                                                workspaces.session)
        (lock_dir / "results").mkdir(mode=0o700, exist_ok=True)
        workspace_ap = self._access_point(workspaces.session, "workspace", str(session_dir))
        results_ap = self._access_point(workspaces.session, "results",
                                        str(lock_dir / "results"))
        name = family(self.config.family_prefix)
        params = task_definition(
            family=name, image=self.config.image,
            execution_role_arn=self.config.execution_role_arn,
            file_system_id=self.config.file_system_id, workspace_access_point=workspace_ap,
            results_access_point=results_ap, user=f"{self.config.uid}:{self.config.gid}",
            log_group=self.config.log_group, region=self.region)
        params["tags"] = [{"key": "agentloom:session", "value": workspaces.session}]
        registered = self.ecs.register_task_definition(**params)
        self.created += 1
        return SandboxRecord(
            task_definition=registered["taskDefinition"]["taskDefinitionArn"],
            workspace_access_point=workspace_ap, results_access_point=results_ap,
            family=name)

    def command(self, workspaces: EfsWorkspaces, spec: CommandSpec,
                instance_dir: str) -> dict[str, Any]:
        """The step's ``command`` payload: request id, the session's revision, overrides."""
        record = self.record(workspaces)
        relative = os.path.relpath(instance_dir, workspaces.session_dir())
        inside = "/workspace" if relative == "." else f"/workspace/{relative}"
        task = FargateTaskSpec(cluster=self.config.cluster,
                               task_definition=record.task_definition,
                               subnets=self.config.subnets,
                               security_groups=[self.config.security_group])
        params = task.run_task(spec, workspace=inside)
        return {"request_id": spec.request_id, "task_definition": record.task_definition,
                "overrides": sfn_overrides(params["overrides"])}
