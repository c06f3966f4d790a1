"""DynamoDB checkpoint store: one table, one partition per run.

Items (``pk`` and ``sk`` are strings)::

    pk=RUN#{run_id}  sk=HEAD                        version (N), body (S; B sealed), ct (B)
    pk=RUN#{run_id}  sk=LOG#{stream}#{seq:012d}     stream (S), seq (N), body (S; B sealed)
    pk=RUN#{run_id}  sk=BLOB#{key}                  data (B), parts (N), size (N)
    pk=RUN#{run_id}  sk=BLOB#{key}#{part:06d}       data (B)   parts 1.. of a blob > 256 KiB

``#`` and ``%`` in a stream name are written ``%23`` and ``%25`` so that no stream's
keys fall inside another's range.

A commit is one TransactWriteItems: a Put of the head conditioned on the version it read
(``attribute_not_exists(pk)`` for a new run), a Put per LOG item conditioned on
``attribute_not_exists(pk)``, then the companion's actions (``companion=``: its ``join``
receives a ``DynamoDbTransaction`` and appends actions on any table, e.g. the platform
table's session stream). A failed condition cancels the whole transaction: on the head
or a LOG item it becomes ``CheckpointConflict``; on a companion's item only,
``CompanionConflict`` (the base class asks the companion again). A transaction holds at
most 100 actions and 4 MB; it is never split (that would break atomicity). Instead,
when the entries and the companion's actions would exceed 100 actions, consecutive
entries of a stream are *packed* into one item ``LOG#{stream}#{last seq}`` (``seq`` =
the first, ``pack`` = the JSON list of ``[seq, body]``; at most ``PACK_BYTES``), keyed by
the last seq so that a range read from any seq finds the pack that holds it; and the
base class spills the largest bodies of a commit above 1 MiB in total, so any number of
entries fits (a commit of 300 entries is a head and two packs). A step's ``view:`` row
rides in the item of its ``src:`` row when one item bills fewer units than two
(``dynamodb_log``: the LOG items and how a stream is read back from them).
botocore's retries reuse the request's ``ClientRequestToken``, so a retry
after a lost response does not turn our own success into a conflict.

A commit that changes only the head (no entries, no companion action: e.g. the commit
that makes a model call durable before it is sent) is one conditional PutItem instead —
1 write unit per KB, where the transaction bills 2. The HEAD item then carries ``ct``,
a random 8-byte commit token: when botocore retries a put whose response was lost and
the retry's condition fails on an item at the version it wrote with the token it sent,
that is this commit's own success, not a conflict.

The HEAD's body is usually a delta against a base blob of the run (``BaseCheckpointStore``:
"Heads as deltas"), so what a commit puts is a few hundred bytes: one write unit's 1 KB
even sealed, 2 units in the transaction.

Sizes. A head or entry body above 32 KiB reaches this adapter already spilled by
``BaseCheckpointStore``: its ``body`` is ``{"$spill": "sha256:…", "bytes": n}`` and the
text is a blob, written before the transaction. So a HEAD or LOG item stays below
~37 KB even at DynamoDB's key-length limits, and 100 of them below 4 MB. A blob is cut
into ``BLOB_PART_BYTES`` (256 KiB) parts, each item far below the 400 KB item limit:
parts 1.. are written first (BatchWriteItem, 25 items a call, unprocessed items retried),
the ``BLOB#{key}`` item holding part 0 and the count last, so a blob is visible only once
complete. Every key derives from the content hash, so a retry rewrites identical items;
the base class checks the hash on every read.

Encrypted (``codec=``, e.g. ``agentloom.crypto.EnvelopeCodec`` with a ``KmsKeyring``):
``body`` holds the raw envelope bytes (``B``; the base class's rows are base64 text, and
DynamoDB bills binary at its length: a quarter less; an item written as base64 text
``S`` by an older version reads the same), a pack's bodies base64 text, ``data`` raw
envelope bytes (a blob's envelope is
chunked like any blob); key records (wrapped data keys) are blobs of the run. ``pk``,
``sk``, ``stream``, ``seq``, ``version`` stay plaintext. The base class does all of it,
and keeps a sealed row within the same 32 KiB, so the sizes above hold.

Counters, for benchmarks (writes DynamoDB accepted; a cancelled transaction or a failed
call adds nothing; reads are not counted):

- ``items_written``: items put — heads, entries, blob parts;
- ``bytes_written``: their sizes as DynamoDB computes an item's size (``item_size``):
  attribute names plus values — strings in UTF-8, binary raw, numbers about one byte per
  two significant digits plus one;
- ``write_units``: the write capacity units those items consume (``write_units``):
  ceil(size / 1 KB) per item for PutItem and BatchWriteItem, twice that inside
  TransactWriteItems. A Put that replaces a larger item (a head that shrinks) is billed
  on the larger of the two; that excess is not counted, so the figure is then a lower
  bound.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from agentloom_runtime.checkpoint.store import (
    HEAD_DELTA_BYTES,
    BaseCheckpointStore,
    CommitCompanion,
    CompanionConflict,
    CompanionWrites,
    RecordCodec,
)
from agentloom_runtime.errors import CheckpointConflict, ConfigError, PersistenceError

from .dynamodb_log import (
    MAX_SEQ,
    Item,
    body_attribute,
    item_size,
    log_items,
    read_rows,
    row_text,
    write_units,
)

try:
    from botocore.exceptions import ClientError
except ImportError as exc:
    raise ImportError("DynamoDbCheckpointStore needs boto3: "
                      "pip install 'agentloom[aws]'") from exc

if TYPE_CHECKING:  # the boto3 stubs (the dev extra); never loaded at run time
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

__all__ = ["BLOB_PART_BYTES", "MAX_ENTRIES_PER_COMMIT", "MAX_TRANSACT_ACTIONS",
           "MAX_TRANSACT_BYTES", "DynamoDbCheckpointStore", "DynamoDbTransaction",
           "create_table", "item_size", "write_units"]

MAX_TRANSACT_ACTIONS = 100  # TransactWriteItems: actions per transaction
MAX_ENTRIES_PER_COMMIT = MAX_TRANSACT_ACTIONS - 1  # one item each; more are packed
MAX_TRANSACT_BYTES = 4 * 1024 * 1024  # TransactWriteItems: aggregate item size
BLOB_PART_BYTES = 256 * 1024  # an item is at most 400 KB, names and keys included
BATCH_WRITE_ITEMS = 25  # BatchWriteItem: put requests per call
_BATCH_ATTEMPTS = 8  # calls per batch while DynamoDB leaves items unprocessed
_TOKEN = "ct"  # the HEAD's commit token (a head-only commit's PutItem: ``_put_head``)
_TOKEN_BYTES = 8
_BLOB_KEY = re.compile(r"sha256:[0-9a-f]{64}")  # what BaseCheckpointStore.put_blob returns



class DynamoDbTransaction:
    """What a companion's ``join`` receives: TransactWriteItems actions (on any table)
    appended after the commit's own, each with its item's size (0 for a condition
    check or a delete) for the 4 MB check and the counters."""

    def __init__(self) -> None:
        self.actions: list[dict[str, Any]] = []
        self.sizes: list[int] = []

    def add(self, action: dict[str, Any], size: int) -> None:
        self.actions.append(action)
        self.sizes.append(size)


class DynamoDbCheckpointStore(BaseCheckpointStore):
    """Checkpoints in one DynamoDB table (``pk``/``sk`` strings), client injected.
    ``codec``: encrypt what is stored with it (``None``: plaintext)."""

    def __init__(self, table_name: str, *, client: DynamoDBClient,
                 codec: RecordCodec | None = None,
                 companion: CommitCompanion | None = None) -> None:
        super().__init__(codec=codec, companion=companion)
        if not table_name:
            raise ConfigError("table_name is required")
        self.table_name = table_name
        self._client = client
        self._counter_lock = threading.Lock()
        self.items_written = 0
        self.bytes_written = 0
        self.write_units = 0

    def _delta_bytes(self, run_id: str) -> int:
        """A HEAD item within 1 KB (one write unit, 2 in the transaction): its key and
        attributes, the envelope (stored as bytes), and the row."""
        fixed = item_size({"pk": {"S": _pk(run_id)}, "sk": {"S": "HEAD"},
                           "version": {"N": "1" * 12}, "body": {"S": ""},
                           _TOKEN: {"B": b"\0" * _TOKEN_BYTES}})
        room = 1024 - fixed - (self._codec.overhead if self._codec is not None else 0)
        return max(room, HEAD_DELTA_BYTES)

    # -- primitives --------------------------------------------------------------------

    def _get_head(self, run_id: str) -> tuple[int, str] | None:
        item = self._get_item(run_id, "HEAD")
        if item is None:
            return None
        return int(item["version"]["N"]), row_text(item["body"])

    def _write(self, run_id: str, expected: int, new: int, head: str,
               rows: list[tuple[str, int, str]], joined: CompanionWrites | None = None) -> None:
        _check_entries(run_id, rows)
        pk = _pk(run_id)
        sealed = self._codec is not None
        head_item: Item = {"pk": {"S": pk}, "sk": {"S": "HEAD"}, "version": {"N": str(new)},
                           "body": body_attribute(head, sealed)}
        head_put: dict[str, Any] = {"TableName": self.table_name, "Item": head_item,
                                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        if expected == 0:
            head_put["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            head_put["ConditionExpression"] = "#v = :expected"
            head_put["ExpressionAttributeNames"] = {"#v": "version"}
            head_put["ExpressionAttributeValues"] = {":expected": {"N": str(expected)}}
        companion = DynamoDbTransaction()
        if joined is not None:
            joined.join(companion)
        if not rows and not companion.actions:
            self._put_head(run_id, expected, new, head_put)
            return
        items = log_items(pk, rows, MAX_TRANSACT_ACTIONS - 1 - len(companion.actions),
                           sealed)
        actions: list[dict[str, Any]] = [{"Put": head_put}]
        actions += [{"Put": {"TableName": self.table_name, "Item": item,
                             "ConditionExpression": "attribute_not_exists(pk)"}}
                    for item in items]
        sizes = [item_size(action["Put"]["Item"]) for action in actions]
        total = sum(sizes) + sum(companion.sizes)
        if total > MAX_TRANSACT_BYTES:  # unreachable with the base's inline limits
            raise ConfigError(
                f"run {run_id}: a commit of {total} bytes exceeds the DynamoDB "
                f"TransactWriteItems limit of 4 MB ({MAX_TRANSACT_BYTES} bytes)",
                details={"run_id": run_id, "bytes": total})
        try:
            # the actions are built as plain dicts (the companion's in other modules)
            self._client.transact_write_items(
                TransactItems=cast("list[TransactWriteItemTypeDef]",
                                   actions + companion.actions),
                ClientRequestToken=str(uuid.uuid4()))
        except self._client.exceptions.TransactionCanceledException as exc:
            raise _cancelled(exc, run_id, expected, items) from exc
        except ClientError as exc:
            raise _commit_failed(run_id, _error_code(exc), []) from exc
        self._count([*sizes, *(size for size in companion.sizes if size)],
                    transactional=True)

    def _put_head(self, run_id: str, expected: int, new: int,
                  head_put: dict[str, Any]) -> None:
        """A commit that changes only the head: one conditional PutItem (1 unit per KB,
        half the transaction's). The item carries a random commit token, so when
        botocore retries a put whose response was lost and the retry finds its own
        write (the version it wrote, the token it sent), that is our success, not a
        conflict."""
        token = secrets.token_bytes(_TOKEN_BYTES)
        head_put["Item"][_TOKEN] = {"B": token}
        try:
            self._client.put_item(**head_put)
        except self._client.exceptions.ConditionalCheckFailedException as exc:
            response: dict[str, Any] = dict(exc.response)  # the modeled error's members
            old: dict[str, Any] = response.get("Item") or {}
            actual = int(old["version"]["N"]) if "version" in old else 0
            if actual == new and bytes(old.get(_TOKEN, {}).get("B", b"")) == token:
                self._count([item_size(head_put["Item"])], transactional=False)
                return  # a retry of our own put that had landed
            raise CheckpointConflict(
                f"run {run_id}: head is at version {actual}, step expected {expected}",
                details={"run_id": run_id, "expected": expected, "actual": actual},
            ) from exc
        except ClientError as exc:
            raise _commit_failed(run_id, _error_code(exc), []) from exc
        self._count([item_size(head_put["Item"])], transactional=False)

    def _query(self, run_id: str, stream: str, after: int,
               limit: int | None) -> list[tuple[int, str]]:
        after = max(after, 0)
        if (limit is not None and limit <= 0) or after >= MAX_SEQ:
            return []
        # Equivalent to `sk > LOG#{stream}#{after:012d} AND begins_with(sk, LOG#{stream}#)`
        # (one key condition on sk is all DynamoDB allows): seqs are fixed-width.
        return read_rows(lambda low, high, most: self._query_range(run_id, low, high, most),
                         stream, after, limit)

    def _put_blob(self, run_id: str, key: str, data: bytes) -> None:
        if self._get_item(run_id, f"BLOB#{key}", projection="pk") is not None:
            return  # content-addressed: present means identical
        parts = [data[i:i + BLOB_PART_BYTES]
                 for i in range(0, len(data), BLOB_PART_BYTES)] or [b""]
        pk = _pk(run_id)
        manifest: Item = {"pk": {"S": pk}, "sk": {"S": f"BLOB#{key}"},
                          "data": {"B": parts[0]}, "parts": {"N": str(len(parts))},
                          "size": {"N": str(len(data))}}
        try:
            self._batch_put(run_id, [
                {"pk": {"S": pk}, "sk": {"S": f"BLOB#{key}#{index:06d}"}, "data": {"B": part}}
                for index, part in enumerate(parts[1:], start=1)])
            self._client.put_item(TableName=self.table_name, Item=manifest)
        except ClientError as exc:
            raise PersistenceError(f"run {run_id}: cannot store blob {key}: "
                                   f"{_error_code(exc)}",
                                   details={"run_id": run_id}) from exc
        self._count([item_size(manifest)], transactional=False)

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
            if len(rest) != count - 1:
                return None
            data += b"".join(bytes(part["data"]["B"]) for part in rest)
        return data

    # -- helpers -----------------------------------------------------------------------

    def delete_run(self, run_id: str) -> None:
        """Remove every item of the run's partition — head, log, blobs, key records — a
        deleted session's run (absent is done; a retry after a crash finishes it)."""
        request: dict[str, Any] = {
            "TableName": self.table_name, "ConsistentRead": True,
            "KeyConditionExpression": "pk = :pk", "ProjectionExpression": "pk, sk",
            "ExpressionAttributeValues": {":pk": {"S": _pk(run_id)}}}
        keys: list[Item] = []
        while True:
            page = self._client.query(**request)
            keys.extend(page.get("Items", []))
            if not page.get("LastEvaluatedKey"):
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        self._batch_write(run_id, [{"DeleteRequest": {"Key": key}} for key in keys])
        self._remembered.forget(run_id)

    def _batch_put(self, run_id: str, items: list[Item]) -> None:
        """Put ``items`` (unconditionally), counted as written."""
        self._batch_write(run_id, [{"PutRequest": {"Item": item}} for item in items])

    def _batch_write(self, run_id: str, requests: list[dict[str, Any]]) -> None:
        """BatchWriteItem of put or delete ``requests``, retrying what DynamoDB leaves
        unprocessed, with backoff."""
        for start in range(0, len(requests), BATCH_WRITE_ITEMS):
            pending = requests[start:start + BATCH_WRITE_ITEMS]
            for attempt in range(_BATCH_ATTEMPTS):
                if attempt:
                    time.sleep(min(0.05 * 2 ** (attempt - 1), 1.0))
                response = self._client.batch_write_item(
                    RequestItems={self.table_name: pending})  # type: ignore[dict-item]
                left = [r for r in response.get("UnprocessedItems", {}).get(
                    self.table_name, [])]
                unprocessed = {_request_sk(r) for r in left}
                self._count((item_size(r["PutRequest"]["Item"]) for r in pending
                             if "PutRequest" in r and _request_sk(r) not in unprocessed),
                            transactional=False)
                pending = [r for r in pending if _request_sk(r) in unprocessed]
                if not pending:
                    break
            else:
                raise PersistenceError(
                    f"run {run_id}: DynamoDB left {len(pending)} items unprocessed after "
                    f"{_BATCH_ATTEMPTS} attempts", details={"run_id": run_id,
                                                             "retryable": True})

    def _count(self, sizes: Iterable[int], *, transactional: bool) -> None:
        sizes = list(sizes)
        with self._counter_lock:
            self.items_written += len(sizes)
            self.bytes_written += sum(sizes)
            self.write_units += sum(write_units(size, transactional=transactional)
                                    for size in sizes)

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


def create_table(client: DynamoDBClient, name: str) -> None:
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


def _request_sk(request: Any) -> str:
    """The sort key a BatchWriteItem put or delete request names."""
    if "PutRequest" in request:
        return str(request["PutRequest"]["Item"]["sk"]["S"])
    return str(request["DeleteRequest"]["Key"]["sk"]["S"])


def _pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def _is_blob_key(key: str) -> bool:
    return _BLOB_KEY.fullmatch(key) is not None


def _check_entries(run_id: str, rows: list[tuple[str, int, str]]) -> None:
    for _, seq, _ in rows:
        if seq > MAX_SEQ:
            raise ConfigError(f"run {run_id}: seq {seq} exceeds {MAX_SEQ}")


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", "Unknown"))


def _cancelled(exc: ClientError, run_id: str, expected: int,
               items: list[Item]) -> Exception:
    """A cancelled TransactWriteItems, by its reasons (one per action, in order)."""
    response: dict[str, Any] = dict(exc.response)  # the modeled error's members too
    reasons: list[dict[str, Any]] = list(response.get("CancellationReasons") or [])
    codes = [str(reason.get("Code", "None")) for reason in reasons]
    own = 1 + len(items)  # the head and the LOG items come first, the companion's after
    if any(c in ("ConditionalCheckFailed", "TransactionConflict") for c in codes[own:]) \
            and "ConditionalCheckFailed" not in codes[:own]:
        return CompanionConflict(f"run {run_id}: the companion's writes conflicted "
                                 f"({codes[own:]})", details={"run_id": run_id,
                                                              "retryable": True})
    if "ConditionalCheckFailed" in codes:
        index = codes.index("ConditionalCheckFailed")
        if index == 0:
            old = reasons[0].get("Item") or {}
            actual = int(old["version"]["N"]) if "version" in old else 0
            return CheckpointConflict(
                f"run {run_id}: head is at version {actual}, step expected {expected}",
                details={"run_id": run_id, "expected": expected, "actual": actual})
        stream, seq = items[index - 1]["stream"]["S"], int(items[index - 1]["seq"]["N"])
        return CheckpointConflict(f"run {run_id}: {stream}#{seq} exists",
                                  details={"run_id": run_id, "stream": stream, "seq": seq})
    # e.g. TransactionConflict (a concurrent transaction on an item): nothing was
    # written and the outcome of the race is not known yet; reload and retry.
    return _commit_failed(run_id, _error_code(exc), codes)


def _commit_failed(run_id: str, code: str, reasons: list[str]) -> PersistenceError:
    retryable = code in _RETRYABLE_ERRORS or any(c in _RETRYABLE_REASONS for c in reasons)
    return PersistenceError(f"run {run_id}: commit failed: {code} {reasons}",
                            details={"run_id": run_id, "code": code, "reasons": reasons,
                                     "retryable": retryable})


_RETRYABLE_ERRORS = frozenset({
    "TransactionInProgressException", "ProvisionedThroughputExceededException",
    "ThrottlingException", "RequestLimitExceeded", "InternalServerError"})
_RETRYABLE_REASONS = frozenset({
    "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})
