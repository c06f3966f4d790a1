"""The environment contract of the AWS functions (docs/deploy.md, "Contract"), parsed once.

CDK sets these variables; ``AwsConfig.from_environ`` is the only place that reads them and
raises ``ConfigError`` naming the first missing or malformed one. Every function needs the
common part; the step function also needs the workspace and sandbox part
(``require_sandbox``); the API function has no EFS and no sandbox variables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agentloom_runtime.errors import ConfigError

DEFAULT_ROLLOVER_CYCLES = 500
MAX_ROLLOVER_CYCLES = 3_000  # ~7 history events per cycle, far below the 25,000 cap
# An invocation starts another engine step only with this much time left before its
# timeout: the model request's own default timeout (120 s) and a margin for the commit.
DEFAULT_STEP_RESERVE_SECONDS = 150


def _need(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConfigError(f"the environment variable {name} is not set (the deployment "
                          "sets it; see docs/deploy.md, Contract)",
                          details={"code": "config_missing", "variable": name})
    return value


def _int(env: Mapping[str, str], name: str, default: int | None = None, *,
         low: int = 0, high: int = 2**31) -> int:
    raw = env.get(name, "").strip()
    if not raw and default is not None:
        return default
    text = raw or _need(env, name)
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise ConfigError(f"the environment variable {name} must be an integer in "
                          f"{low}..{high}; got {text!r}",
                          details={"code": "config_invalid", "variable": name})
    return value


@dataclass(frozen=True)
class SandboxConfig:
    """What the step function needs to run commands on Fargate (per-session isolation:
    docs/adr/0004-per-session-command-isolation.md)."""

    workspace_root: str  # the Lambda's EFS mount, e.g. /mnt/workspaces
    file_system_id: str
    cluster: str
    family_prefix: str
    execution_role_arn: str
    task_role_arn: str  # mounts the session's access points (EFS IAM authorization)
    image: str
    subnets: tuple[str, ...]
    security_group: str
    log_group: str
    uid: int
    gid: int
    efs_root_path: str  # where workspace_root sits on the file system ("/" by default)

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> SandboxConfig:
        subnets = tuple(s.strip() for s in _need(env, "AGENTLOOM_SANDBOX_SUBNETS").split(",")
                        if s.strip())
        root = _need(env, "AGENTLOOM_WORKSPACE_ROOT")
        if not root.startswith("/mnt/"):
            raise ConfigError("AGENTLOOM_WORKSPACE_ROOT must be the Lambda's EFS mount "
                              f"under /mnt/; got {root!r}",
                              details={"code": "config_invalid",
                                       "variable": "AGENTLOOM_WORKSPACE_ROOT"})
        efs_root = env.get("AGENTLOOM_EFS_ROOT_PATH", "/").strip() or "/"
        return cls(workspace_root=root,
                   file_system_id=_need(env, "AGENTLOOM_EFS_FILE_SYSTEM_ID"),
                   cluster=_need(env, "AGENTLOOM_SANDBOX_CLUSTER"),
                   family_prefix=_need(env, "AGENTLOOM_SANDBOX_FAMILY_PREFIX"),
                   execution_role_arn=_need(env, "AGENTLOOM_SANDBOX_EXECUTION_ROLE_ARN"),
                   task_role_arn=_need(env, "AGENTLOOM_SANDBOX_TASK_ROLE_ARN"),
                   image=_need(env, "AGENTLOOM_SANDBOX_IMAGE"), subnets=subnets,
                   security_group=_need(env, "AGENTLOOM_SANDBOX_SECURITY_GROUP"),
                   log_group=_need(env, "AGENTLOOM_SANDBOX_LOG_GROUP"),
                   uid=_int(env, "AGENTLOOM_SANDBOX_UID", low=1, high=2**31 - 1),
                   gid=_int(env, "AGENTLOOM_SANDBOX_GID", low=1, high=2**31 - 1),
                   efs_root_path="/" + efs_root.strip("/") if efs_root != "/" else "/")


@dataclass(frozen=True)
class AwsConfig:
    checkpoint_table: str
    platform_table: str
    kms_key_id: str
    state_machine_arn: str
    stage: str
    region: str
    rollover_cycles: int
    step_reserve_seconds: int = DEFAULT_STEP_RESERVE_SECONDS
    sandbox: SandboxConfig | None = None
    vector_bucket: str | None = None  # S3 Vectors bucket of knowledge bases; none: off
    # the workspace file system: the API function removes a deleted session's access
    # points on it (agentloom.aws.teardown); none: the platform has no sandbox
    file_system_id: str | None = None
    # the step function, which the API function asks to remove a deleted session's files
    # on the volume it mounts (agentloom.aws.session_files); none: the files stay
    step_function: str | None = None

    @property
    def workspace_root(self) -> str:
        """The EFS mount (the step function's; the api function has none)."""
        return self.sandbox.workspace_root if self.sandbox else "/mnt/workspaces"

    @property
    def volume_id(self) -> str:
        """The workspace volume's identity, the same in every function of a stage (the API
        function binds runs to it without mounting it)."""
        return f"agentloom-{self.stage}"

    def require_sandbox(self) -> SandboxConfig:
        if self.sandbox is None:
            raise ConfigError("this function has no workspace volume or command sandbox "
                              "(AGENTLOOM_WORKSPACE_ROOT and AGENTLOOM_SANDBOX_* are set on "
                              "the step function only)", details={"code": "config_missing"})
        return self.sandbox

    @classmethod
    def from_environ(cls, env: Mapping[str, str], *, sandbox: bool = False) -> AwsConfig:
        return cls(checkpoint_table=_need(env, "AGENTLOOM_CHECKPOINT_TABLE"),
                   platform_table=_need(env, "AGENTLOOM_PLATFORM_TABLE"),
                   kms_key_id=_need(env, "AGENTLOOM_KMS_KEY_ID"),
                   state_machine_arn=_need(env, "AGENTLOOM_STATE_MACHINE_ARN"),
                   stage=_need(env, "AGENTLOOM_STAGE"),
                   region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
                   or "us-east-1",
                   rollover_cycles=_int(env, "AGENTLOOM_ROLLOVER_CYCLES",
                                        DEFAULT_ROLLOVER_CYCLES, low=1,
                                        high=MAX_ROLLOVER_CYCLES),
                   step_reserve_seconds=_int(env, "AGENTLOOM_STEP_RESERVE_SECONDS",
                                             DEFAULT_STEP_RESERVE_SECONDS, low=0, high=900),
                   sandbox=SandboxConfig.from_environ(env) if sandbox else None,
                   vector_bucket=env.get("AGENTLOOM_VECTOR_BUCKET", "").strip() or None,
                   file_system_id=env.get("AGENTLOOM_EFS_FILE_SYSTEM_ID", "").strip() or None,
                   step_function=env.get("AGENTLOOM_STEP_FUNCTION_NAME", "").strip() or None)


def is_aws(env: Mapping[str, str]) -> bool:
    """Whether the environment describes an AWS deployment (the API function then wires
    DynamoDB, KMS and Step Functions instead of a local state directory)."""
    return bool(env.get("AGENTLOOM_PLATFORM_TABLE"))
