"""``DynamoDbSkillItems``: the AWS backend of ``SkillItems`` — items in one table with
string keys ``pk``/``sk`` (the platform table's shape) and the sealed value in binary
``value``; the client is injected (a boto3 ``dynamodb`` client). Values stay below
DynamoDB's 400 KB item because the base class chunks files (``store.CHUNK``).
Put-if-absent is a conditional write; reads are consistent."""

from __future__ import annotations

from typing import Any

from agentloom_runtime.errors import ConfigError, PersistenceError

try:
    from botocore.exceptions import BotoCoreError, ClientError
except ImportError as exc:  # pragma: no cover - the extra is installed in tests
    raise ImportError("the DynamoDB skill store needs boto3: pip install 'agentloom[aws]'"
                      ) from exc

DynamoDbClient = Any  # a boto3 client; typed loosely (no boto3 stubs in the core)


class DynamoDbSkillItems:
    def __init__(self, table_name: str, *, client: DynamoDbClient) -> None:
        if not table_name:
            raise ConfigError("table_name is required")
        self.table_name = table_name
        self._client = client

    def _call(self, operation: str, **request: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = getattr(self._client, operation)(
                TableName=self.table_name, **request)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == \
                    "ConditionalCheckFailedException":
                raise
            raise PersistenceError(f"skill store {self.table_name}: {operation} failed "
                                   f"({exc.response.get('Error', {}).get('Code')})",
                                   details={"retryable": True}) from exc
        except BotoCoreError as exc:
            raise PersistenceError(f"skill store {self.table_name}: {operation} failed "
                                   f"({type(exc).__name__})",
                                   details={"retryable": True}) from exc
        return result

    @staticmethod
    def _key(pk: str, sk: str) -> dict[str, Any]:
        return {"pk": {"S": pk}, "sk": {"S": sk}}

    def get(self, pk: str, sk: str) -> bytes | None:
        item = self._call("get_item", Key=self._key(pk, sk), ConsistentRead=True).get("Item")
        return None if item is None else bytes(item["value"]["B"])

    def put(self, pk: str, sk: str, value: bytes, *, if_absent: bool = False) -> bool:
        request: dict[str, Any] = {"Item": {**self._key(pk, sk), "value": {"B": value}}}
        if if_absent:
            request["ConditionExpression"] = "attribute_not_exists(pk)"
        try:
            self._call("put_item", **request)
        except ClientError:  # only the condition reaches here
            return False
        return True

    def delete(self, pk: str, sk: str) -> None:
        self._call("delete_item", Key=self._key(pk, sk))

    def query(self, pk: str, prefix: str) -> list[tuple[str, bytes]]:
        values: dict[str, Any] = {":pk": {"S": pk}}
        condition = "pk = :pk"
        if prefix:  # DynamoDB refuses begins_with with an empty string
            condition += " AND begins_with(sk, :prefix)"
            values[":prefix"] = {"S": prefix}
        request: dict[str, Any] = {"ConsistentRead": True,
                                   "KeyConditionExpression": condition,
                                   "ExpressionAttributeValues": values}
        found: list[tuple[str, bytes]] = []
        while True:
            page = self._call("query", **request)
            found += [(str(i["sk"]["S"]), bytes(i["value"]["B"])) for i in page["Items"]]
            last = page.get("LastEvaluatedKey")
            if not last:
                return found
            request["ExclusiveStartKey"] = last
