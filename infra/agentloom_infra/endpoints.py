"""Policies of the VPC endpoints: each allows only what its callers need, on this
account's resources (an endpoint without a policy lets any principal reach any resource,
another account's included, e.g. a ``PUT`` with a pre-signed URL to a foreign bucket).

- ecr.api, ecr.dkr (the sandbox's image pull): ``GetAuthorizationToken`` (no resource)
  and the pull actions on this account's repositories (and the ``sandboxImage``
  repository when it lives elsewhere), by principals of this account.
- logs (the sandbox's awslogs driver): ``CreateLogStream``/``PutLogEvents`` on the
  sandbox log group, by principals of this account.
- S3 gateway (sandbox subnets only): ``GetObject`` on the ECR layer bucket of the region
  (``prod-<region>-starport-layer-bucket``, ECR's docs "Minimum Amazon S3 bucket
  permissions"), the only S3 an image pull reads; the layer URLs are pre-signed by ECR,
  so there is no principal condition. The stack has no bucket its code reads, so no
  other S3 is reachable from the sandbox — no ``PUT`` anywhere.
- DynamoDB gateway (Lambda subnets): the item operations of ``grants`` on this stack's
  tables, by principals of this account.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs

from agentloom_infra.grants import BATCH_WRITE, ITEM_ACTIONS

PULL_ACTIONS = ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
                "ecr:BatchCheckLayerAvailability"]
ECR_IMAGE = re.compile(r"^(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
                       r"([^:@]+)")
LAYER_BUCKET = "prod-{region}-starport-layer-bucket"


def image_repository(stack: cdk.Stack, image: str | None) -> str | None:
    """The ECR repository ARN of an image URI (``sandboxImage``), or None (an asset)."""
    found = ECR_IMAGE.match(image or "")
    if found is None:
        return None
    account, region, name = found.groups()
    return stack.format_arn(service="ecr", account=account, region=region,
                            resource="repository", resource_name=name)


def restrict_endpoints(*, interface: Mapping[str, ec2.InterfaceVpcEndpoint],
                       gateway: Mapping[str, ec2.GatewayVpcEndpoint],
                       log_group: logs.ILogGroup, tables: Iterable[dynamodb.ITable],
                       image: str | None) -> None:
    """Set every endpoint's policy (module docstring)."""
    stack = cdk.Stack.of(log_group)
    anyone = [iam.AnyPrincipal()]
    ours = {"StringEquals": {"aws:PrincipalAccount": stack.account}}
    repositories = [stack.format_arn(service="ecr", resource="repository",
                                     resource_name="*")]
    foreign = image_repository(stack, image)
    if foreign is not None:
        repositories.append(foreign)
    for name in ("EcrApi", "EcrDocker"):
        interface[name].add_to_policy(iam.PolicyStatement(
            principals=anyone, actions=["ecr:GetAuthorizationToken"], resources=["*"],
            conditions=ours))
        interface[name].add_to_policy(iam.PolicyStatement(
            principals=anyone, actions=PULL_ACTIONS, resources=repositories,
            conditions=ours))
    interface["Logs"].add_to_policy(iam.PolicyStatement(
        principals=anyone, actions=["logs:CreateLogStream", "logs:PutLogEvents"],
        resources=[log_group.log_group_arn], conditions=ours))
    layers = LAYER_BUCKET.format(region=stack.region)
    gateway["S3"].add_to_policy(iam.PolicyStatement(
        principals=anyone, actions=["s3:GetObject"],
        resources=[f"arn:{stack.partition}:s3:::{layers}/*"]))
    gateway["DynamoDb"].add_to_policy(iam.PolicyStatement(
        principals=anyone, actions=[*ITEM_ACTIONS, BATCH_WRITE],
        resources=[table.table_arn for table in tables], conditions=ours))
