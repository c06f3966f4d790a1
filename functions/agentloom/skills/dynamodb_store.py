"""``DynamoDbSkillItems``: the AWS backend of ``SkillItems`` — items in one table with
string keys ``pk``/``sk`` (the platform table's shape) and the sealed value in binary
``value``; the client is injected (a boto3 ``dynamodb`` client). Values stay below
DynamoDB's 400 KB item because the base class chunks files (``store.CHUNK``).
Put-if-absent is a conditional write; reads are consistent."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from agentloom_runtime.errors import ConfigError, PersistenceError

try:
    from botocore.exceptions import BotoCoreError, ClientError
except ImportError as exc:  # pragma: no cover - the extra is installed in tests
    raise ImportError("the DynamoDB skill store needs boto3: pip install 'agentloom[aws]'"
                      ) from exc

if TYPE_CHECKING:  # the boto3 stubs (the dev extra); never loaded at run time
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import (
        AttributeValueTypeDef,
        PutItemInputTypeDef,
        QueryInputTypeDef,
    )


class DynamoDbSkillItems:
    def __init__(self, table_name: str, *, client: DynamoDBClient) -> None:
        if not table_name:
            raise ConfigError("table_name is required")
        self.table_name = table_name
        self._client = client

    @contextmanager
    def _call(self, operation: str) -> Iterator[None]:
        """A failed call is a retryable ``PersistenceError``; a failed condition is
        raised as it is (``put`` answers it)."""
        try:
            yield
        except self._client.exceptions.ConditionalCheckFailedException:
            raise
        except ClientError as exc:
            raise PersistenceError(f"skill store {self.table_name}: {operation} failed "
                                   f"({exc.response.get('Error', {}).get('Code')})",
                                   details={"retryable": True}) from exc
        except BotoCoreError as exc:
            raise PersistenceError(f"skill store {self.table_name}: {operation} failed "
                                   f"({type(exc).__name__})",
                                   details={"retryable": True}) from exc

    @staticmethod
    def _key(pk: str, sk: str) -> dict[str, AttributeValueTypeDef]:
        return {"pk": {"S": pk}, "sk": {"S": sk}}

    def get(self, pk: str, sk: str) -> bytes | None:
        with self._call("get_item"):
            found = self._client.get_item(TableName=self.table_name, Key=self._key(pk, sk),
                                          ConsistentRead=True)
        item = found.get("Item")
        return None if item is None else bytes(item["value"]["B"])

    def put(self, pk: str, sk: str, value: bytes, *, if_absent: bool = False) -> bool:
        request: PutItemInputTypeDef = {"TableName": self.table_name,
                                        "Item": {**self._key(pk, sk), "value": {"B": value}}}
        if if_absent:
            request["ConditionExpression"] = "attribute_not_exists(pk)"
        try:
            with self._call("put_item"):
                self._client.put_item(**request)
        except self._client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def delete(self, pk: str, sk: str) -> None:
        with self._call("delete_item"):
            self._client.delete_item(TableName=self.table_name, Key=self._key(pk, sk))

    def query(self, pk: str, prefix: str) -> list[tuple[str, bytes]]:
        values: dict[str, AttributeValueTypeDef] = {":pk": {"S": pk}}
        condition = "pk = :pk"
        if prefix:  # DynamoDB refuses begins_with with an empty string
            condition += " AND begins_with(sk, :prefix)"
            values[":prefix"] = {"S": prefix}
        request: QueryInputTypeDef = {"TableName": self.table_name, "ConsistentRead": True,
                                      "KeyConditionExpression": condition,
                                      "ExpressionAttributeValues": values}
        found: list[tuple[str, bytes]] = []
        while True:
            with self._call("query"):
                page = self._client.query(**request)
            found += [(str(i["sk"]["S"]), bytes(i["value"]["B"])) for i in page["Items"]]
            last = page.get("LastEvaluatedKey")
            if not last:
                return found
            request["ExclusiveStartKey"] = last
