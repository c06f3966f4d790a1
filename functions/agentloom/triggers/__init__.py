"""Triggers: EventBridge rules, EventBridge Scheduler schedules and SQS messages start
runs for a configured agent version and space under a service identity, once per event
(docs/triggers.md). ``agentloom.handlers.trigger`` is the Lambda entry point."""

from agentloom.triggers.config import TriggerConfig, TriggerSpec
from agentloom.triggers.events import TriggerError, TriggerEvent, direct_event, sqs_event
from agentloom.triggers.service import Asker, TriggerService

__all__ = ["Asker", "TriggerConfig", "TriggerError", "TriggerEvent", "TriggerService",
           "TriggerSpec", "direct_event", "sqs_event"]
