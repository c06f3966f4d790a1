"""The Lambda entry point: real event JSON through ``agentloom.handlers.trigger``."""

from __future__ import annotations

from agentloom.handlers import trigger

from .conftest import CONTEXT, World, rule_input, sqs_batch, sqs_record


def test_the_handler_serves_each_shape_through_the_configured_service(world: World) -> None:
    trigger.configure(world.service())
    try:
        started = trigger.handler(rule_input(), CONTEXT)
        assert started["status"] == "started"
        batch = sqs_batch(sqs_record("a1", {"detail": {"n": 1}}),
                          sqs_record("a2", {"trigger": "stranger"}))
        assert trigger.handler(batch, CONTEXT) == {"batchItemFailures": [
            {"itemIdentifier": "a2"}]}
        assert len(world.runs()) == 2
    finally:
        trigger.configure(None)
