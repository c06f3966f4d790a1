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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
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
    ``memory_mb`` (MB per function: ``MEMORY_MB`` with the ``memoryMb`` context over it)."""

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
        reserved = dict(reserved_concurrency or {})
        self.memory_mb: dict[Function, int] = {**MEMORY_MB, **(memory_mb or {})}
        self.api = self._function("api", env=common_env, reserved=reserved.get("api"))
        self.step = self._function(
            "step", env={**common_env, **step_env}, reserved=reserved.get("step"),
            file_system=lambda_.FileSystem.from_efs_access_point(access_point, MOUNT_PATH))
        self.trigger = self._function("trigger", env={**common_env, **trigger_env},
                                      reserved=reserved.get("trigger"))

    def _function(self, name: Function, *, env: Mapping[str, str], reserved: int | None,
                  file_system: lambda_.FileSystem | None = None) -> lambda_.Function:
        shared = self._shared
        prefix, key, removal_policy = shared.prefix, shared.key, shared.removal_policy
        function_name = f"{prefix}-{name}"
        log_group = logs.LogGroup(
            self, f"{name.capitalize()}Logs", log_group_name=f"/aws/lambda/{function_name}",
            retention=logs.RetentionDays.THREE_MONTHS, encryption_key=key,
            removal_policy=removal_policy)
        return lambda_.Function(
            self, name.capitalize(), function_name=function_name,
            runtime=lambda_.Runtime.PYTHON_3_12, architecture=lambda_.Architecture.ARM_64,
            handler=HANDLERS[name], code=self._code, timeout=TIMEOUTS[name],
            memory_size=self.memory_mb[name],
            environment={**env, **({"AWS_LAMBDA_EXEC_WRAPPER": "/opt/otel-instrument"}
                                   if self._otel else {})},
            environment_encryption=key, tracing=lambda_.Tracing.ACTIVE,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN, log_group=log_group,
            vpc=shared.vpc, vpc_subnets=shared.subnets,
            security_groups=[shared.security_group],
            filesystem=file_system, reserved_concurrent_executions=reserved,
            layers=[*(self.layers[layer] for layer in LAYERS[name] if layer in self.layers),
                    *([self._otel] if self._otel else [])])
