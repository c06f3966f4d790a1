"""``Functions``: the three Lambdas (api, step, trigger) built from one local bundle.

Python 3.12 on ARM64 (JSON structured logging through the Lambda log format, X-Ray
active tracing), each in the VPC's egress subnets with its own encrypted log group.
Layers (``LAYERS``): every function takes the Powertools layer built here
(``bundling.powertools_layer``: pyproject's pin, with bytecode; the ``powertoolsLayerArn``
context value names another, e.g. the public one) and the tokenizer layer built here
(``bundling.tokenizer_layer``, of the ``tokenizers`` families): all three create engines —
step for its cycles, api for detail/resolve/supplement/cancel, api and trigger when an ask
starts a run (``SfnRunLauncher.launch`` starts the engine) — and every engine's budget
policy binds a vendor tokenizer for exact model ids at the vendor's endpoint when the
deployment ships it (docs/context.md#token-estimators; without it the byte estimator, with
a warning). The environment is exactly the contract's
(docs/deploy.md): the common variables for all, EFS and sandbox variables for ``step``
only, the trigger definitions for ``trigger`` only. Permissions are granted by the stack
(``stack.py``), which sees every resource; this construct only builds the functions.

Each function has its own role (named ``<prefix>-<function>-<region>``, so a resource
policy can name it without referencing it: the file-system policy would otherwise form a
cycle with the step's EFS mount). No AWS-managed policy: ``AWSLambdaBasicExecutionRole``
and ``AWSLambdaVPCAccessExecutionRole`` write to every log group of the account. The
role's own policy allows log writes to the function's log group only; the actions that
support no resource-level permissions (X-Ray segments, the VPC ENIs Lambda manages, and
what the stack adds through ``unscoped``) are in a separate policy per function,
``<Name>Unscoped``, the only place cdk-nag's ``Resource::*`` finding is acknowledged
(nag.py), so a new ``Resource: "*"`` statement anywhere else fails the synth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from agentloom_infra.bundling import (
    FAMILIES,
    lambda_code,
    powertools_layer_code,
    tokenizer_layer_code,
)
from agentloom_infra.config import Function
from agentloom_infra.workspace import MOUNT_PATH

HANDLERS = {"api": "agentloom.handlers.api.handler",
            "step": "agentloom.handlers.step.handler",
            "trigger": "agentloom.handlers.trigger.handler"}
TIMEOUTS = {"api": cdk.Duration.seconds(29), "step": cdk.Duration.seconds(600),
            "trigger": cdk.Duration.seconds(60)}
# Measured need with headroom (tests/benchmarks/bench_memory.py, docs/deploy.md "Function
# memory"): peak RSS 233 MB (step, o200k loaded), 125 MB (api, trigger); the three vendor
# tokenizers add up to ~225 MB in one warm container. 512 MB = 0.5 GB-s per second of
# model wait (the step is I/O-bound; ~0.29 vCPU). Context ``memoryMb`` overrides.
MEMORY_MB: dict[Function, int] = {"api": 512, "step": 512, "trigger": 512}
LAYERS = dict.fromkeys(HANDLERS, ("powertools", "tokenizers"))
# Lambda's ENI management for a function in a VPC (what AWSLambdaVPCAccessExecutionRole
# grants, without its logs:* on every log group); the Describe* actions and ENIs created at
# run time support no narrower resource.
VPC_ENI_ACTIONS = ["ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces",
                   "ec2:DescribeSubnets", "ec2:DeleteNetworkInterface",
                   "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"]
XRAY_ACTIONS = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"]


@dataclass(frozen=True, kw_only=True)
class _Shared:
    prefix: str
    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    security_group: ec2.ISecurityGroup
    key: kms.IKey
    removal_policy: cdk.RemovalPolicy


class Functions(Construct):
    """The stack's functions; the tokenizer layer holds the ``tokenizers`` families (none:
    no layer, and every connection counts with the byte estimator).

    Attributes: ``api``, ``step``, ``trigger`` (``lambda_.Function``), ``step_timeout``,
    ``memory_mb`` (MB per function: ``MEMORY_MB`` with the ``memoryMb`` context over it),
    ``role_arns`` (function → its role's ARN, built from the name: no reference),
    ``unscoped`` (function → the policy for actions without resource-level permissions)."""

    def __init__(self, scope: Construct, construct_id: str, *, prefix: str,
                 vpc: ec2.IVpc, subnets: ec2.SubnetSelection,
                 security_group: ec2.ISecurityGroup, key: kms.IKey,
                 common_env: Mapping[str, str], step_env: Mapping[str, str],
                 trigger_env: Mapping[str, str], access_point: efs.IAccessPoint,
                 reserved_concurrency: Mapping[Function, int] | None = None,
                 memory_mb: Mapping[Function, int] | None = None,
                 powertools_layer_arn: str | None = None,
                 otel_layer_arn: str | None = None,
                 tokenizers: tuple[str, ...] = tuple(sorted(FAMILIES)),
                 removal_policy: cdk.RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self._code = lambda_code()
        powertools: lambda_.ILayerVersion = (
            lambda_.LayerVersion.from_layer_version_arn(self, "Powertools",
                                                        powertools_layer_arn)
            if powertools_layer_arn else lambda_.LayerVersion(
                self, "Powertools", code=powertools_layer_code(),
                compatible_runtimes=[lambda_.Runtime.PYTHON_3_12],
                compatible_architectures=[lambda_.Architecture.ARM_64],
                description="aws-lambda-powertools at pyproject's pin, with bytecode",
                removal_policy=removal_policy))
        self.layers: dict[str, lambda_.ILayerVersion] = {
            "powertools": powertools,
            **({"tokenizers": lambda_.LayerVersion(
                self, "Tokenizers", code=tokenizer_layer_code(tokenizers),
                compatible_runtimes=[lambda_.Runtime.PYTHON_3_12],
                compatible_architectures=[lambda_.Architecture.ARM_64],
                description=f"vendor tokenizers: {', '.join(tokenizers)} (exact token "
                            "counts)",
                removal_policy=removal_policy)} if tokenizers else {})}
        # The GenAI spans reach X-Ray through the ADOT layer when one is given (its
        # version is per region: docs/operations.md "Reading traces and logs"); without
        # it they are no-ops and Lambda's own X-Ray segments remain.
        self._otel: lambda_.ILayerVersion | None = None
        if otel_layer_arn:
            self._otel = lambda_.LayerVersion.from_layer_version_arn(self, "Adot",
                                                                     otel_layer_arn)
        self._shared = _Shared(prefix=prefix, vpc=vpc, subnets=subnets,
                               security_group=security_group, key=key,
                               removal_policy=removal_policy)
        self.step_timeout = TIMEOUTS["step"]
        self.role_arns: dict[Function, str] = {}
        self.unscoped: dict[Function, iam.Policy] = {}
        reserved = dict(reserved_concurrency or {})
        self.memory_mb: dict[Function, int] = {**MEMORY_MB, **(memory_mb or {})}
        self.api = self._function("api", env=common_env, reserved=reserved.get("api"))
        self.step = self._function(
            "step", env={**common_env, **step_env}, reserved=reserved.get("step"),
            file_system=self._mount(access_point))
        self.trigger = self._function("trigger", env={**common_env, **trigger_env},
                                      reserved=reserved.get("trigger"))

    def function(self, name: Function) -> lambda_.Function:
        """The function called ``name``."""
        return {"api": self.api, "step": self.step, "trigger": self.trigger}[name]

    def _function(self, name: Function, *, env: Mapping[str, str], reserved: int | None,
                  file_system: lambda_.FileSystem | None = None) -> lambda_.Function:
        shared = self._shared
        prefix, key, removal_policy = shared.prefix, shared.key, shared.removal_policy
        function_name = f"{prefix}-{name}"
        log_group = logs.LogGroup(
            self, f"{name.capitalize()}Logs", log_group_name=f"/aws/lambda/{function_name}",
            retention=logs.RetentionDays.THREE_MONTHS, encryption_key=key,
            removal_policy=removal_policy)
        role = self._role(name, log_group)
        function = lambda_.Function(
            self, name.capitalize(), function_name=function_name, role=role,
            runtime=lambda_.Runtime.PYTHON_3_12, architecture=lambda_.Architecture.ARM_64,
            handler=HANDLERS[name], code=self._code, timeout=TIMEOUTS[name],
            memory_size=self.memory_mb[name],
            environment={**env, **({"AWS_LAMBDA_EXEC_WRAPPER": "/opt/otel-instrument"}
                                   if self._otel else {})},
            environment_encryption=key,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN, log_group=log_group,
            vpc=shared.vpc, vpc_subnets=shared.subnets,
            security_groups=[shared.security_group],
            filesystem=file_system, reserved_concurrent_executions=reserved,
            layers=[*(self.layers[layer] for layer in LAYERS[name] if layer in self.layers),
                    *([self._otel] if self._otel else [])])
        # Active tracing set on the resource: the L2 property would add its X-Ray
        # statement (Resource "*") to the role's own policy instead of the unscoped one
        cfn = function.node.default_child
        assert isinstance(cfn, lambda_.CfnFunction)
        cfn.tracing_config = lambda_.CfnFunction.TracingConfigProperty(mode="Active")
        function.node.add_dependency(self.unscoped[name])  # ENIs: before the function
        return function

    @staticmethod
    def _mount(access_point: efs.IAccessPoint) -> lambda_.FileSystem:
        """``FileSystem.from_efs_access_point`` with its ``ClientMount`` on the file
        system instead of ``Resource: "*"`` (both actions through this access point)."""
        fs = access_point.file_system
        return lambda_.FileSystem(
            arn=access_point.access_point_arn, local_mount_path=MOUNT_PATH,
            connections=fs.connections, dependency=[fs.mount_targets_available],
            policies=[iam.PolicyStatement(
                actions=["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"],
                resources=[fs.file_system_arn],
                conditions={"StringEquals": {
                    "elasticfilesystem:AccessPointArn": access_point.access_point_arn}})])

    def _role(self, name: Function, log_group: logs.ILogGroup) -> iam.Role:
        stack = cdk.Stack.of(self)
        role_name = f"{self._shared.prefix}-{name}-{stack.region}"
        role = iam.Role(self, f"{name.capitalize()}Role", role_name=role_name,
                        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description=f"AgentLoom {name} function")
        role.add_to_policy(iam.PolicyStatement(
            actions=["logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[log_group.log_group_arn]))
        self.role_arns[name] = stack.format_arn(service="iam", region="", resource="role",
                                                resource_name=role_name)
        self.unscoped[name] = iam.Policy(
            self, f"{name.capitalize()}Unscoped", roles=[role], statements=[
                iam.PolicyStatement(actions=XRAY_ACTIONS, resources=["*"]),
                iam.PolicyStatement(actions=VPC_ENI_ACTIONS, resources=["*"])])
        return role
