"""Per-session command isolation on Fargate (docs/adr/0004-per-session-command-isolation.md).

RunTask cannot override a task definition's volumes, so each session gets, on first use,
two EFS access points — its workspace directory (layout: docs/contract.md#workspaces, mounted at
``/workspace``) and its lock directory's ``results/`` (mounted at
``/agentloom-results``) — and a task-definition revision whose volumes name them (family
``{prefix}-{hash of the sorted id@content-hash list of the mounted skills}``). A command
of an instance with skills (``CommandSpec.skills``: id -> the version's folder the step
materialized on the volume) runs on a revision that also mounts, read-only at
``/skills/<id>``, one access point per skill version (rooted at its folder, shared by
every session: the content is immutable; its POSIX identity is ``SKILL_READER``, which
neither owns nor may write the version's files — a command that mounted the access point
itself, read-write, could still only read); the spec the task receives names those
container paths. The revisions' ARNs are cached in the platform table
(``sandbox#{session}`` / ``taskdef@{shape}`` and ``taskdef#{family}@{shape}``) and in
memory; RunTask carries only that ARN and the command overrides, so a command can reach
its own session's files (and its skills, read-only) and nothing else: the access point
enforces the root directory and the POSIX uid/gid for every request made through it, and
the file-system policy refuses any mount that does not go through an access point
(infra/agentloom_infra/workspace.py).

The cached items are keyed on the revision's *shape* (``shape``: a digest of everything a
revision takes from the deployment — image, roles, POSIX user, log group, the task
definition's format), so a deploy that changes any of them (a new image; EFS IAM
authorization, which old revisions lack and the file-system policy now requires) makes
each session register a fresh revision on its next command instead of reusing a stale
one; the access points are reused (same client tokens).

Creation is idempotent: ``CreateAccessPoint`` has a client token derived from the session
and the mount (a skill version: its folder), and EFS's ``AccessPointAlreadyExists`` names
the one the token made; a repeated ``RegisterTaskDefinition`` only adds an unused
revision.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import BaseModel

from agentloom.aws.config import SandboxConfig
from agentloom.aws.workspaces import EfsWorkspaces
from agentloom.platform.store import ABSENT, PlatformStore, WriteConflict
from agentloom.platform.store.items import put
from agentloom.sandbox.fargate import FargateTaskSpec, sfn_overrides, task_definition
from agentloom.skills.manifest import HASH_PREFIX
from agentloom.skills.materialize import FOLDER, SkillMount, skill_directory
from agentloom_runtime.workspace import CommandSpec, WorkspaceError

if TYPE_CHECKING:  # the boto3 stubs (the dev extra)
    from mypy_boto3_ecs import ECSClient
    from mypy_boto3_efs import EFSClient

CACHE = 512
# Bumped when task_definition() changes what it registers (2: EFS IAM authorization with
# the task role; revisions of format 1 cannot mount under the file-system policy).
TASK_DEFINITION_FORMAT = 2
# The skill access points' POSIX identity: not the files' owner (the step's uid), so it
# can neither write the 0444/0555 version nor chmod it back (materialize.py)
SKILL_READER = 65534


class SandboxRecord(BaseModel):
    task_definition: str
    workspace_access_point: str
    results_access_point: str
    family: str


class SkillRevision(BaseModel):
    """A revision of the session's task definition with skill versions mounted."""

    task_definition: str
    family: str
    access_points: dict[str, str]  # skill id -> the version's access point


Record = TypeVar("Record", SandboxRecord, SkillRevision)


def shape(config: SandboxConfig) -> str:
    """What a registered revision takes from the deployment, as a short digest."""
    parts = (str(TASK_DEFINITION_FORMAT), config.image, config.execution_role_arn,
             config.task_role_arn, f"{config.uid}:{config.gid}", config.log_group,
             config.file_system_id)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def family(prefix: str, skills: tuple[str, ...] = ()) -> str:
    digest = hashlib.sha256("\n".join(sorted(skills)).encode()).hexdigest()[:12]
    return f"{prefix}-{digest}"


