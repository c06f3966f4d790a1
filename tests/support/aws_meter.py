"""Every AWS call of a run, counted by botocore's event hooks and priced by AWS's rules —
never by the stores' own counters.

``Meter.install(monkeypatch)`` wraps ``botocore.client.ClientCreator.create_client``:
every client created afterwards (the platform's, and those moto's Step Functions
interpreter creates for its lambda/ecs/states integrations) gets a
``before-parameter-build`` and an ``after-call`` handler. A call is counted while
``counting`` is on, unless its client was ``ignore``d (the benchmark's own polling) or
the thread is ``paused()`` (the test double playing the Fargate container). Its source
is ``"states"`` for the interpreter's clients, else the ``source()`` context the caller
set (``"api"``, ``"step"``; a ``ContextVar``, so it follows ``asyncio.to_thread``).

DynamoDB capacity is computed from the request parameters with DynamoDB's rules
(``item_size``: the documented item size; the same rule as
``agentloom.stores.dynamodb_checkpoints.item_size`` for the S/N/B attributes it writes):

- writes: ceil(size / 1 KB) per item (at least 1) on the LARGER of the item before and
  after (the before-item read from moto's backend directly, not through botocore, so the
  lookup is not a call); UpdateItem's after-item likewise read back; DeleteItem on the
  deleted item; ×2 inside TransactWriteItems; a ConditionCheck in a transaction costs
  its transactional read (2 × ceil(size / 4 KB)). A failed conditional write is billed on
  the existing item (at least 1 unit), a cancelled transaction likewise per action.
- reads: ceil(size / 4 KB) per GetItem / BatchGetItem item (at least 1; a missing item
  too), half for an eventually consistent read, ×2 for TransactGetItems; a Query or Scan
  on the summed size of the items it returned (full items, whatever the projection),
  rounded up once per call (at least 1).

Items are classified by key (``item_class``): the checkpoint store's ``RUN#`` partition
(``HEAD``, ``LOG``, ``BLOB``, any other ``sk`` prefix by name) and the platform's
lowercase prefixes (``docs``: ``agentloom/platform/store/items.py``); an unknown key
shows as ``pk-prefix/sk-prefix``, so a new layout is counted, not dropped.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import math
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

ACCOUNT = "123456789012"
KEY = "agentloom_meter"
_SOURCE: contextvars.ContextVar[str] = contextvars.ContextVar("meter_source", default="other")
_CONTAINER: contextvars.ContextVar[str] = contextvars.ContextVar("meter_container",
                                                                 default="")
PLATFORM_CLASSES = {
    ("session", "rec"): "session records", ("session", "stream"): "stream head",
    ("session", "session"): "session", ("session", "run"): "run",
    ("session", "idem"): "idempotency", ("session", "view"): "view",
    ("run", "run"): "run by id", ("run", "events"): "event counter",
    ("run", "ev"): "events", ("active", "run"): "active runs",
    ("space", "runs"): "run index",
}
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
READS = {"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"}


# -- DynamoDB's rules ------------------------------------------------------------------------


def _number_size(raw: str) -> int:
    digits = raw.lstrip("-").replace(".", "").strip("0")
    return (len(digits) + 1) // 2 + 1


def _binary_size(raw: Any) -> int:
    return len(raw) if isinstance(raw, bytes | bytearray) else len(base64.b64decode(raw))


def attribute_size(value: Mapping[str, Any]) -> int:
    """A value's size (names excluded) by DynamoDB's documented rule."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        return _number_size(raw)
    if kind == "B":
        return _binary_size(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(v.encode()) for v in raw)
    if kind == "NS":
        return sum(_number_size(v) for v in raw)
    if kind == "BS":
        return sum(_binary_size(v) for v in raw)
    if kind == "L":
        return 3 + sum(1 + attribute_size(v) for v in raw)
    if kind == "M":
        return 3 + sum(len(k.encode()) + 1 + attribute_size(v) for k, v in raw.items())
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: Mapping[str, Any] | None) -> int:
    """An item's size: attribute names plus values (0 for no item)."""
    if not item:
        return 0
    return sum(len(name.encode()) + attribute_size(value) for name, value in item.items())


def write_units(size: int, *, transactional: bool = False) -> int:
    units = max(1, math.ceil(size / 1024))
    return 2 * units if transactional else units


