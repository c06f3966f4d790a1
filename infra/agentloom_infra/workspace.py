"""``Workspace``: the encrypted EFS file system holding every session's workspace.

The step Lambda mounts it through one access point rooted at ``/workspaces`` as POSIX
``uid``/``gid`` (``/mnt/workspaces``). Sandbox tasks never see that root: the step creates
one access point per session (rooted at the session's directory, same uid/gid) on first
use, so a command can reach only its own session (docs/adr/0004). Mount targets live in
the isolated subnets; NFS is open only to the Lambda and sandbox security groups.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_kms as kms
from constructs import Construct

ROOT = "/workspaces"
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