class SandboxRegistry:
    def __init__(self, config: SandboxConfig, store: PlatformStore, *, efs: EFSClient,
                 ecs: ECSClient, region: str) -> None:
        self.config = config
        self.store = store
        self.efs = efs
        self.ecs = ecs
        self.region = region
        self._cache: dict[str, SandboxRecord | SkillRevision] = {}
        self._shape = shape(config)
        self.created = 0  # access points + revisions made by this container (benchmarks)

    def efs_path(self, local: str) -> str:
        """The file-system path of a directory under the Lambda's mount."""
        relative = os.path.relpath(local, self.config.workspace_root)
        if relative.startswith(".."):
            raise ValueError("the directory is not on the workspace volume")
        base = self.config.efs_root_path.rstrip("/")
        return f"{base}/{relative}" if relative != "." else base or "/"

    def _access_point(self, seed: str, local: str, tags: dict[str, str], *,
                      identity: tuple[int, int] | None = None) -> str:
        token = hashlib.sha256(seed.encode()).hexdigest()[:32]
        uid, gid = identity or (self.config.uid, self.config.gid)
        try:
            made = self.efs.create_access_point(
                ClientToken=token, FileSystemId=self.config.file_system_id,
                PosixUser={"Uid": uid, "Gid": gid},
                RootDirectory={"Path": self.efs_path(local), "CreationInfo": {
                    "OwnerUid": self.config.uid, "OwnerGid": self.config.gid,
                    "Permissions": "0750"}},
                Tags=[{"Key": key, "Value": value} for key, value in tags.items()])
        except self.efs.exceptions.AccessPointAlreadyExists as exc:
            # the token's access point exists (a skill version another session mounts,
            # or a retry after a crash): EFS names it in the error (a member of the
            # modeled error, which botocore parses into the response beside "Error")
            response: dict[str, Any] = dict(exc.response)
            return str(response["AccessPointId"])
        self.created += 1
        return str(made["AccessPointId"])

    def _session_access_point(self, session_id: str, kind: str, local: str) -> str:
        return self._access_point(f"{session_id}:{kind}", local, {
            "agentloom:session": session_id, "agentloom:mount": kind})

    def _stored(self, session_id: str, sk: str, kind: type[Record],
                make: Callable[[], Record]) -> Record:
        """The session's item ``sk``: cached, read from the table, or made now (a
        concurrent maker's item wins; ours is then an unused revision)."""
        key = f"{session_id}/{sk}"
        if key in self._cache:
            return cast(Record, self._cache[key])
        found = self.store.items.get(f"sandbox#{session_id}", sk, kind)
        if found is not None:
            record = found.value
        else:
            record = make()
            try:
                self.store.items.transact([put(f"sandbox#{session_id}", sk, record, ABSENT)])
            except WriteConflict:  # made meanwhile by another step: use that one
                again = self.store.items.get(f"sandbox#{session_id}", sk, kind)
                record = again.value if again else record
        if len(self._cache) >= CACHE:
            self._cache.clear()
        self._cache[key] = record
        return record

    def record(self, workspaces: EfsWorkspaces) -> SandboxRecord:
        """The session's access points and revision (no skills mounted)."""
        return self._stored(workspaces.session, f"taskdef@{self._shape}", SandboxRecord,
                            lambda: self._create(workspaces))

    def _create(self, workspaces: EfsWorkspaces) -> SandboxRecord:
        snap = workspaces.snapshot
        session_dir = workspaces.session_dir()
        session_dir.mkdir(parents=True, exist_ok=True)
        lock_dir = workspaces.provider.lock_dir(snap.space_id, snap.agent_id,
                                                workspaces.session)
        (lock_dir / "results").mkdir(mode=0o700, exist_ok=True)
        workspace_ap = self._session_access_point(workspaces.session, "workspace",
                                                  str(session_dir))
        results_ap = self._session_access_point(workspaces.session, "results",
                                                str(lock_dir / "results"))
        name = family(self.config.family_prefix)
        params = self._params(name, workspace_ap, results_ap)
        params["tags"] = [{"key": "agentloom:session", "value": workspaces.session}]
        registered = self.ecs.register_task_definition(**params)
        self.created += 1
        return SandboxRecord(
            task_definition=registered["taskDefinition"]["taskDefinitionArn"],
            workspace_access_point=workspace_ap, results_access_point=results_ap,
            family=name)

    def skill_mounts(self, workspaces: EfsWorkspaces, spec: CommandSpec
                     ) -> list[SkillMount]:
        """The spec's skills (id -> the materialized version's folder on this mount)
        as mounts; a folder that is not a skill version of the run's space is refused."""
        mounts = []
        for skill_id, host in sorted(spec.skills.items()):
            relative = os.path.relpath(host, self.config.workspace_root).split(os.sep)
            if len(relative) != 3 or relative[0] != FOLDER or \
                    relative[1] != workspaces.snapshot.space_id:
                raise WorkspaceError("invalid_argument", f"skill {skill_id!r} is not a "
                                     "skill version on the workspace volume")
            content_hash = f"{HASH_PREFIX}{relative[2]}"
            directory = skill_directory(relative[1], content_hash)  # checks the hash
            mounts.append(SkillMount(skill_id, content_hash, directory))
        return mounts

    def revision(self, workspaces: EfsWorkspaces, mounts: list[SkillMount]) -> str:
        """The session's task-definition revision with these skills mounted read-only
        at ``/skills/<id>`` (family keyed by the sorted ``id@hash`` list)."""
        base = self.record(workspaces)
        if not mounts:
            return base.task_definition
        name = family(self.config.family_prefix,
                      tuple(f"{m.skill_id}@{m.content_hash}" for m in mounts))
        made = self._stored(workspaces.session, f"taskdef#{name}@{self._shape}", SkillRevision,
                            lambda: self._register_skills(workspaces, base, name, mounts))
        return made.task_definition

    def _register_skills(self, workspaces: EfsWorkspaces, base: SandboxRecord, name: str,
                         mounts: list[SkillMount]) -> SkillRevision:
        root = self.config.workspace_root
        # one access point per skill version, shared by every session (read-only content,
        # a reader identity, a read-only mount): its client token is the version's folder
        points = [(m.skill_id, self._access_point(
            f"skill-reader:{m.directory}", os.path.join(root, m.directory),
            {"agentloom:skill": m.content_hash, "agentloom:mount": "skill"},
            identity=(SKILL_READER, SKILL_READER)))
            for m in mounts]
        params = self._params(name, base.workspace_access_point, base.results_access_point,
                              skills=points)
        params["tags"] = [{"key": "agentloom:session", "value": workspaces.session}]
        registered = self.ecs.register_task_definition(**params)
        self.created += 1
        return SkillRevision(
            task_definition=registered["taskDefinition"]["taskDefinitionArn"],
            family=name, access_points=dict(points))

    def _params(self, name: str, workspace_ap: str, results_ap: str, *,
                skills: list[tuple[str, str]] | None = None) -> dict[str, Any]:
        return task_definition(
            family=name, image=self.config.image,
            execution_role_arn=self.config.execution_role_arn,
            task_role_arn=self.config.task_role_arn,
            file_system_id=self.config.file_system_id, workspace_access_point=workspace_ap,
            results_access_point=results_ap, user=f"{self.config.uid}:{self.config.gid}",
            log_group=self.config.log_group, region=self.region, skills=skills or ())

    def command(self, workspaces: EfsWorkspaces, spec: CommandSpec,
                instance_dir: str) -> dict[str, Any]:
        """The step's ``command`` payload: request id, the session's revision (with the
        instance's skills mounted), overrides."""
        task_definition_arn = self.revision(workspaces, self.skill_mounts(workspaces, spec))
        relative = os.path.relpath(instance_dir, workspaces.session_dir())
        inside = "/workspace" if relative == "." else f"/workspace/{relative}"
        task = FargateTaskSpec(cluster=self.config.cluster,
                               task_definition=task_definition_arn,
                               subnets=self.config.subnets,
                               security_groups=[self.config.security_group])
        params = task.run_task(spec, workspace=inside)
        return {"request_id": spec.request_id, "task_definition": task_definition_arn,
                "overrides": sfn_overrides(params["overrides"])}
