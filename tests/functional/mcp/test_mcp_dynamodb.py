"""MCP resources on the AWS wiring (moto): the DynamoDB platform store and credentials
sealed through KMS (``CodecSecrets.kms``); a run's tool call reads them from there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from conformance.conftest import fake_aws_env  # noqa: F401 (the fixture)
from functional.mcp.servers import TOKEN, serve
from moto import mock_aws

from agentloom.mcp import McpPolicy, McpService
from agentloom.mcp.service import run_sync, tool_digest
from agentloom.platform.admin import AdminService
from agentloom.platform.errors import Conflict
from agentloom.platform.identity import Principal
from agentloom.platform.secrets import CodecSecrets
from agentloom.platform.store import PlatformStore
from agentloom.platform.store.dynamodb import DynamoDbItemStore, create_table
from agentloom_runtime.snapshot import McpToolBinding

TABLE = "agentloom-mcp-test"
ALICE = Principal("alice", "token")


@pytest.fixture
def aws(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    request.getfixturevalue("fake_aws_env")
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        kms = boto3.client("kms", region_name="us-east-1")
        create_table(dynamodb, TABLE)
        yield {"dynamodb": dynamodb, "kms": kms,
               "key": kms.create_key()["KeyMetadata"]["Arn"]}


def test_resources_and_credentials_on_dynamodb_and_kms(aws: dict[str, Any]) -> None:
    store = PlatformStore(DynamoDbItemStore(TABLE, client=aws["dynamodb"]))
    secrets = CodecSecrets.kms(aws["key"], client=aws["kms"], store=store)
    space = AdminService(store, secrets=secrets).create_space(ALICE, "Team")
    service = McpService(store, secrets, McpPolicy(allow_loopback=True))
    with serve("http", auth=True) as running:
        made = service.create(ALICE, space.space_id, "calc", {
            "transport": "streamable_http", "url": running.url},
            credential={"kind": "bearer", "value": TOKEN})
        assert [r.resource_id for r in service.list_resources(ALICE, space.space_id)] == \
            [made.resource_id]
        tool = next(t for t in run_sync(service.list_tools(made)) if t.name == "add")
        binding = McpToolBinding(resource_id=made.resource_id, tool="add", alias="add",
                                 parameters=dict(tool.input_schema),
                                 schema_digest=tool_digest(tool))
        value = run_sync(service.call(space.space_id, binding, {"a": 3, "b": 4}))
        assert value == "7"
    with pytest.raises(Conflict):
        service.update(ALICE, space.space_id, made.resource_id, revision=5, name="x")
    service.update(ALICE, space.space_id, made.resource_id, revision=1, name="renamed")
    items = aws["dynamodb"].scan(TableName=TABLE)["Items"]
    assert TOKEN not in json.dumps(items)  # sealed under KMS, never in clear
    assert any("mcp#" in json.dumps(i) for i in items)
    service.delete(ALICE, space.space_id, made.resource_id)
    assert service.list_resources(ALICE, space.space_id) == []
