"""Each event shape starts one run for the configured agent version and space under the
service identity; a redelivered event starts none; one bad SQS message fails only
itself; every refusal has a stable code."""

from __future__ import annotations

import logging

import pytest

from agentloom.platform.errors import Unavailable
from agentloom.triggers import TriggerConfig, TriggerError
from agentloom_runtime.errors import ConfigError

from .conftest import (
    CONTEXT,
    SERVICE_USER,
    World,
    rule_input,
    schedule_input,
    sqs_batch,
    sqs_record,
)


def test_an_eventbridge_rule_event_delivered_twice_starts_one_run(world: World) -> None:
    service = world.service()
    first = service.handle(rule_input(), CONTEXT)
    again = service.handle(rule_input(), CONTEXT)
    assert first["status"] == "started" and again == first
    (job,) = world.runs()
    assert (job.kind, job.run.run_id) == ("ask", first["run_id"])
    assert (job.run.space_id, job.run.agent_id, job.run.version, job.run.user_id) == \
        (world.space_id, world.agent_id, 1, SERVICE_USER)
    assert job.question is not None and '"order_id": "o-1234"' in job.question
    assert job.question.startswith("Summarise this order event: {")
    session = world.store.sessions.get(first["session_id"])
    assert session is not None and session.value.user_id == SERVICE_USER
    # another event is another run, in its own session
    other = service.handle(rule_input("0e2b6a1c-0000-4000-8000-000000000001"), CONTEXT)
    assert other["run_id"] != first["run_id"] and other["session_id"] != first["session_id"]


def test_a_schedule_invocation_starts_the_latest_version(world: World) -> None:
    result = world.service().handle(schedule_input(), CONTEXT)
    (job,) = world.runs()
    assert result["run_id"] == job.run.run_id and job.run.version == 1
    assert job.question == 'Nightly report. {"scheduled_time": "2026-12-01T02:00:00Z"}'
    world.service().handle(schedule_input(), CONTEXT)  # the scheduler retried the same execution
    assert len(world.runs()) == 1


def test_a_batch_with_one_bad_message_reports_exactly_that_item(world: World) -> None:
    service = world.service()
    batch = sqs_batch(
        sqs_record("059f36b4-87a3-44ab-83d2-661975830a7d", {"detail": {"ticket": 7}}),
        sqs_record("2e1424d4-f796-459a-8184-9c92662be6da", {"trigger": "no-such-trigger"}),
        sqs_record("ffd4a4ef-1f25-4a8d-9d7e-32b3ba7e8a91", "plain text message"),
        sqs_record("3b9f1c2e-0d4a-4f6b-8e7a-1c2d3e4f5a6b", {
            "version": "0", "id": "ev-1", "detail-type": "Order Paid", "source": "shop",
            "account": "123456789012", "time": "2026-12-01T10:00:00Z",
            "region": "us-east-1", "resources": [], "detail": {"order": "o-9"}}))
    response = service.handle(batch, CONTEXT)
    assert response == {"batchItemFailures": [
        {"itemIdentifier": "2e1424d4-f796-459a-8184-9c92662be6da"}]}
    questions = [job.question for job in world.runs()]
    assert questions == ['Handle this message: {"ticket": 7}',
                         'Handle this message: "plain text message"',
                         'Handle this message: {"order": "o-9"}']
    # SQS delivers the batch again (at-least-once): no second run for any message
    assert service.handle(batch, CONTEXT)["batchItemFailures"] == [
        {"itemIdentifier": "2e1424d4-f796-459a-8184-9c92662be6da"}]
    assert len(world.runs()) == 3


@pytest.mark.parametrize(("trigger", "code"), [
    ("stale", "version_not_found"), ("unpublished", "agent_not_published"),
    ("stranger", "space_not_found"), ("missing", "trigger_unknown")])
def test_refusals_are_logged_with_a_stable_code_and_never_retried(
        world: World, caplog, trigger: str, code: str) -> None:
    service = world.service()
    event = {**rule_input(), "trigger": trigger}
    with caplog.at_level(logging.WARNING, logger="agentloom.triggers"):
        assert service.handle(event, CONTEXT) == {"status": "failed", "code": code}
    assert any(getattr(r, "code", None) == code for r in caplog.records)
    assert world.runs() == []
    failed = service.handle(sqs_batch(sqs_record("m-1", {"trigger": trigger})), CONTEXT)
    assert failed == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}


def test_a_transient_failure_raises_and_the_redelivery_starts_the_run(world: World) -> None:
    service = world.service()
    world.launcher.fail = Unavailable("Step Functions is throttling", code="launch_throttled")
    with pytest.raises(TriggerError) as raised:
        service.handle(rule_input(), CONTEXT)
    assert (raised.value.code, raised.value.permanent) == ("launch_throttled", False)
    again = service.handle(rule_input(), CONTEXT)  # the failed start left no idempotency record
    assert again["status"] == "started" and [j.run.run_id for j in world.runs()] == \
        [again["run_id"]]


def test_an_event_without_a_trigger_or_id_is_refused(world: World) -> None:
    service = world.service()
    assert service.handle({"id": "x", "detail": {}}, CONTEXT) == {"status": "failed",
                                                          "code": "trigger_missing"}
    assert service.handle({"trigger": "orders", "detail": {}}, CONTEXT) == {"status": "failed",
                                                                   "code": "event_invalid"}


def test_the_question_caps_a_huge_detail(world: World) -> None:
    service = world.service()
    service.handle({**rule_input(), "detail": {"blob": "x" * 50_000}}, CONTEXT)
    (job,) = world.runs()
    assert job.question is not None and len(job.question) < 9_000
    assert "detail cut at 8,000 chars" in job.question


@pytest.mark.parametrize(("env", "variable"), [
    ({}, "AGENTLOOM_IDEMPOTENCY_TABLE"),
    ({"AGENTLOOM_IDEMPOTENCY_TABLE": "t", "AGENTLOOM_TRIGGERS": "{nope"},
     "AGENTLOOM_TRIGGERS"),
    ({"AGENTLOOM_IDEMPOTENCY_TABLE": "t", "AGENTLOOM_TRIGGERS": '{"a": {"space_id": 1}}'},
     "AGENTLOOM_TRIGGERS"),
    ({"AGENTLOOM_IDEMPOTENCY_TABLE": "t", "AGENTLOOM_TRIGGERS": "{}",
      "AGENTLOOM_SQS_TRIGGER": "inbox"}, "AGENTLOOM_SQS_TRIGGER")])
def test_configuration_errors_name_the_variable(env, variable) -> None:
    with pytest.raises(ConfigError) as raised:
        TriggerConfig.from_environ(env)
    assert raised.value.details["variable"] == variable
