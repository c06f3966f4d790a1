"""``Alarms``: what an operator must look at, sent to one encrypted SNS topic.

Failed executions of the run state machine; any message in the triggers' DLQ; runs
blocked on an unknown outcome (the EMF metric ``UnknownOutcomes`` in namespace
``AgentLoom``, dimensions ``service=agentloom`` and ``stage``, emitted by the step Lambda through
Powertools Metrics); step Lambda errors. Each alarm's description names the way out in
docs/operations.md.

``watch_trigger_failures``: the rule's and schedule's dead letters (``TriggerFailures``).
``watch_health`` (retained stages; a disposable one keeps its cost at rest low): errors of
the api and trigger functions, throttles of each function (``<Fn>Throttles``: a
throttled step is retried, then fails its execution), API 5xx and DynamoDB throttles
(read and write throttle events of every table, one alarm).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

NAMESPACE = "AgentLoom"
SERVICE = "agentloom"


class Alarms(Construct):
    """Attributes: ``topic``, ``failed_executions``, ``dead_letters``,
    ``unknown_outcomes``, ``step_errors``."""

    def __init__(self, scope: Construct, construct_id: str, *, prefix: str, stage: str,
                 key: kms.IKey, state_machine: sfn.IStateMachine, dead_letters: sqs.IQueue,
                 step: lambda_.IFunction) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "Topic", topic_name=f"{prefix}-alarms", master_key=key,
                               enforce_ssl=True)
        # CloudWatch publishes to the encrypted topic only if the key lets it; without this
        # statement alarms change state but no notification is ever delivered.
        key.add_to_resource_policy(iam.PolicyStatement(
            actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=["*"],
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            conditions={"StringEquals": {"aws:SourceAccount": cdk.Stack.of(self).account}}))
        five = cdk.Duration.minutes(5)
        self.failed_executions = self._alarm(
            "FailedExecutions", prefix, state_machine.metric_failed(period=five),
            "Run executions failed: see docs/operations.md, 'Blocked and failed runs'")
        self.dead_letters = self._alarm(
            "DeadLetters", prefix,
            dead_letters.metric_approximate_number_of_messages_visible(period=five,
                                                                       statistic="Maximum"),
            "Trigger messages in the DLQ: see docs/operations.md, 'DLQ replay'")
        self.unknown_outcomes = self._alarm(
            "UnknownOutcomes", prefix, cloudwatch.Metric(
                namespace=NAMESPACE, metric_name="UnknownOutcomes",
                dimensions_map={"service": SERVICE, "stage": stage}, statistic="Sum",
                period=five),
            "Runs blocked on an unknown outcome: resolve them (docs/operations.md)")
        self.step_errors = self._alarm(
            "StepErrors", prefix, step.metric_errors(period=five),
            "Step Lambda errors: read its logs and traces (docs/operations.md)")
        self.prefix = prefix

    def watch_trigger_failures(self, failures: sqs.IQueue) -> cloudwatch.Alarm:
        return self._alarm(
            "TriggerFailures", self.prefix, failures.metric_approximate_number_of_messages_visible(
                period=cdk.Duration.minutes(5), statistic="Maximum"),
            "An EventBridge or Scheduler trigger could not start its run: see "
            "docs/operations.md, 'Trigger failures'")

    def watch_health(self, *, functions: Mapping[str, lambda_.IFunction],
                     api: apigw.IHttpApi, tables: Sequence[dynamodb.ITable]) -> None:
        five = cdk.Duration.minutes(5)
        for name, fn in functions.items():
            title = name.capitalize()
            if name != "step":  # StepErrors above
                self._alarm(f"{title}Errors", self.prefix, fn.metric_errors(period=five),
                            f"{name} Lambda errors: read its logs (docs/operations.md, "
                            "'Service health alarms')")
            self._alarm(f"{title}Throttles", self.prefix, fn.metric_throttles(period=five),
                        f"{name} Lambda throttled: raise its reserved concurrency or the "
                        "account limit (docs/operations.md, 'Service health alarms')")
        self._alarm("Api5xx", self.prefix, api.metric_server_error(period=five),
                    "HTTP API 5xx responses: read the api Lambda's logs and the access log "
                    "(docs/operations.md, 'Service health alarms')")
        throttles = {f"{kind[0].lower()}{i}": table.metric(f"{kind}ThrottleEvents",
                                                           statistic="Sum", period=five)
                     for i, table in enumerate(tables) for kind in ("Read", "Write")}
        self._alarm("TableThrottles", self.prefix, cloudwatch.MathExpression(
            expression=" + ".join(throttles), using_metrics=throttles, period=five),
            "DynamoDB throttled requests on a stage table (docs/operations.md, 'Service "
            "health alarms')")

    def _alarm(self, construct_id: str, prefix: str, metric: cloudwatch.IMetric,
               description: str) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self, construct_id, metric=metric, alarm_name=f"{prefix}-{construct_id}",
            alarm_description=description, threshold=0, evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        return alarm
