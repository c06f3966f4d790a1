"""What a synthesized stage costs per month with no traffic: every resource of the
template priced, so a new billable resource cannot slip in unpriced.

``monthly(template)`` → ``{line: (count, dollars)}``, summed by ``total``. Each resource
type is either priced per unit (``PRICES``) or listed in ``FREE_AT_REST`` with why it
costs nothing while idle; any other type raises ``KeyError`` naming it (price it here and
in docs/deploy.md). ``OUTSIDE`` prices what the stage keeps outside its template (the
sandbox image in CDK's bootstrap repository). docs/deploy.md "What it costs at rest"
quotes the same lines.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DEPLOY_MD = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"

# us-east-1 list prices, as published on the AWS pricing pages (VPC/NAT, PrivateLink,
# public IPv4, KMS, CloudWatch, ECR), 730 hours a month; as of 2026-12-02.
PRICES_AS_OF = "2026-12-02, us-east-1"
HOURS = 730
NAT_HOUR = 0.045  # + $0.045 / GB processed
IPV4_HOUR = 0.005  # any public IPv4 address in use (the NAT's)
ENDPOINT_AZ_HOUR = 0.01  # interface endpoint, per AZ; + $0.01 / GB processed
KMS_KEY_MONTH = 1.00  # + $0.03 / 10,000 requests
ALARM_MONTH = 0.10  # standard-resolution metric alarm
ECR_GB_MONTH = 0.10
SANDBOX_IMAGE_GB = 0.2  # the sandbox image (python:3.12-slim + the distribution)

PRICES = {  # resource type → (line, monthly price of one unit)
    "AWS::EC2::NatGateway": ("NAT gateway", NAT_HOUR * HOURS),
    "AWS::EC2::EIP": ("public IPv4 address (the NAT's)", IPV4_HOUR * HOURS),
    "AWS::KMS::Key": ("KMS customer-managed key", KMS_KEY_MONTH),
    "AWS::CloudWatch::Alarm": ("CloudWatch alarm", ALARM_MONTH),
}
ENDPOINT_LINE = "interface endpoint × AZ"  # AWS::EC2::VPCEndpoint, Interface: per subnet
OUTSIDE = {"ECR storage of the sandbox image": (1, SANDBOX_IMAGE_GB * ECR_GB_MONTH)}

FREE_AT_REST = {
    # no charge for the resource itself
    "AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::RouteTable", "AWS::EC2::Route",
    "AWS::EC2::SubnetRouteTableAssociation", "AWS::EC2::InternetGateway",
    "AWS::EC2::VPCGatewayAttachment", "AWS::EC2::SecurityGroup",
    "AWS::EC2::SecurityGroupEgress", "AWS::EC2::SecurityGroupIngress",
    "AWS::IAM::Role", "AWS::IAM::Policy", "AWS::KMS::Alias", "AWS::SQS::QueuePolicy",
    "AWS::SNS::TopicPolicy", "AWS::Lambda::Permission", "AWS::Lambda::EventSourceMapping",
    "AWS::ECS::Cluster", "AWS::ECS::TaskDefinition", "AWS::EFS::AccessPoint",
    "AWS::EFS::MountTarget", "AWS::ApiGatewayV2::Integration", "AWS::ApiGatewayV2::Route",
    "AWS::ApiGatewayV2::Authorizer", "AWS::ApiGatewayV2::Stage",
    "AWS::Cognito::UserPoolClient", "Custom::AWS", "AWS::Lambda::EventInvokeConfig",
    "Custom::VectorBucketTeardown", "Custom::CDKBucketDeployment", "Custom::S3AutoDeleteObjects",
    "AWS::CloudFront::OriginAccessControl", "AWS::CloudFront::ResponseHeadersPolicy",
    "AWS::S3::BucketPolicy", "AWS::Cognito::UserPoolDomain",
    # per request, per execution or per delivery only
    "AWS::Lambda::Function", "AWS::StepFunctions::StateMachine", "AWS::ApiGatewayV2::Api",
    "AWS::SQS::Queue", "AWS::SNS::Topic", "AWS::Events::Rule", "AWS::Scheduler::Schedule",
    "AWS::CloudFront::Distribution",  # per request and GB out (an always-free tier)
    "AWS::Cognito::UserPool",  # per monthly active user (Lite/Essentials: 10,000 free)
    # DNS Firewall: per million queries processed (and per domain listed: a handful here)
    "AWS::Route53Resolver::FirewallDomainList", "AWS::Route53Resolver::FirewallRuleGroup",
    "AWS::Route53Resolver::FirewallRuleGroupAssociation",
    # per GB stored or ingested: ≈ $0 for an empty stage
    "AWS::DynamoDB::Table", "AWS::EFS::FileSystem", "AWS::Logs::LogGroup",
    "AWS::EC2::FlowLog", "AWS::S3Vectors::VectorBucket", "AWS::Lambda::LayerVersion",
    "AWS::S3::Bucket",  # the console's files (≈ 100 KB) and its access logs
    "AWS::Backup::BackupVault", "AWS::Backup::BackupPlan", "AWS::Backup::BackupSelection",
}


def monthly(template: Mapping[str, Any]) -> dict[str, tuple[int, float]]:
    """Each priced line: how many units the template holds and their monthly dollars."""
    lines: dict[str, tuple[int, float]] = {}

    def add(line: str, count: int, unit: float) -> None:
        held, dollars = lines.get(line, (0, 0.0))
        lines[line] = (held + count, dollars + count * unit)

    for resource in template["Resources"].values():
        kind, props = resource["Type"], resource.get("Properties", {})
        if kind == "AWS::EC2::VPCEndpoint":
            if props.get("VpcEndpointType") == "Interface":
                add(ENDPOINT_LINE, len(props["SubnetIds"]), ENDPOINT_AZ_HOUR * HOURS)
            continue  # a gateway endpoint (S3, DynamoDB) is free
        if kind == "AWS::CloudWatch::Alarm" and "Metrics" in props:
            # a metric math alarm is billed per metric it reads
            metrics = sum(1 for m in props["Metrics"] if "MetricStat" in m)
            add(PRICES[kind][0], metrics, PRICES[kind][1])
        elif kind in PRICES:
            add(*PRICES[kind][:1], 1, PRICES[kind][1])
        elif kind not in FREE_AT_REST:
            raise KeyError(f"{kind} is not priced: add it to tests/support/at_rest.py and "
                           "docs/deploy.md")
    for line, (count, unit) in OUTSIDE.items():
        add(line, count, unit)
    return lines


def total(lines: Mapping[str, tuple[int, float]]) -> float:
    return round(sum(dollars for _, dollars in lines.values()), 2)


def documented_totals() -> dict[str, float]:
    """The ``**total**`` row of docs/deploy.md "What it costs at rest": dev and prod."""
    section = DEPLOY_MD.read_text().split("## What it costs at rest", 1)[1]
    row = next(line for line in section.splitlines() if line.startswith("| **total**"))
    dev, prod = (float(v.replace(",", "")) for v in re.findall(r"\$([\d,]+\.\d\d)", row))
    return {"dev": dev, "prod": prod}
