"""``Workspace``: the encrypted EFS file system holding every session's workspace.

The step Lambda mounts it through one access point rooted at ``/workspaces`` as POSIX
``uid``/``gid`` (``/mnt/workspaces``). Sandbox tasks never see that root: the step creates
one access point per session (rooted at the session's directory, same uid/gid) on first
use, so a command can reach only its own session (docs/adr/0004). Mount targets live in
the isolated subnets; NFS is open only to the Lambda and sandbox security groups.

Access points bind only the clients that use them, and EFS's default policy lets any NFS
client that reaches a mount target mount the root. ``restrict_mounts`` therefore sets a
file-system policy that refuses, for every principal: a connection without TLS, a mount
(or write) that is not through an access point, and root access. It allows only the step
function's role and the sandbox task role, each through an access point (the Lambda's;
session and skill access points), and the sandbox task role's own policy denies it the
Lambda's access point, whose root spans every session. Anonymous (non-IAM) clients match
no Allow, so IAM authorization is required (ECS sends the task role:
``authorizationConfig.iam``).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

ROOT = "/workspaces"
MOUNT = ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"]
ACCESS_POINT = "elasticfilesystem:AccessPointArn"
MOUNT_PATH = "/mnt/workspaces"


class Workspace(Construct):
    """Attributes: ``file_system``, ``access_point`` (the Lambda's), ``uid``, ``gid``."""

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc,
                 subnets: ec2.SubnetSelection, clients: list[ec2.ISecurityGroup],
                 key: kms.IKey, uid: int = 1000, gid: int = 1000,
                 removal_policy: cdk.RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.uid, self.gid = uid, gid
        self.security_group = ec2.SecurityGroup(
            self, "Sg", vpc=vpc, allow_all_outbound=False,
            description="AgentLoom workspaces (EFS): NFS from the Lambdas and sandbox")
        self.file_system = efs.FileSystem(
            self, "FileSystem", vpc=vpc, vpc_subnets=subnets, encrypted=True, kms_key=key,
            security_group=self.security_group,
            performance_mode=efs.PerformanceMode.GENERAL_PURPOSE,
            throughput_mode=efs.ThroughputMode.ELASTIC,
            lifecycle_policy=efs.LifecyclePolicy.AFTER_30_DAYS,
            enable_automatic_backups=removal_policy == cdk.RemovalPolicy.RETAIN,
            removal_policy=removal_policy)
        for client in clients:
            # both sides: ingress on the EFS group, egress on the client's (if it has rules)
            self.file_system.connections.allow_default_port_from(client, "NFS")
        self.access_point = self.file_system.add_access_point(
            "LambdaAccessPoint", path=ROOT,
            posix_user=efs.PosixUser(uid=str(uid), gid=str(gid)),
            create_acl=efs.Acl(owner_uid=str(uid), owner_gid=str(gid), permissions="750"))

    def access_points_arn(self) -> str:
        """Every access point of this account and region (their ids are not tied to a
        file system in the ARN; the statements below name the file system as resource)."""
        return cdk.Stack.of(self).format_arn(service="elasticfilesystem",
                                             resource="access-point", resource_name="*")

    def restrict_mounts(self, *, lambda_role: iam.IPrincipal, sandbox_role: iam.IRole
                        ) -> None:
        """The file-system policy (module docstring) and the sandbox task role's grant.

        The policy is a property of the file system, so it cannot name the Lambda's
        access point (whose id depends on the file system: a cycle); the sandbox task
        role's own policy denies that access point instead (an explicit deny wins
        wherever it is written)."""
        fs, lambda_ap = self.file_system, self.access_point.access_point_arn
        anyone = [iam.AnyPrincipal()]
        for statement in (
            iam.PolicyStatement(sid="DenyWithoutTls", effect=iam.Effect.DENY,
                                principals=anyone, actions=["*"],
                                conditions={"Bool": {"aws:SecureTransport": "false"}}),
            iam.PolicyStatement(sid="DenyWithoutAccessPoint", effect=iam.Effect.DENY,
                                principals=anyone, actions=MOUNT,
                                conditions={"Null": {ACCESS_POINT: "true"}}),
            iam.PolicyStatement(sid="DenyRootAccess", effect=iam.Effect.DENY,
                                principals=anyone,
                                actions=["elasticfilesystem:ClientRootAccess"]),
            iam.PolicyStatement(
                sid="AllowStepAndSandboxThroughAccessPoints",
                principals=[lambda_role, sandbox_role], actions=MOUNT, conditions={
                    "ArnLike": {ACCESS_POINT: self.access_points_arn()},
                    "Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}})):
            fs.add_to_resource_policy(statement)
        sandbox_role.add_to_principal_policy(iam.PolicyStatement(
            actions=MOUNT, resources=[fs.file_system_arn],
            conditions={"ArnLike": {ACCESS_POINT: self.access_points_arn()}}))
        # the Lambda's access point is rooted above every session
        sandbox_role.add_to_principal_policy(iam.PolicyStatement(
            effect=iam.Effect.DENY, actions=MOUNT, resources=[fs.file_system_arn],
            conditions={"ArnEquals": {ACCESS_POINT: lambda_ap}}))
