"""The DynamoDB item store: the platform store's three primitives on one table.

Every platform item ``(pk, sk) -> (version, body)`` (layout in ``items``) is one DynamoDB
item::

    pk (S)  sk (S)  version (N)  body (S, the JSON the item layer serializes)  ttl (N, optional)

Key prefixes are lowercase (``space#``, ``session#``, ``run#`` …) and the checkpoint
store's are uppercase (``RUN#``), so both stores may share one table (see
``docs/storage.md``).

- ``_get``: GetItem with ``ConsistentRead``.
- ``_query``: Query on ``pk`` with ``sk BETWEEN low AND high`` (DynamoDB allows one
  condition on the sort key, so "starts with prefix, strictly after ``after``" becomes
  ``BETWEEN max(prefix, after) AND prefix + U+10FFFF`` with the item equal to ``after``
  dropped), ``ConsistentRead``, pages followed until ``limit``.
- ``_transact``: one write is a conditional UpdateItem / DeleteItem (1 write unit per KB,
  not the 2 of a transaction); more are one TransactWriteItems (≤ 100 actions, ≤ 4 MB,
  a ``ClientRequestToken`` so botocore's retries are idempotent). The condition of a
  write: ``ABSENT`` → ``attribute_not_exists(pk)``; a version → ``version = :v``; ``ANY``
  → none. A put is ``SET body, version = if_not_exists(version, 0) + 1`` so the version
  rule holds for unconditioned puts too; a check is a ConditionCheck. A failed condition
  (``ConditionalCheckFailed``) or a concurrent transaction on one of the items
  (``TransactionConflict``: the other may have won) is ``WriteConflict`` naming the
  write, so callers read again (``retry_conflicts``).
- ``join_writes``: the same actions, appended to a ``DynamoDbCheckpointStore`` commit's
  TransactWriteItems (one transaction across the two tables).
- TTL: items whose body carries ``expires_at`` (idempotency keys, tokens with an expiry)
  get ``ttl`` = that second; the table's TTL attribute is ``ttl`` (``create_table``).
  DynamoDB deletes expired items within days, so readers still check ``expires_at``.
- Sizes: an item above ``MAX_ITEM_BYTES`` (64 KiB, far below the 400 KB limit) is refused
  with ``ConfigError`` before anything is written; platform items are small (records are
  references, the content stays in the run's checkpoint logs; a large agent-version
  snapshot is stored in parts by ``agents``). A transaction over 100 actions or 4 MB is
  refused the same way (never split: that would break atomicity).

Counters, for benchmarks (writes DynamoDB accepted): ``items_written``,
``bytes_written``, ``write_units`` (ceil(size / 1 KB) per item, twice inside
TransactWriteItems; a delete counted at its minimum, 1 unit, 2 in a transaction).
"""

from __future__ import annotations

import json
import math
import threading
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from agentloom.stores.dynamodb_checkpoints import DynamoDbTransaction, item_size, write_units
from agentloom_runtime.errors import ConfigError, PersistenceError

from .items import ABSENT, ANY, ItemStore, Stored, Write, WriteConflict

try:
    from botocore.exceptions import ClientError
except ImportError as exc:  # pragma: no cover
    raise ImportError("DynamoDbItemStore needs boto3: "
                      "pip install 'agentloom[aws]'") from exc

MAX_TRANSACT_ACTIONS = 100
MAX_TRANSACT_BYTES = 4 * 1024 * 1024
MAX_ITEM_BYTES = 64 * 1024
TTL_ATTRIBUTE = "ttl"
_TOP = "\U0010ffff"

DynamoDbClient = Any
Item = dict[str, Any]


