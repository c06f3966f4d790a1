"""``Triggers``: the event sources that start runs through the trigger Lambda.

- SQS: a queue (CMK-encrypted, TLS only) with a dead-letter queue after 5 receives; the
  event source mapping reports batch item failures, so one bad message is retried alone.
  A message body names its trigger (``{"trigger": …}``) or uses ``AGENTLOOM_SQS_TRIGGER``.
- EventBridge rule (context ``eventPattern`` + ``eventTrigger``): the target input is
  ``{"trigger", "id" (the event id), "detail"}``.
- EventBridge Scheduler (context ``scheduleCron`` + ``scheduleTrigger``): a schedule with
  its own role allowed to invoke only the trigger Lambda; input ``{"trigger", "id" (the
  scheduler execution id), "detail": {"scheduled_time"}}``.
``id`` is the idempotency key of the trigger Lambda (Powertools), so a redelivered event
starts no second run.
"""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from constructs import Construct

MAX_RECEIVES = 5


class Triggers(Construct):
    """Attributes: ``queue``, ``dead_letters``, ``rule`` and ``schedule`` (None when not
    configured)."""

    def __init__(self, scope: Construct, construct_id: str, *, prefix: str,
                 handler: lambda_.Function, key: kms.IKey,
                 event_pattern: dict[str, Any] | None = None, event_trigger: str | None = None,
                 schedule: str | None = None, schedule_trigger: str | None = None) -> None:
        super().__init__(scope, construct_id)
        handler_timeout = handler.timeout or cdk.Duration.minutes(1)
        self.dead_letters = sqs.Queue(
            self, "DeadLetters", queue_name=f"{prefix}-triggers-dlq",
            encryption=sqs.QueueEncryption.KMS, encryption_master_key=key,
            enforce_ssl=True, retention_period=cdk.Duration.days(14))
        self.queue = sqs.Queue(
            self, "Queue", queue_name=f"{prefix}-triggers",
            encryption=sqs.QueueEncryption.KMS, encryption_master_key=key, enforce_ssl=True,
            visibility_timeout=cdk.Duration.seconds(6 * handler_timeout.to_seconds()),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dead_letters,
                                                  max_receive_count=MAX_RECEIVES))
        handler.add_event_source(sources.SqsEventSource(
            self.queue, batch_size=10, report_batch_item_failures=True,
            max_batching_window=cdk.Duration.seconds(1)))
        self.rule: events.Rule | None = None
        self.schedule: scheduler.CfnSchedule | None = None
        if event_pattern and event_trigger:
            self.rule = self._rule(prefix, handler, event_pattern, event_trigger)
        if schedule and schedule_trigger:
            self.schedule = self._schedule(prefix, handler, schedule, schedule_trigger)

    def _rule(self, prefix: str, handler: lambda_.IFunction, pattern: dict[str, Any],
              trigger: str) -> events.Rule:
        rule = events.Rule(self, "Rule", rule_name=f"{prefix}-trigger-{trigger}",
                           description=f"Starts an AgentLoom run (trigger {trigger})",
                           event_pattern=events.EventPattern(source=["placeholder"]))
        cfn = rule.node.default_child
        assert isinstance(cfn, events.CfnRule)
        # Any pattern, verbatim (the typed EventPattern covers a subset of the syntax).
        cfn.add_property_override("EventPattern", pattern)
        rule.add_target(targets.LambdaFunction(handler, retry_attempts=4, event=(
            events.RuleTargetInput.from_object({
                "trigger": trigger, "id": events.EventField.event_id,
                "detail": events.EventField.from_path("$.detail")}))))
        return rule

    def _schedule(self, prefix: str, handler: lambda_.IFunction, expression: str,
                  trigger: str) -> scheduler.CfnSchedule:
        role = iam.Role(self, "ScheduleRole",
                        assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com"),
                        description="EventBridge Scheduler: invoke the trigger Lambda")
        role.add_to_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"],
                                               resources=[handler.function_arn]))
        account = cdk.Stack.of(self).account
        role.assume_role_policy.add_statements(iam.PolicyStatement(  # type: ignore[union-attr]
            actions=["sts:AssumeRole"], effect=iam.Effect.DENY,
            principals=[iam.ServicePrincipal("scheduler.amazonaws.com")],
            conditions={"StringNotEquals": {"aws:SourceAccount": account}}))
        return scheduler.CfnSchedule(
            self, "Schedule", name=f"{prefix}-trigger-{trigger}",
            schedule_expression=expression, schedule_expression_timezone="UTC",
            flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
            target=scheduler.CfnSchedule.TargetProperty(
                arn=handler.function_arn, role_arn=role.role_arn,
                input=json.dumps({"trigger": trigger, "id": "<aws.scheduler.execution-id>",
                                  "detail": {"scheduled_time":
                                             "<aws.scheduler.scheduled-time>"}}),
                retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                    maximum_retry_attempts=4, maximum_event_age_in_seconds=3600)))
