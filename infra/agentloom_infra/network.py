"""``Network``: the VPC, its endpoints and the security groups the stack shares.

Three subnet tiers per AZ: public (NAT gateways only), private with egress (the Lambdas,
which call model providers through NAT) and isolated (EFS mount targets, the interface
endpoints and the sandbox tasks, which have no route out). ``max_azs`` AZs: one outside
``prod`` by default (context ``maxAzs``), two or more in ``prod``. One NAT gateway
outside ``prod`` (cost; an AZ outage then cuts model calls), one per AZ in ``prod``.

Endpoints, priced in docs/deploy.md ("What it costs at rest"):

- ``SANDBOX_ENDPOINTS``, the interface endpoints a Fargate task (platform 1.4.0) needs to
  start in a subnet with no route out: ecr.api and ecr.dkr (a private image pull) and
  logs (the awslogs driver); the image layers come from S3 through the S3 gateway. EFS
  mount targets are in the VPC and need no endpoint; Fargate tasks need no ECS endpoint.
  They are created in one place (``sandbox_endpoints``) so their policies can be set there.
- The Lambdas reach every other AWS API (KMS, Step Functions, ECS, EFS, S3 Vectors)
  through the NAT gateway: their traffic is a few KB per call, far below the ~209 GB a
  month per AZ at which an interface endpoint ($0.01/AZ-hour + $0.01/GB) costs less than
  NAT processing ($0.045/GB). No code path calls STS (credentials come from the Lambda
  environment), so there is no STS endpoint.
- Gateway endpoints (free): DynamoDB for the Lambda subnets, S3 for the sandbox subnets
  (the image layers; the Lambdas read no S3, and their other S3 traffic — a tool's
  download — goes out through NAT like any other host). The sandbox route tables hold only
  the local route and S3's. Every endpoint's policy is set in endpoints.py.

The sandbox security group has no default egress: only EFS (2049), the interface
endpoints (443) and the S3 prefix list (443, ECR image layers). The prefix list id is not
an attribute of the gateway endpoint, so a lookup custom resource reads it at deploy time.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

# What a Fargate task needs to start with no route out (the only interface endpoints)
SANDBOX_ENDPOINTS = {
    "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
    "EcrDocker": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
}


NO_TRAFFIC = {"CidrIp": "255.255.255.255/32", "Description": "Disallow all traffic",
              "IpProtocol": "icmp", "FromPort": 252, "ToPort": 86}


def _no_default_egress(group: ec2.SecurityGroup) -> None:
    """Keep EC2's default allow-all egress off. CDK writes rules that name another group
    or a prefix list as separate ``SecurityGroupEgress`` resources and then leaves the
    group's own egress list empty, and an empty list is what makes EC2 add allow-all."""
    cfn = group.node.default_child
    assert isinstance(cfn, ec2.CfnSecurityGroup)
    cfn.add_property_override("SecurityGroupEgress", [NO_TRAFFIC])


class Network(Construct):
    """Attributes: ``vpc``, ``lambda_sg``, ``sandbox_sg``, ``endpoint_sg``,
    ``lambda_subnets``, ``isolated_subnets``, ``sandbox_endpoints`` (name → interface
    endpoint), ``gateway_endpoints`` (``"S3"``, ``"DynamoDb"``)."""

    def __init__(self, scope: Construct, construct_id: str, *, max_azs: int,
                 nat_gateways: int, key: kms.IKey,
                 removal_policy: cdk.RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.vpc = ec2.Vpc(self, "Vpc", max_azs=max_azs, nat_gateways=nat_gateways,
                           enable_dns_hostnames=True, enable_dns_support=True,
                           subnet_configuration=[
            ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC,
                                    cidr_mask=24),
            ec2.SubnetConfiguration(name="lambda", cidr_mask=22,
                                    subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            ec2.SubnetConfiguration(name="sandbox", cidr_mask=22,
                                    subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)])
        flow_logs = logs.LogGroup(self, "FlowLogs", retention=logs.RetentionDays.ONE_MONTH,
                                  encryption_key=key, removal_policy=removal_policy)
        self.vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(
            flow_logs), traffic_type=ec2.FlowLogTrafficType.REJECT)
        self.lambda_subnets = ec2.SubnetSelection(
            subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        self.isolated_subnets = ec2.SubnetSelection(
            subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        self.gateway_endpoints = {
            "S3": self.vpc.add_gateway_endpoint(
                "S3", service=ec2.GatewayVpcEndpointAwsService.S3,
                subnets=[self.isolated_subnets]),
            "DynamoDb": self.vpc.add_gateway_endpoint(
                "DynamoDb", service=ec2.GatewayVpcEndpointAwsService.DYNAMODB,
                subnets=[self.lambda_subnets])}
        self.endpoint_sg = ec2.SecurityGroup(
            self, "EndpointSg", vpc=self.vpc, allow_all_outbound=False,
            description="VPC interface endpoints: HTTPS from inside the VPC")
        self.endpoint_sg.add_ingress_rule(ec2.Peer.ipv4(self.vpc.vpc_cidr_block),
                                          ec2.Port.tcp(443), "HTTPS from the VPC")
        self.sandbox_endpoints = self._sandbox_endpoints()
        self.lambda_sg = ec2.SecurityGroup(
            self, "LambdaSg", vpc=self.vpc, allow_all_outbound=True,
            description="AgentLoom Lambdas: HTTPS to model providers, EFS, endpoints")
        self.sandbox_sg = ec2.SecurityGroup(
            self, "SandboxSg", vpc=self.vpc, allow_all_outbound=False,
            description="AgentLoom command sandbox: EFS and the VPC endpoints only")
        _no_default_egress(self.sandbox_sg)
        self.sandbox_sg.add_egress_rule(self.endpoint_sg, ec2.Port.tcp(443),
                                        "VPC interface endpoints (ECR, logs)")
        self.sandbox_sg.add_egress_rule(ec2.Peer.prefix_list(self._s3_prefix_list()),
                                        ec2.Port.tcp(443), "S3 gateway (ECR image layers)")

    def _sandbox_endpoints(self) -> dict[str, ec2.InterfaceVpcEndpoint]:
        """The sandbox's interface endpoints, one ENI per isolated subnet (per AZ)."""
        return {name: self.vpc.add_interface_endpoint(
                    name, service=service, private_dns_enabled=True,
                    subnets=self.isolated_subnets, security_groups=[self.endpoint_sg],
                    open=False)
                for name, service in SANDBOX_ENDPOINTS.items()}

    def _s3_prefix_list(self) -> str:
        region = cdk.Stack.of(self).region
        call = cr.AwsSdkCall(
            service="EC2", action="describeManagedPrefixLists",
            parameters={"Filters": [{"Name": "prefix-list-name",
                                     "Values": [f"com.amazonaws.{region}.s3"]}]},
            physical_resource_id=cr.PhysicalResourceId.of(f"s3-prefix-list-{region}"),
            output_paths=["PrefixLists.0.PrefixListId"])
        lookup = cr.AwsCustomResource(
            self, "S3PrefixList", on_create=call, on_update=call,
            install_latest_aws_sdk=False,
            policy=cr.AwsCustomResourcePolicy.from_statements([iam.PolicyStatement(
                actions=["ec2:DescribeManagedPrefixLists"], resources=["*"])]))
        return lookup.get_response_field("PrefixLists.0.PrefixListId")