class DynamoDbItemStore(ItemStore):
    """Platform items in one DynamoDB table (``pk``/``sk`` strings), client injected."""

    def __init__(self, table_name: str, *, client: DynamoDbClient) -> None:
        if not table_name:
            raise ConfigError("table_name is required")
        self.table_name = table_name
        self._client = client
        self._counter_lock = threading.Lock()
        self.items_written = 0
        self.bytes_written = 0
        self.write_units = 0

    # -- primitives ----------------------------------------------------------------------

    def _get(self, pk: str, sk: str) -> tuple[int, str] | None:
        try:
            item = self._client.get_item(
                TableName=self.table_name, ConsistentRead=True,
                Key={"pk": {"S": pk}, "sk": {"S": sk}}).get("Item")
        except ClientError as exc:
            raise _persistence(exc, f"read {pk} {sk}") from exc
        if item is None:
            return None
        return int(item["version"]["N"]), str(item["body"]["S"])

    def _query(self, pk: str, prefix: str, after: str | None, limit: int | None,
               reverse: bool) -> list[Stored]:
        if limit is not None and limit <= 0:
            return []
        low, high = prefix, prefix + _TOP
        if after is not None:
            if reverse:
                high = min(high, after)
            else:
                low = max(low, after)
        if low > high:
            return []
        values = {":pk": {"S": pk}, ":high": {"S": high}}
        if low:
            values[":low"] = {"S": low}
        request: dict[str, Any] = {  # an empty string is not a key value: no low bound
            "TableName": self.table_name, "ConsistentRead": True,
            "KeyConditionExpression": "pk = :pk AND " + (
                "sk BETWEEN :low AND :high" if low else "sk <= :high"),
            "ExpressionAttributeValues": values,
            "ExpressionAttributeNames": {"#sk": "sk", "#v": "version", "#b": "body"},
            "ProjectionExpression": "#sk, #v, #b",
            "ScanIndexForward": not reverse,
        }
        found: list[Stored] = []
        while True:
            if limit is not None:
                request["Limit"] = limit - len(found) + (1 if after is not None else 0)
            try:
                page = self._client.query(**request)
            except ClientError as exc:
                raise _persistence(exc, f"query {pk} {prefix}") from exc
            for item in page.get("Items", []):
                sk = str(item["sk"]["S"])
                if sk == after:
                    continue
                found.append(Stored(sk, int(item["version"]["N"]), str(item["body"]["S"])))
            last = page.get("LastEvaluatedKey")
            if limit is not None and len(found) >= limit:
                return found[:limit]
            if not last:
                return found
            request["ExclusiveStartKey"] = last

    def _transact(self, writes: Sequence[Write]) -> None:
        # A check with no condition constrains nothing: leave it out (keep the indexes).
        actions: list[tuple[int, dict[str, Any], int]] = []  # (write index, action, size)
        for index, w in enumerate(writes):
            if w.check and w.expect == ANY:
                continue
            actions.append((index, *self._action(w)))
        if not actions:
            return
        if len(actions) > MAX_TRANSACT_ACTIONS:
            raise ConfigError(
                f"a platform transaction of {len(actions)} writes exceeds DynamoDB's "
                f"TransactWriteItems limit of {MAX_TRANSACT_ACTIONS} actions",
                details={"writes": len(actions)})
        total = sum(size for _, _, size in actions)
        if total > MAX_TRANSACT_BYTES:
            raise ConfigError(f"a platform transaction of {total} bytes exceeds "
                              f"DynamoDB's TransactWriteItems limit of 4 MB",
                              details={"bytes": total})
        if len(actions) == 1:
            self._single(writes, *actions[0])
            return
        try:
            self._client.transact_write_items(
                TransactItems=[action for _, action, _ in actions],
                ClientRequestToken=str(uuid.uuid4()))
        except ClientError as exc:
            raise self._conflict(exc, writes, [index for index, _, _ in actions]) from exc
        self._count((size, kind) for _, action, size in actions
                    for kind in action if kind != "ConditionCheck")

    def join_writes(self, writes: Sequence[Write], transaction: object) -> None:
        """In a ``DynamoDbCheckpointStore`` commit: the writes' actions are appended to its
        TransactWriteItems (the checkpoint adapter translates a failed condition on them
        into ``CompanionConflict`` and counts their write units)."""
        if not isinstance(transaction, DynamoDbTransaction):
            raise ConfigError("the DynamoDB platform store joins only the commits of a "
                              "DynamoDbCheckpointStore")
        for w in writes:
            if not (w.check and w.expect == ANY):
                transaction.add(*self._action(w))

    # -- helpers -------------------------------------------------------------------------

    def _action(self, w: Write) -> tuple[dict[str, Any], int]:
        """The TransactWriteItems action for ``w`` and its item's size."""
        key = {"pk": {"S": w.pk}, "sk": {"S": w.sk}}
        base: dict[str, Any] = {"TableName": self.table_name, "Key": key}
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        if w.expect == ABSENT:
            base["ConditionExpression"] = "attribute_not_exists(pk)"
        elif w.expect != ANY:
            base["ConditionExpression"] = "#v = :expected"
            names["#v"] = "version"
            values[":expected"] = {"N": str(w.expect)}
        if w.check:
            return {"ConditionCheck": _with(base, names, values)}, 0
        if w.body is None:
            return {"Delete": _with(base, names, values)}, 0
        names.update({"#v": "version", "#b": "body", "#t": TTL_ATTRIBUTE})
        values.update({":body": {"S": w.body}, ":zero": {"N": "0"}, ":one": {"N": "1"}})
        update = "SET #b = :body, #v = if_not_exists(#v, :zero) + :one"
        item: Item = {**key, "version": {"N": "999999"}, "body": {"S": w.body}}
        expiry = _expiry(w.body)
        if expiry is None:
            update += " REMOVE #t"
        else:
            update += ", #t = :ttl"
            values[":ttl"] = {"N": str(expiry)}
            item[TTL_ATTRIBUTE] = {"N": str(expiry)}
        size = item_size(item)
        if size > MAX_ITEM_BYTES:
            raise ConfigError(
                f"platform item {w.pk} {w.sk} is {size} bytes; this store keeps items "
                f"below {MAX_ITEM_BYTES} bytes (DynamoDB's limit is 400 KB)",
                details={"pk": w.pk, "sk": w.sk, "bytes": size})
        base["UpdateExpression"] = update
        return {"Update": _with(base, names, values)}, size

    def _single(self, writes: Sequence[Write], index: int, action: dict[str, Any],
                size: int) -> None:
        ((kind, request),) = action.items()
        try:
            if kind == "Update":
                self._client.update_item(**request)
            elif kind == "Delete":
                self._client.delete_item(**request)
            else:  # a lone check: a transaction of one
                self._client.transact_write_items(TransactItems=[action])
                return
        except ClientError as exc:
            raise self._conflict(exc, writes, [index]) from exc
        self._count([(size, kind)], transactional=False)

    def _conflict(self, exc: Any, writes: Sequence[Write], indexes: list[int]) -> Exception:
        code = _code(exc)
        if code == "ConditionalCheckFailedException":
            return _write_conflict(writes, indexes[0], "condition failed")
        reasons = [str(r.get("Code", "None"))
                   for r in exc.response.get("CancellationReasons") or []]
        if code == "TransactionCanceledException":
            for position, reason in enumerate(reasons):
                if reason in ("ConditionalCheckFailed", "TransactionConflict"):
                    return _write_conflict(writes, indexes[position], reason)
        return _persistence(exc, f"write ({code} {reasons})")

    def _count(self, writes: Iterable[tuple[int, str]], *, transactional: bool = True) -> None:
        done = list(writes)
        with self._counter_lock:
            self.items_written += len(done)
            self.bytes_written += sum(size for size, _ in done)
            self.write_units += sum(write_units(size, transactional=transactional)
                                    for size, _ in done)


