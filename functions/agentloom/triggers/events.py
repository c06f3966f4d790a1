"""The event shapes a trigger Lambda receives, read into one ``TriggerEvent``.

- EventBridge rule and EventBridge Scheduler targets invoke the function with the input
  the stack writes (infra/agentloom_infra/triggers.py): ``{"trigger", "id", "detail"}``
  — ``id`` is the EventBridge event id, or the scheduler's execution id
  (``<aws.scheduler.execution-id>``) with ``detail.scheduled_time``.
- SQS invokes it with a batch: ``{"Records": [{"messageId", "body", "eventSource":
  "aws:sqs", …}]}``. A body is either ``{"trigger"?, "detail"?}`` (JSON), a whole
  EventBridge event forwarded to the queue (``detail-type``/``detail``), or any other
  text (the detail itself). The message id is the idempotency id; the trigger is the
  body's or ``AGENTLOOM_SQS_TRIGGER``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agentloom_runtime.errors import AgentLoomError

Source = Literal["event", "schedule", "sqs"]
MAX_ID_CHARS = 200


class TriggerError(AgentLoomError):
    """An event that cannot start a run. ``permanent``: delivering it again cannot help
    (an unknown trigger, an unpublished version, a service user who is not a member)."""

    code = "trigger_failed"

    def __init__(self, message: str, *, code: str, permanent: bool = True,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)
        self.code = code
        self.permanent = permanent


@dataclass(frozen=True)
class TriggerEvent:
    trigger: str | None
    event_id: str
    source: Source
    detail: Any

    @property
    def key(self) -> str:
        """The idempotency key: one run per (source, id)."""
        return f"{self.source}:{self.event_id}"


def _id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_CHARS:
        raise TriggerError(f"the {what} has no usable id (1-{MAX_ID_CHARS} characters)",
                           code="event_invalid")
    return value


def direct_event(event: Mapping[str, Any]) -> TriggerEvent:
    """A rule's or a schedule's input."""
    trigger = event.get("trigger")
    if not isinstance(trigger, str) or not trigger:
        raise TriggerError("the event names no trigger: the rule or schedule target input "
                           "must be {\"trigger\", \"id\", \"detail\"} (docs/triggers.md)",
                           code="trigger_missing")
    detail = event.get("detail")
    scheduled = isinstance(detail, Mapping) and "scheduled_time" in detail
    return TriggerEvent(trigger=trigger, event_id=_id(event.get("id"), "event"),
                        source="schedule" if scheduled else "event", detail=detail)


def sqs_event(record: Mapping[str, Any]) -> TriggerEvent:
    """One SQS record (``trigger`` None: the queue's default trigger)."""
    message_id = _id(record.get("messageId"), "SQS message")
    raw = record.get("body")
    body: Any = raw
    if isinstance(raw, str):
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            body = raw  # plain text is the detail itself
    trigger: str | None = None
    detail = body
    if isinstance(body, Mapping):
        if "detail-type" in body and "detail" in body:  # an EventBridge event
            detail = body["detail"]
        elif "trigger" in body or set(body) == {"detail"}:
            named = body.get("trigger")
            if named is not None and (not isinstance(named, str) or not named):
                raise TriggerError("the message's trigger must be a non-empty string",
                                   code="event_invalid")
            trigger, detail = named, body.get("detail")
    return TriggerEvent(trigger=trigger, event_id=message_id, source="sqs", detail=detail)
