"""``RunStateMachine``: the Standard workflow that drives one run, one step per Task.

The shape is the contract of issue 11 (docs/deploy.md, "Contract"): Step (lambda:invoke,
the full form so every Lambda error keeps its name for Retry) → Next? → RunCommand
(ecs:runTask.sync, the session's task-definition revision by reference) → AfterCommand →
Step, or Rollover (startExecution of this same state machine with the next generation) →
Succeed; a Step that fails after its retries goes to RecordFailure, which invokes the step
function once more with the failure so the run is marked (blocked-unknown or failed),
never left running.

Nothing stalls for a transient AWS error (docs/operations.md, "Run orchestration"):
RunCommand retries RunTask while no task was started (throttling, capacity — ECS's
``Failures`` surface as ``AmazonECS.Unknown``) and hands how the task ended to the next
Step at ``$.command.task`` (``{"Error": ""}``, or the Catch's ``Error``/``Cause``), so a
task that never started is recorded as a command that did not run, not an unknown
outcome. Rollover retries StartExecution (``ExecutionAlreadyExists`` is success: the next
execution runs) and, on a final failure, goes to RecordFailure: the run then stands
``interrupted`` with the ``resume`` way out.

RunCommand and Rollover are ``CustomState`` because their parameters come from the
payload (``TaskDefinition.$``, ``$$.StateMachine.Id``) and the CDK task classes want
objects; their IAM is therefore written here by hand, scoped to the sandbox family prefix,
the cluster and this state machine's own ARN (built from its fixed name, which also keeps
the step function's ``AGENTLOOM_STATE_MACHINE_ARN`` free of a dependency cycle).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

SERVICE_ERRORS = ["Lambda.ServiceException", "Lambda.AWSLambdaException",
                  "Lambda.SdkClientException", "Lambda.ClientExecutionTimeoutException",
                  "Lambda.TooManyRequestsException"]
COMMAND_TIMEOUT_SECONDS = 3900
# A JSON null in Parameters: jsii turns Python None into undefined, which CDK drops.
NULL = "States.StringToJson('null')"
ECS_EVENTS_RULE = "StepFunctionsGetEventsForECSTaskRule"
# RunTask errors raised before any task was started: safe to call RunTask again. (A task
# that started and failed is States.TaskFailed — never retried: its command may have run.
# Nor is ECS.ServerException: a 5xx may come after the task was created.)
RUN_TASK_NOT_STARTED = ["ECS.AmazonECSException", "ECS.ThrottlingException",
                        "AmazonECS.Unknown"]
ALREADY_STARTED = "StepFunctions.ExecutionAlreadyExistsException"


def state_machine_arn(scope: Construct, name: str) -> str:
    """The ARN of the state machine called ``name`` in ``scope``'s stack (no reference to
    the resource, so functions the machine invokes can carry it without a cycle)."""
    return cdk.Stack.of(scope).format_arn(
        service="states", resource="stateMachine", resource_name=name,
        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)


class RunStateMachine(Construct):
    """The run workflow. Attributes: ``state_machine``, ``log_group``, ``name``, ``arn``."""

    def __init__(self, scope: Construct, construct_id: str, *, name: str,
                 step_function: lambda_.IFunction, step_timeout: cdk.Duration,
                 cluster: ecs.ICluster, subnet_ids: Sequence[str],
                 security_group: ec2.ISecurityGroup, task_family_prefix: str,
                 sandbox_execution_role: iam.IRole, encryption_key: Any = None,
                 log_level: sfn.LogLevel = sfn.LogLevel.ERROR,
                 removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY) -> None:
        super().__init__(scope, construct_id)
        self.name = name
        self.arn = state_machine_arn(self, name)
        self.log_group = logs.LogGroup(
            self, "Logs", log_group_name=f"/aws/vendedlogs/states/{name}",
            retention=logs.RetentionDays.THREE_MONTHS, removal_policy=removal_policy,
            encryption_key=encryption_key)
        timeout = sfn.Timeout.duration(step_timeout.plus(cdk.Duration.seconds(60)))
        step = self._step_task("Step", step_function, timeout, {})
        record = self._step_task("RecordFailure", step_function, timeout,
                                 {"failure": sfn.JsonPath.object_at("$.failure")},
                                 command_null=True)
        step.add_catch(record.next(sfn.Fail(self, "Failed")), errors=["States.ALL"],
                       result_path="$.failure")
        run_command = sfn.CustomState(self, "RunCommand", state_json=self._run_command_json(
            cluster, subnet_ids, security_group))
        # how the task ended, on both paths: {"Error": ""} (ResultSelector) or the Catch's
        after = sfn.Pass(self, "AfterCommand", parameters={
            "run_id.$": "$.run_id", "generation.$": "$.generation",
            "command": {"request_id.$": "$.command.request_id",
                        "task.$": "$.command_task"}})
        run_command.add_retry(errors=RUN_TASK_NOT_STARTED, interval=cdk.Duration.seconds(5),
                              backoff_rate=2, max_attempts=5)
        run_command.add_catch(after, errors=["States.ALL"], result_path="$.command_task")
        run_command.next(after)
        after.next(step)
        rollover = sfn.CustomState(self, "Rollover", state_json={
            "Type": "Task", "Resource": "arn:aws:states:::states:startExecution",
            "Parameters": {"StateMachineArn.$": "$$.StateMachine.Id",
                           "Name.$": "$.next_execution.name",
                           "Input": {"run_id.$": "$.run_id",
                                     "generation.$": "$.next_execution.generation",
                                     "command.$": NULL}},
            "TimeoutSeconds": 60})
        finished = sfn.Succeed(self, "Succeed")
        # the first matching retrier applies: ExecutionAlreadyExists is never retried but
        # caught as success (a retried start whose first call went through)
        rollover.add_retry(errors=[ALREADY_STARTED], max_attempts=0)
        rollover.add_retry(errors=["States.ALL"], interval=cdk.Duration.seconds(2),
                           backoff_rate=2, max_attempts=6)
        rollover.add_catch(finished, errors=[ALREADY_STARTED])
        rollover.add_catch(record, errors=["States.ALL"], result_path="$.failure")
        rollover.next(finished)
        choice = (sfn.Choice(self, "Next?")
                  .when(sfn.Condition.string_equals("$.next", "continue"), step)
                  .when(sfn.Condition.string_equals("$.next", "command"), run_command)
                  .when(sfn.Condition.string_equals("$.next", "rollover"), rollover)
                  .when(sfn.Condition.or_(*(sfn.Condition.string_equals("$.next", n)
                                            for n in ("done", "blocked", "stale"))),
                        finished))
        step.next(choice)
        self.state_machine = sfn.StateMachine(
            self, "Resource", state_machine_name=name,
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=self._definition(step),
            tracing_enabled=True, removal_policy=removal_policy,
            logs=sfn.LogOptions(destination=self.log_group, level=log_level,
                                include_execution_data=False))
        step_function.grant_invoke(self.state_machine.role)
        self._grant_custom_states(cluster, task_family_prefix, sandbox_execution_role)

    @staticmethod
    def _definition(start: sfn.State) -> sfn.DefinitionBody:
        """The graph as JSON (tokens inside the JSON string become an ``Fn::Join``, as
        ``from_chainable`` makes)."""
        asl = json.loads(json.dumps(sfn.StateGraph(start, "run").to_graph_json()))
        return sfn.DefinitionBody.from_string(json.dumps(asl, separators=(",", ":")))

    def _step_task(self, state_id: str, function: lambda_.IFunction, timeout: sfn.Timeout,
                   extra: dict[str, Any], *, command_null: bool = False) -> tasks.LambdaInvoke:
        payload: dict[str, Any] = {
            "run_id": sfn.JsonPath.string_at("$.run_id"),
            "generation": sfn.JsonPath.number_at("$.generation")}
        if command_null:
            payload["command.$"] = NULL
        else:
            payload["command"] = sfn.JsonPath.object_at("$.command")
        payload.update(extra)
        task = tasks.LambdaInvoke(
            self, state_id, lambda_function=function,
            payload=sfn.TaskInput.from_object(payload), output_path="$.Payload",
            retry_on_service_exceptions=False, task_timeout=timeout)
        task.add_retry(errors=SERVICE_ERRORS, interval=cdk.Duration.seconds(2),
                       backoff_rate=2, max_attempts=6)
        task.add_retry(errors=["Lambda.Unknown"], interval=cdk.Duration.seconds(5),
                       backoff_rate=2, max_attempts=2)
        return task

    @staticmethod
    def _run_command_json(cluster: ecs.ICluster, subnet_ids: Sequence[str],
                          security_group: ec2.ISecurityGroup) -> dict[str, Any]:
        return {
            "Type": "Task", "Resource": "arn:aws:states:::ecs:runTask.sync",
            "Parameters": {
                "Cluster": cluster.cluster_arn, "LaunchType": "FARGATE",
                "PlatformVersion": "1.4.0",
                "TaskDefinition.$": "$.command.task_definition",
                "Overrides.$": "$.command.overrides",
                "NetworkConfiguration": {"AwsvpcConfiguration": {
                    "Subnets": list(subnet_ids),
                    "SecurityGroups": [security_group.security_group_id],
                    "AssignPublicIp": "DISABLED"}},
                "StartedBy.$": "$.run_id"},
            # success (the container exited 0) as an empty error: the task description
            # stays out of the state
            "ResultSelector": {"Error": ""}, "ResultPath": "$.command_task",
            "TimeoutSeconds": COMMAND_TIMEOUT_SECONDS}

    def _grant_custom_states(self, cluster: ecs.ICluster, family_prefix: str,
                             execution_role: iam.IRole) -> None:
        stack = cdk.Stack.of(self)
        role = self.state_machine.role
        task_definitions = stack.format_arn(
            service="ecs", resource="task-definition", resource_name=f"{family_prefix}-*")
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["ecs:RunTask"], resources=[task_definitions],
            conditions={"ArnEquals": {"ecs:cluster": cluster.cluster_arn}}))
        tasks_in_cluster = stack.format_arn(
            service="ecs", resource="task", resource_name=f"{cluster.cluster_name}/*")
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["ecs:StopTask", "ecs:DescribeTasks"], resources=[tasks_in_cluster]))
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["events:PutTargets", "events:PutRule", "events:DescribeRule"],
            resources=[stack.format_arn(service="events", resource="rule",
                                        resource_name=ECS_EVENTS_RULE)]))
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["iam:PassRole"], resources=[execution_role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}}))
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["states:StartExecution"], resources=[self.arn]))
