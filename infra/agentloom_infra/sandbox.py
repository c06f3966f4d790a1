"""``CommandSandbox``: the ECS cluster and the Fargate task shape for ``workspace_command``.

The template task definition (family ``<prefix>-base``) carries the container every
session revision copies: ``python -m agentloom.command_entry``, read-only root, a non-root
user, all capabilities dropped, ``nproc``/``nofile`` ulimits, a task-storage ``/tmp``,
awslogs to an encrypted log group. The step Lambda registers one revision per session
(family ``<prefix>-<hash>``, functions/agentloom/sandbox/fargate.py ``task_definition``)
whose EFS volumes use that session's access points; RunTask names only that revision.
The task role exists only for EFS IAM authorization: its one permission (granted in
workspace.py) is mounting this file system through an access point, and its trust policy
admits ECS tasks of this account only. The command can read its credentials; they reach
nothing else (docs/deploy.md, "Threat model of the sandbox"). The image is built from
infra/sandbox/Dockerfile, or taken from context ``sandboxImage``.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = "infra/sandbox/Dockerfile"
CONTAINER = "command"
# The image context is an allow-list (glob ignore with negations): the distribution's
# sources and the Dockerfile, so an infra-only change does not rebuild the image.
IMAGE_CONTEXT_EXCLUDES = ["*", "!README.md", "!pyproject.toml", "!runtime", "!functions",
                          "!infra", "infra/*", "!infra/sandbox", "**/__pycache__",
                          "**/*.pyc"]


class CommandSandbox(Construct):
    """Attributes: ``cluster``, ``execution_role``, ``task_role`` (EFS mounts only),
    ``task_definition`` (the template),
    ``image_uri``, ``log_group``, ``family_prefix``."""

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc,
                 family_prefix: str, key: kms.IKey, uid: int, gid: int,
                 image: str | None = None, cpu: int = 1024, memory_mib: int = 2048,
                 nproc: int = 256, removal_policy: cdk.RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.family_prefix = family_prefix
        self.cluster = ecs.Cluster(self, "Cluster", vpc=vpc,
                                   container_insights_v2=ecs.ContainerInsights.ENABLED)
        self.log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_MONTH,
                                       encryption_key=key, removal_policy=removal_policy)
        self.execution_role = iam.Role(
            self, "ExecutionRole", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
            description="Pulls the sandbox image and writes its logs")
        stack = cdk.Stack.of(self)
        self.task_role = iam.Role(
            self, "TaskRole", description="Mounts the session's EFS access points; nothing "
            "else (EFS IAM authorization)",
            assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com", conditions={
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnLike": {"aws:SourceArn": stack.format_arn(
                    service="ecs", resource="*")}}))
        container_image: ecs.ContainerImage
        if image:
            container_image = ecs.ContainerImage.from_registry(image)
            self.image_uri = image
        else:
            asset = ecr_assets.DockerImageAsset(
                self, "Image", directory=str(REPO_ROOT), file=DOCKERFILE,
                exclude=IMAGE_CONTEXT_EXCLUDES, platform=ecr_assets.Platform.LINUX_AMD64)
            container_image = ecs.ContainerImage.from_docker_image_asset(asset)
            self.image_uri = asset.image_uri
        self.task_definition = ecs.FargateTaskDefinition(
            self, "Template", family=f"{family_prefix}-base", cpu=cpu,
            memory_limit_mib=memory_mib, execution_role=self.execution_role,
            task_role=self.task_role,
            runtime_platform=ecs.RuntimePlatform(
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
                cpu_architecture=ecs.CpuArchitecture.X86_64))
        self.task_definition.add_volume(name="tmp")
        linux = ecs.LinuxParameters(self, "Linux", init_process_enabled=True)
        linux.drop_capabilities(ecs.Capability.ALL)
        container = self.task_definition.add_container(
            CONTAINER, image=container_image, essential=True,
            entry_point=["python", "-m", "agentloom.command_entry"],
            user=f"{uid}:{gid}", readonly_root_filesystem=True,
            working_directory="/workspace", privileged=False,
            linux_parameters=linux,
            logging=ecs.LogDrivers.aws_logs(stream_prefix="command",
                                            log_group=self.log_group))
        container.add_ulimits(
            ecs.Ulimit(name=ecs.UlimitName.NPROC, soft_limit=nproc, hard_limit=nproc),
            ecs.Ulimit(name=ecs.UlimitName.NOFILE, soft_limit=1024, hard_limit=1024),
            ecs.Ulimit(name=ecs.UlimitName.CORE, soft_limit=0, hard_limit=0))
        container.add_mount_points(ecs.MountPoint(source_volume="tmp", container_path="/tmp",
                                                  read_only=False))
