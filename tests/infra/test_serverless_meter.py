"""The serverless benchmark's meter (tests/support/aws_meter.py) counts what AWS would
bill: DynamoDB capacity by DynamoDB's rules on known items, and, on a short run of the
synthesized state machine, the transitions and calls that actually happened."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from functional.aws.harness import fake_credentials
from moto import mock_aws
from support.aws_meter import Meter, item_class, item_size
from support.serverless_run import billed_transitions, measure

from agentloom.stores.dynamodb_checkpoints import item_size as store_item_size

TABLE = "t"


def _item(sk: str, body_bytes: int) -> dict[str, Any]:
    return {"pk": {"S": "RUN#r1"}, "sk": {"S": sk}, "version": {"N": "12"},
            "body": {"S": "x" * body_bytes}, "data": {"B": b"\x00\x01\x02"}}


@pytest.fixture
def metered(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Meter, Any]]:
    fake_credentials(monkeypatch)
    meter = Meter()
    meter.install(monkeypatch)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE, BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                  {"AttributeName": "sk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                       {"AttributeName": "sk", "KeyType": "RANGE"}])
        meter.counting = True
        yield meter, client


def test_item_size_is_the_checkpoint_stores_rule() -> None:
    for body in (0, 1, 1000, 5000):
        item = _item("HEAD", body)
        assert item_size(item) == store_item_size(item)
    assert item_size({"a": {"L": [{"S": "xy"}, {"BOOL": True}]}}) == 1 + 3 + (1 + 2) + (1 + 1)


def test_write_units_bill_the_larger_item_and_double_in_a_transaction(
        metered: tuple[Meter, Any]) -> None:
    meter, client = metered
    big = _item("HEAD", 1500)  # ~1.5 KB: 2 units
    size = item_size(big)
    assert 1024 < size <= 2048
    client.put_item(TableName=TABLE, Item=big)
    client.put_item(TableName=TABLE, Item=_item("HEAD", 10))  # smaller, over the big one
    client.transact_write_items(TransactItems=[
        {"Put": {"TableName": TABLE, "Item": _item("HEAD", 1500)}},
        {"ConditionCheck": {"TableName": TABLE, "Key": {"pk": big["pk"],
                                                        "sk": {"S": "LOG#a#0"}},
                            "ConditionExpression": "attribute_not_exists(pk)"}},
        {"Put": {"TableName": TABLE, "Item": _item("LOG#a#1", 100)}}])
    client.delete_item(TableName=TABLE, Key={"pk": big["pk"], "sk": {"S": "HEAD"}})
    writes = [(c.operation, c.item_class, c.units) for c in meter.charges
              if c.kind == "write"]
    assert writes == [("PutItem", "HEAD", 2),  # new: its own size
                      ("PutItem", "HEAD", 2),  # replaces a larger one: the larger
                      ("TransactWriteItems", "HEAD", 4),  # 2 units, twice
                      ("TransactWriteItems", "LOG", 2),
                      ("DeleteItem", "HEAD", 2)]  # the deleted item's size
    (check,) = [c for c in meter.charges if c.kind == "read"]
    assert (check.item_class, check.units) == ("LOG", 2.0)  # a transactional read


def test_read_units_round_up_per_item_and_per_query(metered: tuple[Meter, Any]) -> None:
    meter, client = metered
    for n in range(3):
        client.put_item(TableName=TABLE, Item=_item(f"LOG#a#{n}", 3000))
    meter.charges.clear()
    key = {"pk": {"S": "RUN#r1"}, "sk": {"S": "LOG#a#0"}}
    client.get_item(TableName=TABLE, Key=key, ConsistentRead=True)
    client.get_item(TableName=TABLE, Key=key)  # eventually consistent: half
    client.get_item(TableName=TABLE, Key={**key, "sk": {"S": "nope"}}, ConsistentRead=True)
    client.query(TableName=TABLE, ConsistentRead=True, ProjectionExpression="sk",
                 KeyConditionExpression="pk = :pk",
                 ExpressionAttributeValues={":pk": {"S": "RUN#r1"}})
    reads = [c.units for c in meter.charges]
    total = 3 * item_size(_item("LOG#a#0", 3000))  # full items, whatever the projection
    assert reads[:3] == [1.0, 0.5, 1.0]
    assert math.isclose(sum(reads[3:]), math.ceil(total / 4096))


def test_items_are_classified_by_key() -> None:
    assert item_class("RUN#r", "HEAD") == "HEAD"
    assert item_class("RUN#r", "LOG#main#000000000001") == "LOG"
    assert item_class("session#s", "rec#000000000004") == "session records"
    assert item_class("run#r", "ev#000000000001") == "events"
    assert item_class("quota#q", "day#1") == "quota/day"  # unknown: named, not dropped


@pytest.mark.slow  # ~8 s on an idle machine (moto's resources, a command's container)
def test_a_short_run_counts_what_the_state_machine_did(synthesized: Any) -> None:
    figures = measure(synthesized, 5, settle_timeout=60)
    assert figures.status == "completed" and figures.cycles == 5
    meter = figures.meter
    ops = meter.operations()
    # every Task the interpreter entered invoked the step function once (no retries here)
    assert figures.retries == 0
    assert figures.entered["Step"] == ops["lambda", "Invoke"] == len(figures.invocations)
    assert figures.entered["RunCommand"] == ops["ecs", "RunTask"] == figures.run_tasks == 1
    assert all(c.source == "states" for c in meter.calls if c.service == "lambda")
    # the transitions are the StateEntered events of the run's history, nothing computed
    assert figures.transitions == sum(figures.entered.values())
    assert figures.entered["Succeed"] == len(figures.executions) == 1
    # every DynamoDB write call was charged, transactions at twice their items' units
    writes = [c for c in meter.charges if c.kind == "write"]
    assert {c.operation for c in writes} >= {"TransactWriteItems"}
    for charge in writes:
        units = max(1, math.ceil(charge.size / 1024))
        assert charge.units == (2 * units if charge.transactional else units)
    assert sum(c.units for c in writes) >= 2 * ops["dynamodb", "TransactWriteItems"]
    assert "HEAD" in meter.units("write") and ops["kms", "GenerateDataKey"] >= 1


def test_billed_transitions_count_retries_within_one_state_entry() -> None:
    def entered(name: str) -> dict[str, Any]:
        return {"type": "TaskStateEntered", "stateEnteredEventDetails": {"name": name}}

    events = [entered("Step"), {"type": "TaskScheduled"}, {"type": "TaskFailed"},
              {"type": "TaskScheduled"}, {"type": "TaskSucceeded"},
              {"type": "ChoiceStateEntered", "stateEnteredEventDetails": {"name": "Next?"}},
              entered("Step"), {"type": "TaskScheduled"}]
    found, retries = billed_transitions(events)
    assert found == {"Step": 2, "Next?": 1} and retries == 1
