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

Nothing is dropped silently: with a rule or a schedule, one more queue,
``<prefix>-trigger-failures`` (CMK, TLS only), receives what could not be delivered — the
rule target's and the schedule target's dead letters (the invocation could not be made
after their retries) and the trigger function's own async on-failure records (it ran
and failed after Lambda's retries). The ``TriggerFailures`` alarm watches it
(docs/operations.md, "Trigger failures").
"""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import jsii
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
ASYNC_RETRIES = 2  # Lambda's own retries of an async invocation (its maximum)
MAX_EVENT_AGE = cdk.Duration.hours(6)  # a start older than this is a failure, not a run


class Triggers(Construct):
    """Attributes: ``queue``, ``dead_letters``, ``rule``, ``schedule`` and ``failures``
    (the rule's and schedule's dead-letter queue; None without either)."""

    def __init__(self, scope: Construct, construct_id: str, *, prefix: str,
                 handler: lambda_.Function, key: kms.IKey,
                 event_pattern: dict[str, Any] | None = None, event_trigger: str | None = None,
                 schedule: str | None = None, schedule_trigger: str | None = None) -> None:
        super().__init__(scope, construct_id)
        self._key = key
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
        self.failures: sqs.Queue | None = None
        if (event_pattern and event_trigger) or (schedule and schedule_trigger):
            self.failures = self._failures(prefix, handler, key)
        if event_pattern and event_trigger:
            self.rule = self._rule(prefix, handler, event_pattern, event_trigger)
        if schedule and schedule_trigger:
            self.schedule = self._schedule(prefix, handler, schedule, schedule_trigger)

    def _failures(self, prefix: str, handler: lambda_.Function, key: kms.IKey) -> sqs.Queue:
        failures = sqs.Queue(
            self, "Failures", queue_name=f"{prefix}-trigger-failures",
            encryption=sqs.QueueEncryption.KMS, encryption_master_key=key, enforce_ssl=True,
            retention_period=cdk.Duration.days(14))
        # EventBridge writes a rule's dead letters with its own principal: it must be able
        # to use the queue's key (Scheduler writes with the schedule's role, granted below)
        key.add_to_resource_policy(iam.PolicyStatement(
            actions=["kms:Decrypt", "kms:GenerateDataKey"], resources=["*"],
            principals=[iam.ServicePrincipal("events.amazonaws.com")],
            conditions={"StringEquals": {"aws:SourceAccount": cdk.Stack.of(self).account}}))
        handler.configure_async_invoke(on_failure=_QueueDestination(failures, key),
                                       retry_attempts=ASYNC_RETRIES,
                                       max_event_age=MAX_EVENT_AGE)
        return failures

    def _rule(self, prefix: str, handler: lambda_.IFunction, pattern: dict[str, Any],
              trigger: str) -> events.Rule:
        rule = events.Rule(self, "Rule", rule_name=f"{prefix}-trigger-{trigger}",
                           description=f"Starts an AgentLoom run (trigger {trigger})",
                           event_pattern=events.EventPattern(source=["placeholder"]))
        cfn = rule.node.default_child
        assert isinstance(cfn, events.CfnRule)
        # Any pattern, verbatim (the typed EventPattern covers a subset of the syntax).
        cfn.add_property_override("EventPattern", pattern)
        rule.add_target(targets.LambdaFunction(
            handler, retry_attempts=4, max_event_age=MAX_EVENT_AGE,
            dead_letter_queue=self.failures, event=(
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
        assert self.failures is not None  # made with a schedule
        # its dead letters, written with this role: the queue and its key, nothing more
        role.add_to_policy(iam.PolicyStatement(actions=["sqs:SendMessage"],
                                               resources=[self.failures.queue_arn]))
        role.add_to_policy(iam.PolicyStatement(actions=["kms:GenerateDataKey", "kms:Decrypt"],
                                               resources=[self._key.key_arn]))
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
                    maximum_retry_attempts=4, maximum_event_age_in_seconds=3600),
                dead_letter_config=scheduler.CfnSchedule.DeadLetterConfigProperty(
                    arn=self.failures.queue_arn)))


@jsii.implements(lambda_.IDestination)
class _QueueDestination:
    """An async on-failure destination on an encrypted queue, granting only what sending
    takes (``SqsDestination`` grants the key's ``Encrypt``/``ReEncrypt*`` too)."""

    def __init__(self, queue: sqs.IQueue, key: kms.IKey) -> None:
        self._queue, self._key = queue, key

    def bind(self, scope: Construct, fn: lambda_.IFunction, *,
             type: lambda_.DestinationType | None = None) -> lambda_.DestinationConfig:
        fn.add_to_role_policy(iam.PolicyStatement(actions=["sqs:SendMessage"],
                                                  resources=[self._queue.queue_arn]))
        fn.add_to_role_policy(iam.PolicyStatement(actions=["kms:GenerateDataKey", "kms:Decrypt"],
                                                  resources=[self._key.key_arn]))
        return lambda_.DestinationConfig(destination=self._queue.queue_arn)