def read_units(size: int, *, consistent: bool = True, transactional: bool = False) -> float:
    units = max(1, math.ceil(size / 4096))
    if transactional:
        return 2.0 * units
    return float(units) if consistent else units / 2


def item_class(pk: str, sk: str) -> str:
    """The benchmark's name for an item, from its key."""
    if pk.startswith("RUN#"):
        return "HEAD" if sk == "HEAD" else sk.split("#", 1)[0]
    p, s = pk.split("#", 1)[0], sk.split("#", 1)[0]
    return PLATFORM_CLASSES.get((p, s), f"{p}/{s}")


# -- moto's backend, read directly -------------------------------------------------------------


def _table(name: str) -> Any:
    from moto.dynamodb.models import dynamodb_backends

    region = "us-east-1"
    return dynamodb_backends[ACCOUNT][region].get_table(name)


def stored(table_name: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
    """The item under ``key`` in moto's table, as DynamoDB JSON (no botocore call)."""
    table = _table(table_name)
    from moto.dynamodb.models.dynamo_type import DynamoType

    hash_key = DynamoType(key[table.hash_key_attr])
    range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
    found = table.get_item(hash_key, range_key)
    return dict(found.to_json()["Attributes"]) if found is not None else None


def _key_of(table_name: str, item: Mapping[str, Any]) -> dict[str, Any]:
    table = _table(table_name)
    names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
    return {n: item[n] for n in names if n in item}


def _key_length(table_name: str) -> int:
    return 2 if _table(table_name).range_key_attr else 1


def _class_of(key: Mapping[str, Any]) -> str:
    pk, sk = key.get("pk", {}).get("S", "?"), key.get("sk", {}).get("S", "?")
    return item_class(str(pk), str(sk))


# -- records ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    source: str
    container: str
    service: str
    operation: str
    error: str | None = None


@dataclass(frozen=True)
class Charge:
    """DynamoDB capacity of one item in one call."""

    source: str
    container: str
    operation: str
    item_class: str
    kind: str  # "write" | "read"
    units: float
    size: int
    transactional: bool
    failed: bool = False


@dataclass
class _Pending:
    source: str
    container: str
    service: str
    operation: str
    params: Mapping[str, Any]
    before: list[tuple[str, dict[str, Any], int]] = field(default_factory=list)
    cpu: float = 0.0  # the thread's CPU time when the call began


def _created_by_states() -> bool:
    """Whether moto's Step Functions interpreter is creating this client."""
    frame = sys._getframe(1)
    while frame is not None:
        if "moto/stepfunctions" in frame.f_code.co_filename:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class Meter:
    def __init__(self) -> None:
        self.counting = False
        self.calls: list[Call] = []
        self.charges: list[Charge] = []
        self.params: list[tuple[Call, Mapping[str, Any]]] = []  # non-DynamoDB calls
        self._ignored: set[int] = set()
        self._local = threading.local()
        self._lock = threading.Lock()

    # -- wiring -----------------------------------------------------------------------------

    def install(self, monkeypatch: Any) -> None:
        from botocore.client import ClientCreator

        original = ClientCreator.create_client
        meter = self

        def create_client(creator: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(creator, *args, **kwargs)
            meter.attach(client, "states" if _created_by_states() else None)
            return client

        monkeypatch.setattr(ClientCreator, "create_client", create_client)

    def attach(self, client: Any, fixed_source: str | None = None) -> None:
        client_id = id(client)

        def before(params: Mapping[str, Any], model: Any, context: dict[str, Any],
                   **_: Any) -> None:
            if not self.counting or client_id in self._ignored or \
                    getattr(self._local, "paused", False):
                return
            pending = _Pending(fixed_source or _SOURCE.get(), _CONTAINER.get(),
                               model.service_model.service_name, model.name, params)
            if pending.service == "dynamodb":
                pending.before = _before_items(model.name, params)
            pending.cpu = time.thread_time()
            context[KEY] = pending

        def after(http_response: Any, parsed: Mapping[str, Any], model: Any,
                  context: dict[str, Any], **_: Any) -> None:
            pending = context.pop(KEY, None)
            if pending is None:
                return
            self._local.aws_cpu = self.aws_cpu() + time.thread_time() - pending.cpu
            self._local.aws_calls = self.aws_calls() + 1
            error = None if http_response.status_code < 300 else \
                str(parsed.get("Error", {}).get("Code", http_response.status_code))
            self._record(pending, error, parsed)

        def failed(exception: BaseException, context: dict[str, Any], **_: Any) -> None:
            pending = context.pop(KEY, None)
            if pending is not None:
                self._record(pending, type(exception).__name__, None)

        client.meta.events.register("before-parameter-build", before)
        client.meta.events.register("after-call", after)
        client.meta.events.register("after-call-error", failed)

    def aws_cpu(self) -> float:
        """CPU seconds this thread spent inside metered calls (moto's backends run in
        the caller's thread: on AWS that time is the service's, not the function's)."""
        return float(getattr(self._local, "aws_cpu", 0.0))

    def aws_calls(self) -> int:
        return int(getattr(self._local, "aws_calls", 0))

    def ignore(self, client: Any) -> Any:
        self._ignored.add(id(client))
        return client

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Calls of this thread are not counted (a test double's, not the system's)."""
        self._local.paused = True
        try:
            yield
        finally:
            self._local.paused = False

    @staticmethod
    @contextlib.contextmanager
    def source(name: str, container: str = "") -> Iterator[None]:
        token, box = _SOURCE.set(name), _CONTAINER.set(container)
        try:
            yield
        finally:
            _SOURCE.reset(token)
            _CONTAINER.reset(box)

    # -- recording --------------------------------------------------------------------------

    def _record(self, pending: _Pending, error: str | None,
                parsed: Mapping[str, Any] | None) -> None:
        call = Call(pending.source, pending.container, pending.service, pending.operation,
                    error)
        charges = _charges(pending, error, parsed or {}) if pending.service == "dynamodb" \
            else []
        with self._lock:
            self.calls.append(call)
            self.charges.extend(charges)
            if pending.service != "dynamodb":
                self.params.append((call, pending.params))

    # -- summaries --------------------------------------------------------------------------

    def operations(self, service: str | None = None) -> Counter[tuple[str, str]]:
        return Counter((c.service, c.operation) for c in self.calls
                       if service is None or c.service == service)

    def units(self, kind: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for charge in self.charges:
            if charge.kind == kind:
                out[charge.item_class] = out.get(charge.item_class, 0) + charge.units
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


# -- DynamoDB charges ---------------------------------------------------------------------------


def _before_items(operation: str, params: Mapping[str, Any]
                  ) -> list[tuple[str, dict[str, Any], int]]:
    """(table, key, size of the stored item) for every item the call writes."""
    keys: list[tuple[str, dict[str, Any]]] = []
    if operation == "PutItem":
        keys.append((params["TableName"], _key_of(params["TableName"], params["Item"])))
    elif operation in ("UpdateItem", "DeleteItem"):
        keys.append((params["TableName"], dict(params["Key"])))
    elif operation == "BatchWriteItem":
        for table, requests in params["RequestItems"].items():
            for request in requests:
                if "PutRequest" in request:
                    keys.append((table, _key_of(table, request["PutRequest"]["Item"])))
                else:
                    keys.append((table, dict(request["DeleteRequest"]["Key"])))
    elif operation == "TransactWriteItems":
        for action in params["TransactItems"]:
            ((_, body),) = action.items()
            table = body["TableName"]
            keys.append((table, _key_of(table, body["Item"]) if "Item" in body
                         else dict(body["Key"])))
    return [(table, key, item_size(stored(table, key))) for table, key in keys]


def _charges(pending: _Pending, error: str | None, parsed: Mapping[str, Any]
             ) -> list[Charge]:
    op, params = pending.operation, pending.params
    out: list[Charge] = []

    def add(key: Mapping[str, Any], kind: str, units: float, size: int,
            transactional: bool = False) -> None:
        out.append(Charge(pending.source, pending.container, op, _class_of(key), kind,
                          units, size, transactional, error is not None))

    if op in WRITES:
        actions = _write_actions(op, params)
        unprocessed = _unprocessed_keys(parsed) if op == "BatchWriteItem" else []
        for (table, key, before), (kind, after_item) in zip(pending.before, actions,
                                                            strict=True):
            if key in unprocessed:
                continue
            transactional = op == "TransactWriteItems"
            if kind == "check":
                add(key, "read", read_units(before, transactional=True), before, True)
                continue
            if error is not None:  # nothing written: billed on the existing item
                size = before
            elif kind == "put":
                size = max(before, item_size(after_item))
            elif kind == "update":
                size = max(before, item_size(stored(table, key)))
            else:  # delete
                size = before
            add(key, "write", write_units(size, transactional=transactional), size,
                transactional)
    elif op in READS and error is None:
        consistent = bool(params.get("ConsistentRead", False))
        if op == "GetItem":
            size = item_size(stored(params["TableName"], params["Key"]))
            add(params["Key"], "read", read_units(size, consistent=consistent), size)
        elif op == "BatchGetItem":
            for table, request in params["RequestItems"].items():
                for key in request["Keys"]:
                    size = item_size(stored(table, key))
                    add(key, "read", read_units(size, consistent=bool(
                        request.get("ConsistentRead", False))), size)
        elif op == "TransactGetItems":
            for action in params["TransactItems"]:
                body = action["Get"]
                size = item_size(stored(body["TableName"], body["Key"]))
                add(body["Key"], "read", read_units(size, transactional=True), size, True)
        else:  # Query, Scan: one rounding over the items returned
            table = params["TableName"]
            pk = _partition(params, table)
            items = [dict(i) for i in parsed.get("Items", [])]
            sizes = []
            for returned in items:
                item = {**(pk or {}), **returned}  # a projection may leave the key out
                key = _key_of(table, item)
                full = stored(table, key) if len(key) == _key_length(table) else None
                sizes.append((item, item_size(full) if full else item_size(returned)))
            total = sum(s for _, s in sizes)
            units = read_units(total, consistent=consistent)
            if not sizes:  # nothing returned: the class the key condition names
                add(_range_key(params, pk), "read", units, 0)
            for item, size in sizes:  # the call's units shared by size
                add(item, "read", units * (size / total if total else 1 / len(sizes)), size)
    return out


def _write_actions(op: str, params: Mapping[str, Any]
                   ) -> list[tuple[str, Mapping[str, Any] | None]]:
    if op == "PutItem":
        return [("put", params["Item"])]
    if op == "UpdateItem":
        return [("update", None)]
    if op == "DeleteItem":
        return [("delete", None)]
    if op == "BatchWriteItem":
        return [("put", r["PutRequest"]["Item"]) if "PutRequest" in r else ("delete", None)
                for requests in params["RequestItems"].values() for r in requests]
    kinds = {"Put": "put", "Update": "update", "Delete": "delete", "ConditionCheck": "check"}
    out: list[tuple[str, Mapping[str, Any] | None]] = []
    for action in params["TransactItems"]:
        ((name, body),) = action.items()
        out.append((kinds[name], body.get("Item")))
    return out


def _unprocessed_keys(parsed: Mapping[str, Any]) -> list[dict[str, Any]]:
    keys = []
    for table, requests in parsed.get("UnprocessedItems", {}).items():
        for request in requests:
            item = request.get("PutRequest", {}).get("Item") or \
                request.get("DeleteRequest", {}).get("Key")
            keys.append(_key_of(table, item))
    return keys


def _range_key(params: Mapping[str, Any], pk: dict[str, Any] | None) -> dict[str, Any]:
    """The partition and the first sort-key bound of a Query (its class when it returns
    no items)."""
    values = [v for v in params.get("ExpressionAttributeValues", {}).values()
              if pk is None or v not in pk.values()]
    bound = next((v for v in values if "S" in v), {"S": "?"})
    return {**(pk or {"pk": {"S": "?"}}), "sk": bound}


def _partition(params: Mapping[str, Any], table: str) -> dict[str, Any] | None:
    """The hash key a Query names (``name = :value`` in its key condition)."""
    condition = params.get("KeyConditionExpression", "")
    names = params.get("ExpressionAttributeNames", {})
    values = params.get("ExpressionAttributeValues", {})
    hash_name = _table(table).hash_key_attr
    for name, value in re.findall(r"(#?\w+)\s*=\s*(:\w+)", condition):
        if names.get(name, name) == hash_name and value in values:
            return {hash_name: values[value]}
    return None
