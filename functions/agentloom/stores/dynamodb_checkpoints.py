"""DynamoDB checkpoint store: one table, one partition per run.

Items (``pk`` and ``sk`` are strings)::

    pk=RUN#{run_id}  sk=HEAD                        version (N), body (S)
    pk=RUN#{run_id}  sk=LOG#{stream}#{seq:012d}     stream (S), seq (N), body (S)
    pk=RUN#{run_id}  sk=BLOB#{key}                  data (B), parts (N), size (N)
    pk=RUN#{run_id}  sk=BLOB#{key}#{part:06d}       data (B)   only for blobs > 350 KB

``#`` and ``%`` in a stream name are written ``%23`` and ``%25`` so that no stream's
keys fall inside another's range.

A commit is one TransactWriteItems: a Put of the head conditioned on the version it read
(``attribute_not_exists(pk)`` for a new run) and a Put per entry conditioned on
``attribute_not_exists(pk)``. A failed condition cancels the whole transaction, which
becomes ``CheckpointConflict``. A transaction holds at most 100 actions and 4 MB, and it
is never split (that would break atomicity): a larger commit raises ``ConfigError``.
botocore's retries reuse the request's ``ClientRequestToken``, so a retry after a lost
response does not turn our own success into a conflict.

A blob larger than one item is written as parts first and its ``BLOB#{key}`` item last,
so a blob is visible only once complete; the base class checks its hash on every read.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from agentloom_runtime.checkpoint.store import BaseCheckpointStore
from agentloom_runtime.errors import CheckpointConflict, ConfigError, PersistenceError

try:
    from botocore.exceptions import ClientError
except ImportError as exc:
    raise ImportError("DynamoDbCheckpointStore needs boto3: "
                      "pip install 'agentloom[aws]'") from exc

MAX_TRANSACT_ACTIONS = 100  # TransactWriteItems: actions per transaction
MAX_ENTRIES_PER_COMMIT = MAX_TRANSACT_ACTIONS - 1  # one action is the head
MAX_TRANSACT_BYTES = 4 * 1024 * 1024  # TransactWriteItems: aggregate item size
BLOB_PART_BYTES = 350_000  # an item is at most 400 KB, names and keys included
_SEQ_DIGITS = 12
_MAX_SEQ = 10**_SEQ_DIGITS - 1
_ITEM_OVERHEAD = 100  # generous: attribute names, the number attributes, key framing
_BLOB_KEY = re.compile(r"sha256:[0-9a-f]{64}")  # what BaseCheckpointStore.put_blob returns

# `DynamoDbClient` is a boto3 ``dynamodb`` client; typed loosely so that code checked
# with or without boto3 stubs installed can pass one.
DynamoDbClient = Any


class DynamoDbCheckpointStore(BaseCheckpointStore):
    """Checkpoints in one DynamoDB table (``pk``/``sk`` strings), client injected."""

    def __init__(self, table_name: str, *, client: DynamoDbClient) -> None:
        if not table_name:
            raise ConfigError("table_name is required")
        self.table_name = table_name
        self._client = client

    # -- primitives --------------------------------------------------------------------

    def _get_head(self, run_id: str) -> tuple[int, str] | None:
        item = self._get_item(run_id, "HEAD")
        if item is None:
            return None
        return int(item["version"]["N"]), str(item["body"]["S"])

    def _write(self, run_id: str, expected: int, new: int, head: str,
               rows: list[tuple[str, int, str]]) -> None:
        _check_transaction_limits(run_id, head, rows)
        pk = _pk(run_id)
        head_put: dict[str, Any] = {
            "TableName": self.table_name,
            "Item": {"pk": {"S": pk}, "sk": {"S": "HEAD"}, "version": {"N": str(new)},
                     "body": {"S": head}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if expected == 0:
            head_put["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            head_put["ConditionExpression"] = "#v = :expected"
            head_put["ExpressionAttributeNames"] = {"#v": "version"}
            head_put["ExpressionAttributeValues"] = {":expected": {"N": str(expected)}}
        actions: list[dict[str, Any]] = [{"Put": head_put}]
        for stream, seq, body in rows:
            actions.append({"Put": {
                "TableName": self.table_name,
                "Item": {"pk": {"S": pk}, "sk": {"S": _log_sk(stream, seq)},
                         "stream": {"S": stream}, "seq": {"N": str(seq)},
                         "body": {"S": body}},
                "ConditionExpression": "attribute_not_exists(pk)",
            }})
        try:
            self._client.transact_write_items(TransactItems=actions,
                                              ClientRequestToken=str(uuid.uuid4()))
        except ClientError as exc:
            raise _translate_write_error(exc, run_id, expected, rows) from exc

    def _query(self, run_id: str, stream: str, after: int,
               limit: int | None) -> list[tuple[int, str]]:
        after = max(after, 0)
        if (limit is not None and limit <= 0) or after >= _MAX_SEQ:
            return []
        # Equivalent to `sk > LOG#{stream}#{after:012d} AND begins_with(sk, LOG#{stream}#)`
        # (one key condition on sk is all DynamoDB allows): seqs are fixed-width.
        items = self._query_range(run_id, _log_sk(stream, after + 1),
                                  _log_sk(stream, _MAX_SEQ), limit)
        return [(int(item["seq"]["N"]), str(item["body"]["S"])) for item in items]

    def _put_blob(self, run_id: str, key: str, data: bytes) -> None:
        if self._get_item(run_id, f"BLOB#{key}", projection="pk") is not None:
            return  # content-addressed: present means identical
        parts = [data[i:i + BLOB_PART_BYTES]
                 for i in range(0, len(data), BLOB_PART_BYTES)] or [b""]
        pk = _pk(run_id)
        try:
            for index, part in enumerate(parts[1:], start=1):
                self._client.put_item(TableName=self.table_name, Item={
                    "pk": {"S": pk}, "sk": {"S": f"BLOB#{key}#{index:06d}"},
                    "data": {"B": part}})
            self._client.put_item(TableName=self.table_name, Item={
                "pk": {"S": pk}, "sk": {"S": f"BLOB#{key}"}, "data": {"B": parts[0]},
                "parts": {"N": str(len(parts))}, "size": {"N": str(len(data))}})
        except ClientError as exc:
            raise PersistenceError(f"run {run_id}: cannot store blob {key}: "
                                   f"{_error_code(exc)}",
                                   details={"run_id": run_id}) from exc

    def _get_blob(self, run_id: str, key: str) -> bytes | None:
        if not _is_blob_key(key):
            return None
        item = self._get_item(run_id, f"BLOB#{key}")
        if item is None:
            return None
        data = bytes(item["data"]["B"])
        count = int(item.get("parts", {"N": "1"})["N"])
        if count > 1:
            rest = self._query_range(run_id, f"BLOB#{key}#{1:06d}",
                                     f"BLOB#{key}#{count - 1:06d}", None)
            data += b"".join(bytes(part["data"]["B"]) for part in rest)
        return data

    # -- helpers -----------------------------------------------------------------------

    def _get_item(self, run_id: str, sk: str,
                  projection: str | None = None) -> dict[str, Any] | None:
        request: dict[str, Any] = {
            "TableName": self.table_name, "ConsistentRead": True,
            "Key": {"pk": {"S": _pk(run_id)}, "sk": {"S": sk}},
        }
        if projection is not None:
            request["ProjectionExpression"] = projection
        item: dict[str, Any] | None = self._client.get_item(**request).get("Item")
        return item

    def _query_range(self, run_id: str, low: str, high: str,
                     limit: int | None) -> list[dict[str, Any]]:
        """Items with low <= sk <= high, ascending, following pages (1 MB each)."""
        request: dict[str, Any] = {
            "TableName": self.table_name, "ConsistentRead": True,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
            "ExpressionAttributeValues": {":pk": {"S": _pk(run_id)}, ":low": {"S": low},
                                          ":high": {"S": high}},
        }
        items: list[dict[str, Any]] = []
        while True:
            if limit is not None:
                request["Limit"] = limit - len(items)
            page = self._client.query(**request)
            items.extend(page.get("Items", []))
            last = page.get("LastEvaluatedKey")
            if not last or (limit is not None and len(items) >= limit):
                return items
            request["ExclusiveStartKey"] = last


def create_table(client: DynamoDbClient, name: str) -> None:
    """Create the checkpoint table (on-demand, ``pk``/``sk`` strings); for tests and
    local tools — deployed tables come from the CDK app."""
    client.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "sk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                   {"AttributeName": "sk", "KeyType": "RANGE"}])
    client.get_waiter("table_exists").wait(
        TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})


def _pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def _log_sk(stream: str, seq: int) -> str:
    escaped = stream.replace("%", "%25").replace("#", "%23")
    return f"LOG#{escaped}#{seq:0{_SEQ_DIGITS}d}"


def _is_blob_key(key: str) -> bool:
    return _BLOB_KEY.fullmatch(key) is not None


def _check_transaction_limits(run_id: str, head: str,
                              rows: list[tuple[str, int, str]]) -> None:
    if len(rows) > MAX_ENTRIES_PER_COMMIT:
        raise ConfigError(
            f"run {run_id}: a commit holds at most {MAX_ENTRIES_PER_COMMIT} log entries "
            f"(DynamoDB TransactWriteItems: {MAX_TRANSACT_ACTIONS} actions, one is the "
            f"head); got {len(rows)}", details={"run_id": run_id, "entries": len(rows)})
    size = _ITEM_OVERHEAD + len(_pk(run_id).encode()) + len(head.encode())
    for stream, seq, body in rows:
        if seq > _MAX_SEQ:
            raise ConfigError(f"run {run_id}: seq {seq} exceeds {_MAX_SEQ}")
        size += (_ITEM_OVERHEAD + len(_pk(run_id).encode()) + 2 * len(stream.encode())
                 + len(_log_sk(stream, seq)) + len(body.encode()))
    if size > MAX_TRANSACT_BYTES:
        raise ConfigError(
            f"run {run_id}: a commit of about {size} bytes exceeds the DynamoDB "
            f"TransactWriteItems limit of 4 MB ({MAX_TRANSACT_BYTES} bytes); store large "
            "values as blobs", details={"run_id": run_id, "bytes": size})


def _error_code(exc: Any) -> str:
    return str(exc.response.get("Error", {}).get("Code", "Unknown"))


def _translate_write_error(exc: Any, run_id: str, expected: int,
                           rows: list[tuple[str, int, str]]) -> Exception:
    code = _error_code(exc)
    reasons: list[dict[str, Any]] = list(exc.response.get("CancellationReasons") or [])
    codes = [str(reason.get("Code", "None")) for reason in reasons]
    if code == "TransactionCanceledException" and "ConditionalCheckFailed" in codes:
        index = codes.index("ConditionalCheckFailed")
        if index == 0:
            old = reasons[0].get("Item") or {}
            actual = int(old["version"]["N"]) if "version" in old else 0
            return CheckpointConflict(
                f"run {run_id}: head is at version {actual}, step expected {expected}",
                details={"run_id": run_id, "expected": expected, "actual": actual})
        stream, seq, _ = rows[index - 1]
        return CheckpointConflict(f"run {run_id}: {stream}#{seq} exists",
                                  details={"run_id": run_id, "stream": stream, "seq": seq})
    # e.g. TransactionConflict (a concurrent transaction on an item): nothing was
    # written and the outcome of the race is not known yet; reload and retry.
    retryable = code in _RETRYABLE_ERRORS or any(c in _RETRYABLE_REASONS for c in codes)
    return PersistenceError(f"run {run_id}: commit failed: {code} {codes}",
                            details={"run_id": run_id, "code": code, "reasons": codes,
                                     "retryable": retryable})


_RETRYABLE_ERRORS = frozenset({
    "TransactionInProgressException", "ProvisionedThroughputExceededException",
    "ThrottlingException", "RequestLimitExceeded", "InternalServerError"})
_RETRYABLE_REASONS = frozenset({
    "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})