def _with(base: dict[str, Any], names: dict[str, str], values: dict[str, Any]
          ) -> dict[str, Any]:
    request = dict(base)
    if names:
        request["ExpressionAttributeNames"] = dict(names)
    if values:
        request["ExpressionAttributeValues"] = dict(values)
    return request


def _expiry(body: str) -> int | None:
    if '"expires_at"' not in body:
        return None
    value = json.loads(body).get("expires_at")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return math.ceil(value)
    return None


def _write_conflict(writes: Sequence[Write], index: int, why: str) -> WriteConflict:
    w = writes[index]
    return WriteConflict(f"{w.pk} {w.sk}: {why}", index=index, pk=w.pk, sk=w.sk)


def _code(exc: Any) -> str:
    return str(exc.response.get("Error", {}).get("Code", "Unknown"))


def _persistence(exc: Any, what: str) -> PersistenceError:
    code = _code(exc)
    return PersistenceError(f"platform store: cannot {what}: {code}",
                            details={"code": code, "retryable": code in _RETRYABLE})


_RETRYABLE = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException",
                        "RequestLimitExceeded", "InternalServerError",
                        "TransactionInProgressException"})


def create_table(client: DynamoDbClient, name: str) -> None:
    """Create the platform table (on-demand, ``pk``/``sk`` strings, TTL on ``ttl``); for
    tests and local tools — deployed tables come from the CDK app."""
    client.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "sk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                   {"AttributeName": "sk", "KeyType": "RANGE"}])
    client.get_waiter("table_exists").wait(
        TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    client.update_time_to_live(TableName=name, TimeToLiveSpecification={
        "Enabled": True, "AttributeName": TTL_ATTRIBUTE})
