"""``Alarms``: what an operator must look at, sent to one encrypted SNS topic.

Failed executions of the run state machine; any message in the triggers' DLQ; runs
blocked on an unknown outcome (the EMF metric ``UnknownOutcomes`` in namespace
``AgentLoom``, dimensions ``service=agentloom`` and ``stage``, emitted by the step Lambda through
Powertools Metrics); step Lambda errors. Each alarm's description names the way out in
docs/operations.md.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
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

    def _alarm(self, construct_id: str, prefix: str, metric: cloudwatch.Metric,
               description: str) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self, construct_id, metric=metric, alarm_name=f"{prefix}-{construct_id}",
            alarm_description=description, threshold=0, evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        return alarm
