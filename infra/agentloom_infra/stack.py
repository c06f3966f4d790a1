"""``AgentLoomStack``: the constructs wired together, with every grant in one place.

Order matters only for references: data stores and network first, then the workspace and
sandbox, the functions (their environment names the state machine by its fixed ARN, so
the machine may reference the step function without a cycle), the state machine, the
console's distribution (the API's CORS names its origin), the API, the console's files
(their config.json names the API and its client), triggers and alarms. ``_grant*`` below
is the whole of each role's permissions beyond its log group, VPC attachment and X-Ray
(functions.py); statements on actions that support no resource-level permissions go to
the function's ``unscoped`` policy (the only one whose ``Resource: "*"`` cdk-nag finding
is acknowledged, nag.py).
"""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from agentloom_infra.alarms import Alarms
from agentloom_infra.config import StageConfig
from agentloom_infra.console import ConsoleSite
from agentloom_infra.data_stores import DataStores
from agentloom_infra.dns_firewall import DnsFirewall
from agentloom_infra.endpoints import restrict_endpoints
from agentloom_infra.functions import Functions
from agentloom_infra.grants import grant_items, grant_key_use
from agentloom_infra.http_api import (
    CONSOLE_SCOPES,
    HttpApi,
    default_domain_prefix,
    hosted_ui_url,
)
from agentloom_infra.knowledge import KnowledgeVectors
from agentloom_infra.nag import acknowledge
from agentloom_infra.network import Network
from agentloom_infra.sandbox import CommandSandbox
from agentloom_infra.state_machine import RunStateMachine, state_machine_arn
from agentloom_infra.triggers import Triggers
from agentloom_infra.workspace import MOUNT_PATH, Workspace
from agentloom_infra.workspace import ROOT as WORKSPACE_ROOT


