"""The production wiring of the trigger function (``handler._wire`` from the
environment): DynamoDB and KMS in moto, the Step Functions launcher — an event starts
one execution named after its run, and a redelivery starts none."""

from __future__ import annotations

import json

from functional.aws.harness import clients, create_resources, fake_credentials
from moto import mock_aws

from agentloom.aws.config import AwsConfig
from agentloom.aws.platform import AwsPlatform
from agentloom.handlers import trigger
from agentloom.platform.identity import Principal

from .conftest import CONTEXT, IDEMPOTENCY_TABLE, SERVICE_USER, rule_input

OWNER = Principal("ops-owner", "token")


def test_the_wired_function_starts_one_execution_per_event(monkeypatch, tmp_path) -> None:
    fake_credentials(monkeypatch)
    with mock_aws():
        aws = clients()
        machine = aws.sfn.create_state_machine(
            name="agentloom-test-run", roleArn="arn:aws:iam::123456789012:role/sfn",
            definition='{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}}'
        )["stateMachineArn"]
        env = create_resources(aws, tmp_path / "efs", state_machine_arn=machine).env
        env = {k: v for k, v in env.items() if not k.startswith(("AGENTLOOM_SANDBOX",
                                                                   "AGENTLOOM_EFS",
                                                                   "AGENTLOOM_WORKSPACE"))}
        aws.dynamodb.create_table(
            TableName=IDEMPOTENCY_TABLE, BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}])
        admin = AwsPlatform.open(AwsConfig.from_environ(env), aws).admin
        space = admin.create_space(OWNER, "Operations")
        admin.set_member(OWNER, space.space_id, SERVICE_USER, "member")
        agent, _ = admin.create_agent(OWNER, space.space_id, "Handler", {
            "prompt": "You handle events.", "model": {"model": "test-model"}})
        admin.publish(OWNER, space.space_id, agent.agent_id)
        env.update({"AGENTLOOM_IDEMPOTENCY_TABLE": IDEMPOTENCY_TABLE,
                    "AGENTLOOM_TRIGGERS": json.dumps({"orders": {
                        "space_id": space.space_id, "agent_id": agent.agent_id,
                        "version": 1, "user_id": SERVICE_USER,
                        "question": "Summarise this order event: {detail}"}})})
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        trigger.configure(None)
        try:
            started = trigger.handler(rule_input(), CONTEXT)
            again = trigger.handler(rule_input(), CONTEXT)
        finally:
            trigger.configure(None)
        assert started["status"] == "started" and again == started
        executions = aws.sfn.list_executions(stateMachineArn=machine)["executions"]
        assert [e["name"] for e in executions] == [f"{started['run_id']}-g1"]
