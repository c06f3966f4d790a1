"""The trigger tests' world, in moto (in-process): the platform table (spaces, agents,
sessions, runs), the checkpoint table, the Powertools idempotency table; the real
SessionService with a recording launcher in place of Step Functions."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from moto import mock_aws

from agentloom.platform.admin import AdminService
from agentloom.platform.identity import Principal
from agentloom.platform.launcher import RunJob
from agentloom.platform.lease import STEP_FUNCTIONS, Driver
from agentloom.platform.sessions import SessionService
from agentloom.platform.store import PlatformStore
from agentloom.platform.store.dynamodb import DynamoDbItemStore
from agentloom.platform.store.dynamodb import create_table as create_platform_table
from agentloom.platform.tracker import RunTracker
from agentloom.stores.dynamodb_checkpoints import DynamoDbCheckpointStore
from agentloom.stores.dynamodb_checkpoints import create_table as create_checkpoint_table
from agentloom.triggers import TriggerConfig, TriggerService

OWNER = Principal("ops-owner", "token")
SERVICE_USER = "svc-nightly"
IDEMPOTENCY_TABLE = "agentloom-test-idempotency"


class RecordingLauncher:
    """The platform's RunLauncher port, in memory: records each job it is asked to drive
    (Step Functions would start an execution); ``fail`` makes the next launch raise."""

    def __init__(self) -> None:
        self.jobs: list[RunJob] = []
        self.fail: Exception | None = None
        self._lock = threading.Lock()

    def launch(self, job: RunJob) -> None:
        with self._lock:
            if self.fail is not None:
                err, self.fail = self.fail, None
                raise err
            self.jobs.append(job)

    def stop(self, run_id: str, *, timeout: float = 30.0) -> bool:
        return False

    def driving(self, run_id: str) -> bool:
        return False

    def holder(self) -> Driver:
        return STEP_FUNCTIONS

    def close(self) -> None:
        return None


class LambdaContext:
    """The fields of Lambda's context object that Powertools reads."""

    function_name = "agentloom-test-trigger"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:agentloom-test-trigger"
    aws_request_id = "5f6e2b7c-1d3a-4e8f-9b0c-2a1d3e4f5a6b"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


CONTEXT = LambdaContext()


@dataclass
class World:
    dynamodb: Any
    store: PlatformStore
    sessions: SessionService
    launcher: RecordingLauncher
    space_id: str
    agent_id: str
    unpublished_agent: str
    env: dict[str, str] = field(default_factory=dict)

    def service(self, **triggers: dict[str, Any]) -> TriggerService:
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

        self.env = {"AGENTLOOM_IDEMPOTENCY_TABLE": IDEMPOTENCY_TABLE,
                    "AGENTLOOM_TRIGGERS": json.dumps(triggers or self.triggers()),
                    "AGENTLOOM_SQS_TRIGGER": "inbox"}
        config = TriggerConfig.from_environ(self.env)
        persistence = DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE,
                                               boto3_client=self.dynamodb)
        return TriggerService(config, self.sessions, persistence)

    def triggers(self) -> dict[str, dict[str, Any]]:
        base = {"space_id": self.space_id, "agent_id": self.agent_id, "version": 1,
                "user_id": SERVICE_USER}
        return {
            "orders": {**base, "question": "Summarise this order event: {detail}"},
            "nightly": {**base, "version": None, "question": "Nightly report. {detail}"},
            "inbox": {**base, "question": "Handle this message: {detail}"},
            "stale": {**base, "version": 7, "question": "x"},
            "unpublished": {**base, "agent_id": self.unpublished_agent, "version": None,
                            "question": "x"},
            "stranger": {**base, "user_id": "not-a-member", "question": "x"},
        }

    def runs(self) -> list[RunJob]:
        return self.launcher.jobs


@pytest.fixture
def world(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "agentloom-test-trigger")
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_platform_table(dynamodb, "platform")
        create_checkpoint_table(dynamodb, "checkpoints")
        dynamodb.create_table(TableName=IDEMPOTENCY_TABLE, BillingMode="PAY_PER_REQUEST",
                              AttributeDefinitions=[{"AttributeName": "id",
                                                     "AttributeType": "S"}],
                              KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}])
        store = PlatformStore(DynamoDbItemStore("platform", client=dynamodb))
        checkpoints = DynamoDbCheckpointStore("checkpoints", client=dynamodb)
        launcher = RecordingLauncher()
        sessions = SessionService(store, RunTracker(store, checkpoints), launcher,
                                  engines=None)  # type: ignore[arg-type]  # asks only
        admin = AdminService(store)
        space = admin.create_space(OWNER, "Operations")
        admin.set_member(OWNER, space.space_id, SERVICE_USER, "member")
        config = {"prompt": "You handle events.", "model": {"model": "test-model"}}
        agent, _ = admin.create_agent(OWNER, space.space_id, "Handler", config)
        admin.publish(OWNER, space.space_id, agent.agent_id)
        draft_only, _ = admin.create_agent(OWNER, space.space_id, "Draft", config)
        yield World(dynamodb, store, sessions, launcher, space.space_id, agent.agent_id,
                    draft_only.agent_id)


# -- real event JSON -------------------------------------------------------------------


def rule_input(event_id: str = "6a7e8feb-b491-4cf7-a9f1-bf3703467718") -> dict[str, Any]:
    """What the rule's target passes (infra: {"trigger", "id": <event id>, "detail"})."""
    return {"trigger": "orders", "id": event_id,
            "detail": {"order_id": "o-1234", "state": "PAID", "amount": 42.5}}


def schedule_input(execution_id: str = "c2f1d9e0-4b3a-4f9e-9a61-7d1e0c4b8a55"
                   ) -> dict[str, Any]:
    return {"trigger": "nightly", "id": execution_id,
            "detail": {"scheduled_time": "2026-12-01T02:00:00Z"}}


def sqs_record(message_id: str, body: Any) -> dict[str, Any]:
    return {
        "messageId": message_id,
        "receiptHandle": f"AQEB{message_id}==",
        "body": body if isinstance(body, str) else json.dumps(body),
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1796100000000",
                       "SenderId": "AIDAIENQZJOLO23YVJ4VO",
                       "ApproximateFirstReceiveTimestamp": "1796100000001"},
        "messageAttributes": {}, "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:agentloom-test-triggers",
        "awsRegion": "us-east-1"}


def sqs_batch(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}