class AgentLoomStack(cdk.Stack):
    """One stage of AgentLoom. Construct attributes: ``data``, ``network``, ``workspace``,
    ``sandbox``, ``dns``, ``functions``, ``runs``, ``console`` (None with context
    ``console=false``), ``http``, ``triggers``, ``alarms``; and ``config``, the stage's
    context values."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig,
                 **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        removal = cdk.RemovalPolicy.RETAIN if config.retain else cdk.RemovalPolicy.DESTROY
        prefix = config.prefix
        self.data = DataStores(self, "Data", prefix=prefix, removal_policy=removal)
        key = self.data.key
        self.network = Network(self, "Network", max_azs=config.azs,
                               nat_gateways=config.azs if config.retain else 1, key=key,
                               removal_policy=removal)
        vpc = self.network.vpc
        self.workspace = Workspace(
            self, "Workspace", vpc=vpc, subnets=self.network.isolated_subnets, key=key,
            clients=[self.network.lambda_sg, self.network.sandbox_sg], removal_policy=removal)
        self.sandbox = CommandSandbox(
            self, "Sandbox", vpc=vpc, family_prefix=f"{prefix}-sbx", key=key,
            uid=self.workspace.uid, gid=self.workspace.gid, image=config.sandbox_image,
            removal_policy=removal)
        restrict_endpoints(interface=self.network.sandbox_endpoints,
                           gateway=self.network.gateway_endpoints,
                           log_group=self.sandbox.log_group, image=config.sandbox_image,
                           tables=[self.data.checkpoints, self.data.platform,
                                   self.data.idempotency])
        self.dns = DnsFirewall(self, "Dns", vpc=vpc, prefix=prefix,
                               extra_domains=config.dns_allowed_domains)
        isolated = vpc.select_subnets(subnet_type=self.network.isolated_subnets.subnet_type)
        run_name = f"{prefix}-run"
        self.functions = Functions(
            self, "Functions", prefix=prefix, vpc=vpc, subnets=self.network.lambda_subnets,
            security_group=self.network.lambda_sg, key=key,
            access_point=self.workspace.access_point, removal_policy=removal,
            reserved_concurrency=config.reservations, memory_mb=config.memory_mb,
            powertools_layer_arn=config.powertools_layer_arn,
            otel_layer_arn=config.otel_layer_arn, tokenizers=config.tokenizers,
            common_env=self._common_env(config, state_machine_arn(self, run_name)),
            step_env=self._step_env(config, ",".join(isolated.subnet_ids)),
            trigger_env={"AGENTLOOM_IDEMPOTENCY_TABLE": self.data.idempotency.table_name,
                         "AGENTLOOM_TRIGGERS": json.dumps(config.triggers, sort_keys=True),
                         "AGENTLOOM_SQS_TRIGGER": config.sqs_trigger or ""})
        # Every function that builds engines (the api and trigger start runs, the step
        # drives them) gets the same capability set, so a run's tool catalog is the same
        # wherever it is attached.
        self.knowledge = KnowledgeVectors(self, "Knowledge", prefix=prefix, key=key,
                                          removal_policy=removal)
        for fn in (self.functions.api, self.functions.step, self.functions.trigger):
            self.knowledge.grant(fn, write=fn is self.functions.api)
            fn.add_environment("AGENTLOOM_VECTOR_BUCKET", self.knowledge.bucket_name)
        self.runs = RunStateMachine(
            self, "Runs", name=run_name, step_function=self.functions.step,
            step_timeout=self.functions.step_timeout, cluster=self.sandbox.cluster,
            subnet_ids=isolated.subnet_ids, security_group=self.network.sandbox_sg,
            task_family_prefix=self.sandbox.family_prefix,
            sandbox_execution_role=self.sandbox.execution_role, encryption_key=key,
            log_level=sfn.LogLevel(config.state_machine_log_level), removal_policy=removal)
        domain_prefix = config.console_domain_prefix or default_domain_prefix(self, prefix)
        sign_in = None if config.jwt_issuer else hosted_ui_url(self, domain_prefix)
        self.console = ConsoleSite(self, "Console", sign_in=sign_in,
                                   removal_policy=removal) if config.console else None
        self.http = HttpApi(self, "Http", prefix=prefix, handler=self.functions.api, key=key,
                            issuer=config.jwt_issuer, audience=config.jwt_audience,
                            mfa=cognito.Mfa(config.user_pool_mfa),
                            console_origin=self.console.origin if self.console else None,
                            console_domain_prefix=domain_prefix, removal_policy=removal)
        if self.console is not None:
            self.console.deploy(self._console_config(sign_in))
        self.triggers = Triggers(
            self, "Triggers", prefix=prefix, handler=self.functions.trigger, key=key,
            event_pattern=config.event_pattern, event_trigger=config.event_trigger,
            schedule=config.schedule_cron, schedule_trigger=config.schedule_trigger)
        self.alarms = Alarms(self, "Alarms", prefix=prefix, stage=config.stage, key=key,
                             state_machine=self.runs.state_machine,
                             dead_letters=self.triggers.dead_letters,
                             step=self.functions.step)
        if self.triggers.failures is not None:
            self.alarms.watch_trigger_failures(self.triggers.failures)
        if config.retain:
            fns = self.functions
            self.alarms.watch_health(
                functions={"api": fns.api, "step": fns.step, "trigger": fns.trigger},
                api=self.http.api, tables=[self.data.checkpoints, self.data.platform,
                                           self.data.idempotency])
        self._grant()
        self._outputs()
        acknowledge(self)

    def _console_config(self, sign_in: str | None) -> dict[str, Any]:
        """config.json: the Cognito hosted UI; with an existing issuer (no client of the
        console's is known), a pasted bearer token (``kind: token``), the issuer named."""
        assert self.console is not None
        if self.http.console_client is None:
            return {"api": self.http.url,
                    "auth": {"kind": "token", "issuer": self.config.jwt_issuer}}
        return {"api": self.http.url, "auth": {
            "kind": "cognito", "domain": sign_in,
            "client_id": self.http.console_client.user_pool_client_id,
            "scopes": list(CONSOLE_SCOPES), "redirect_uri": self.console.url}}

    def _common_env(self, config: StageConfig, machine_arn: str) -> dict[str, str]:
        return {"AGENTLOOM_CHECKPOINT_TABLE": self.data.checkpoints.table_name,
                "AGENTLOOM_PLATFORM_TABLE": self.data.platform.table_name,
                "AGENTLOOM_KMS_KEY_ID": self.data.key.key_arn,
                "AGENTLOOM_STATE_MACHINE_ARN": machine_arn,
                "POWERTOOLS_SERVICE_NAME": "agentloom",
                "POWERTOOLS_METRICS_NAMESPACE": "AgentLoom",
                "AGENTLOOM_STAGE": config.stage}

    def _step_env(self, config: StageConfig, subnets: str) -> dict[str, str]:
        sandbox = self.sandbox
        return {"AGENTLOOM_WORKSPACE_ROOT": MOUNT_PATH,
                "AGENTLOOM_EFS_FILE_SYSTEM_ID": self.workspace.file_system.file_system_id,
                # The Lambda's access point root: session access points are rooted below it
                "AGENTLOOM_EFS_ROOT_PATH": WORKSPACE_ROOT,
                "AGENTLOOM_SANDBOX_CLUSTER": sandbox.cluster.cluster_arn,
                "AGENTLOOM_SANDBOX_FAMILY_PREFIX": sandbox.family_prefix,
                "AGENTLOOM_SANDBOX_EXECUTION_ROLE_ARN": sandbox.execution_role.role_arn,
                "AGENTLOOM_SANDBOX_TASK_ROLE_ARN": sandbox.task_role.role_arn,
                "AGENTLOOM_SANDBOX_IMAGE": sandbox.image_uri,
                "AGENTLOOM_SANDBOX_SUBNETS": subnets,
                "AGENTLOOM_SANDBOX_SECURITY_GROUP":
                    self.network.sandbox_sg.security_group_id,
                "AGENTLOOM_SANDBOX_LOG_GROUP": sandbox.log_group.log_group_name,
                "AGENTLOOM_SANDBOX_UID": str(self.workspace.uid),
                "AGENTLOOM_SANDBOX_GID": str(self.workspace.gid),
                "AGENTLOOM_ROLLOVER_CYCLES": str(config.rollover_cycles)}

    def _grant(self) -> None:
        fns = self.functions
        for fn in (fns.api, fns.step, fns.trigger):
            grant_items(fn, [self.data.checkpoints], batch_write=True)
            grant_items(fn, [self.data.platform])
            grant_key_use(fn, self.data.key)
        grant_items(fns.trigger, [self.data.idempotency])
        machine = self.runs.state_machine
        machine.grant_start_execution(fns.api)
        machine.grant_start_execution(fns.trigger)
        executions = self.format_arn(service="states", resource="execution",
                                     resource_name=f"{self.runs.name}:*",
                                     arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)
        fns.api.add_to_role_policy(iam.PolicyStatement(
            actions=["states:StopExecution", "states:DescribeExecution"],
            resources=[executions]))
        # The launcher asks whether a run is still driven (SessionService) before it starts
        fns.trigger.add_to_role_policy(iam.PolicyStatement(
            actions=["states:DescribeExecution"], resources=[executions]))
        self._grant_sandbox_control(fns.api, fns.unscoped["api"])
        self._grant_sandbox_control(fns.step, fns.unscoped["step"])
        self._grant_sandbox_setup(fns.step, fns.unscoped["step"])
        self._grant_sandbox_teardown(fns.api, fns.unscoped["api"])
        self.workspace.restrict_mounts(lambda_role=iam.ArnPrincipal(fns.role_arns["step"]),
                                       sandbox_role=self.sandbox.task_role)
        # The policy names the step role by ARN (no reference: a cycle), and EFS refuses
        # a principal that does not exist yet: the file system waits for the role alone
        # (not its default policy, which references the file system)
        fs_resource = self.workspace.file_system.node.default_child
        step_role = fns.step.role
        assert isinstance(fs_resource, cdk.CfnResource) and step_role is not None
        role_resource = step_role.node.default_child
        assert isinstance(role_resource, cdk.CfnResource)
        fs_resource.add_resource_dependency(role_resource)
        # RunTask of a revision with a task role passes that role too
        self.runs.state_machine.role.add_to_principal_policy(iam.PolicyStatement(
            actions=["iam:PassRole"], resources=[self.sandbox.task_role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}}))

    def _grant_sandbox_control(self, fn: lambda_.Function, unscoped: iam.Policy) -> None:
        """Cancel: find the run's task (ListTasks startedBy) and stop it."""
        cluster = self.sandbox.cluster
        unscoped.add_statements(iam.PolicyStatement(
            actions=["ecs:ListTasks"], resources=["*"],
            conditions={"ArnEquals": {"ecs:cluster": cluster.cluster_arn}}))
        fn.add_to_role_policy(iam.PolicyStatement(
            actions=["ecs:StopTask", "ecs:DescribeTasks"], resources=[self.format_arn(
                service="ecs", resource="task", resource_name=f"{cluster.cluster_name}/*")]))

    def _grant_sandbox_setup(self, fn: lambda_.Function, unscoped: iam.Policy) -> None:
        """Per-session isolation (docs/adr/0004): an access point and a task-definition
        revision per session, created by the step on first use."""
        fs = self.workspace.file_system
        fn.add_to_role_policy(iam.PolicyStatement(
            actions=["elasticfilesystem:CreateAccessPoint"], resources=[fs.file_system_arn]))
        # Tag-on-create is authorized against the new access point, whose id is unknown;
        # only as part of CreateAccessPoint (scoped to this file system above), so no
        # existing access point can be retagged. (No code path calls DescribeAccessPoints.)
        fn.add_to_role_policy(iam.PolicyStatement(
            actions=["elasticfilesystem:TagResource"],
            resources=[self.workspace.access_points_arn()],
            conditions={"StringEquals": {
                "elasticfilesystem:CreateAction": "CreateAccessPoint"}}))
        unscoped.add_statements(iam.PolicyStatement(
            actions=["ecs:RegisterTaskDefinition", "ecs:DescribeTaskDefinition"],
            resources=["*"]))  # neither action supports resource-level permissions
        fn.add_to_role_policy(iam.PolicyStatement(
            actions=["ecs:TagResource"], resources=[self.format_arn(
                service="ecs", resource="task-definition",
                resource_name=f"{self.sandbox.family_prefix}-*")]))
        fn.add_to_role_policy(iam.PolicyStatement(
            actions=["iam:PassRole"], resources=[self.sandbox.execution_role.role_arn,
                                                 self.sandbox.task_role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}}))

    def _grant_sandbox_teardown(self, fn: lambda_.Function, unscoped: iam.Policy) -> None:
        """A deleted session's access points, revisions and files (functions/agentloom/
        aws/teardown.py): list this file system's access points, delete those tagged as a
        session's own (never a skill version's: ``agentloom:mount`` is ``skill``),
        deregister and delete the stage's sandbox revisions, invoke the step function."""
        fs = self.workspace.file_system
        fn.add_environment("AGENTLOOM_EFS_FILE_SYSTEM_ID", fs.file_system_id)
        # its files on the volume: the step, which mounts it, removes them when the api
        # invokes it with a teardown event (functions/agentloom/aws/session_files.py)
        step = self.functions.step
        fn.add_environment("AGENTLOOM_STEP_FUNCTION_NAME", step.function_name)
        fn.add_to_role_policy(iam.PolicyStatement(
            actions=["lambda:InvokeFunction"], resources=[step.function_arn]))
        # listed by file system (FileSystemId); the access points are the listed resources
        fn.add_to_role_policy(iam.PolicyStatement(
            actions=["elasticfilesystem:DescribeAccessPoints"],
            resources=[fs.file_system_arn, self.workspace.access_points_arn()]))
        fn.add_to_role_policy(iam.PolicyStatement(
            actions=["elasticfilesystem:DeleteAccessPoint"],
            resources=[self.workspace.access_points_arn()],
            conditions={"StringEquals": {
                "aws:ResourceTag/agentloom:mount": ["workspace", "results"]}}))
        unscoped.add_statements(iam.PolicyStatement(
            actions=["ecs:DeregisterTaskDefinition"],
            resources=["*"]))  # no resource-level permissions
        fn.add_to_role_policy(iam.PolicyStatement(
            actions=["ecs:DeleteTaskDefinitions"], resources=[self.format_arn(
                service="ecs", resource="task-definition",
                resource_name=f"{self.sandbox.family_prefix}-*")]))

    def _outputs(self) -> None:
        cdk.CfnOutput(self, "ApiUrl", value=self.http.url)
        cdk.CfnOutput(self, "StateMachineArn", value=self.runs.state_machine.state_machine_arn)
        cdk.CfnOutput(self, "TriggerQueueUrl", value=self.triggers.queue.queue_url)
        cdk.CfnOutput(self, "AlarmTopicArn", value=self.alarms.topic.topic_arn)
        if self.console is not None:
            cdk.CfnOutput(self, "ConsoleUrl", value=self.console.url)
        if self.http.user_pool and self.http.client:
            cdk.CfnOutput(self, "UserPoolId", value=self.http.user_pool.user_pool_id)
            cdk.CfnOutput(self, "UserPoolClientId",
                          value=self.http.client.user_pool_client_id)
