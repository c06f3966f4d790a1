"""DynamoDB adapter specifics the shared suite cannot see: item and transaction sizes,
blob chunking, the write counters, and what importing the module loads."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.exceptions import ClientError

from agentloom.stores.dynamodb_checkpoints import (
    BLOB_PART_BYTES,
    MAX_ENTRIES_PER_COMMIT,
    MAX_TRANSACT_BYTES,
    item_size,
    write_units,
)
from agentloom_runtime.checkpoint import Commit, Head, LogEntry
from agentloom_runtime.checkpoint import store as store_module
from agentloom_runtime.checkpoint.store import ENTRY_INLINE_BYTES, HEAD_INLINE_BYTES, blob_key
from agentloom_runtime.errors import CheckpointConflict, ConfigError, PersistenceError

RUN = "run-1"
MODULE = "agentloom.stores.dynamodb_checkpoints"


class Sent:
    """Every item the client sends, by operation (botocore's parameter events)."""

    def __init__(self, client: Any) -> None:
        self.items: dict[str, list[dict[str, Any]]] = {"PutItem": [], "BatchWriteItem": [],
                                                       "TransactWriteItems": []}
        for operation in self.items:
            client.meta.events.register(f"provide-client-params.dynamodb.{operation}",
                                        self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        bucket = self.items[model.name]
        if model.name == "PutItem":
            bucket.append(params["Item"])
        elif model.name == "BatchWriteItem":
            bucket.extend(r["PutRequest"]["Item"] for rs in params["RequestItems"].values()
                          for r in rs)
        else:
            bucket.extend(a["Put"]["Item"] for a in params["TransactItems"])

    def all(self) -> list[dict[str, Any]]:
        return [item for bucket in self.items.values() for item in bucket]


def test_item_size_follows_dynamodb_rules() -> None:
    item = {"pk": {"S": "RUN#é"}, "n": {"N": "12345"}, "b": {"B": b"\x00" * 10},
            "z": {"N": "0"}, "neg": {"N": "-100.50"}}
    # names + values: pk 2+6 (é is 2 bytes), n 1+(3+1), b 1+10, z 1+1, neg 3+(2+1) ("1005")
    assert item_size(item) == 8 + 5 + 11 + 2 + 6
    assert [write_units(n, transactional=False) for n in (0, 1, 1024, 1025, 4096)] \
        == [1, 1, 1, 2, 4]
    assert write_units(1025, transactional=True) == 4


def test_blob_items_are_chunked_far_below_the_item_limit(dynamodb_backend: Any) -> None:
    store, sent = dynamodb_backend.store, Sent(dynamodb_backend.client)
    data = bytes(range(256)) * (4_000_000 // 256)
    key = store.put_blob(RUN, data)
    parts = math.ceil(len(data) / BLOB_PART_BYTES)
    assert len(sent.items["BatchWriteItem"]) == parts - 1  # parts 1.., written first
    assert [i["sk"]["S"] for i in sent.items["PutItem"]] == [f"BLOB#{key}"]  # then part 0
    assert max(item_size(i) for i in sent.all()) <= BLOB_PART_BYTES + 200 < 300_000
    assert store.get_blob(RUN, key) == data
    store.put_blob(RUN, data)  # present: nothing written again
    assert len(sent.all()) == parts


def test_spilled_commit_writes_small_rows_and_chunked_blobs(dynamodb_backend: Any) -> None:
    store, sent = dynamodb_backend.store, Sent(dynamodb_backend.client)
    head, body = {"pad": "h" * 4_000_000}, {"pad": "e" * 1_000_000}
    store.commit(Commit(RUN, 0, head, [LogEntry("s", 1, body)]))
    rows = sent.items["TransactWriteItems"]
    assert [item_size(i) < 200 for i in rows] == [True, True]  # two references
    blobs = sent.items["BatchWriteItem"] + sent.items["PutItem"]
    assert len(blobs) == math.ceil(4_000_012 / BLOB_PART_BYTES) + math.ceil(
        1_000_012 / BLOB_PART_BYTES)
    assert max(item_size(i) for i in blobs) <= BLOB_PART_BYTES + 200
    assert store.load_head(RUN) == Head(1, head)
    assert store.read(RUN, "s") == [LogEntry("s", 1, body)]


def test_a_blob_interrupted_before_its_last_item_is_invisible_then_retried(
        dynamodb_backend: Any) -> None:
    store, client = dynamodb_backend.store, dynamodb_backend.client
    data = b"z" * (3 * BLOB_PART_BYTES)
    failures = [ClientError({"Error": {"Code": "InternalServerError"}}, "PutItem")]

    def fail_once(**_: Any) -> None:
        if failures:
            raise failures.pop()

    client.meta.events.register("before-call.dynamodb.PutItem", fail_once)
    with pytest.raises(PersistenceError, match="InternalServerError"):
        store.put_blob(RUN, data)  # the parts are written, the BLOB# item is not
    key = store.put_blob(RUN, data)
    assert store.get_blob(RUN, key) == data


class Unprocessed:
    """Answers the first ``times`` BatchWriteItem calls itself, with every item left
    unprocessed (nothing written), as DynamoDB does under throttling."""

    def __init__(self, client: Any, times: int) -> None:
        self.times, self.calls = times, 0
        self._request: dict[str, Any] = {}
        client.meta.events.register("provide-client-params.dynamodb.BatchWriteItem",
                                    self._keep)
        client.meta.events.register("before-call.dynamodb.BatchWriteItem", self._answer)

    def _keep(self, params: dict[str, Any], **_: Any) -> None:
        self._request = params["RequestItems"]

    def _answer(self, **_: Any) -> Any:
        self.calls += 1
        if self.calls > self.times:
            return None  # really call moto
        return AWSResponse("https://dynamodb", 200, HTTPHeaders(), None), {
            "UnprocessedItems": self._request}


def test_blob_parts_left_unprocessed_are_retried(
        dynamodb_backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store = dynamodb_backend.store
    monkeypatch.setattr(f"{MODULE}.time", SimpleNamespace(sleep=lambda seconds: None))
    unprocessed = Unprocessed(dynamodb_backend.client, times=2)
    data = os.urandom(3 * BLOB_PART_BYTES + 1)
    key = store.put_blob(RUN, data)
    assert unprocessed.calls == 3
    assert store.items_written == 4  # each part counted once, when it was written
    assert store.get_blob(RUN, key) == data


def test_blob_parts_never_processed_is_a_retryable_persistence_error(
        dynamodb_backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store = dynamodb_backend.store
    monkeypatch.setattr(f"{MODULE}.time", SimpleNamespace(sleep=lambda seconds: None))
    Unprocessed(dynamodb_backend.client, times=1000)
    data = os.urandom(2 * BLOB_PART_BYTES)
    with pytest.raises(PersistenceError, match="unprocessed") as info:
        store.put_blob(RUN, data)
    assert info.value.details["retryable"] is True
    assert store.items_written == 0
    with pytest.raises(KeyError):
        store.get_blob(RUN, blob_key(data))


def test_write_counters(dynamodb_backend: Any) -> None:
    store = dynamodb_backend.store
    assert (store.items_written, store.bytes_written, store.write_units) == (0, 0, 0)
    store.commit(Commit("r", 0, {"a": 1}, [LogEntry("s", 1, {"k": "v"})]))
    # HEAD: pk 2+5, sk 2+4, version 7+2, body 4+7 = 33 bytes
    # LOG: pk 2+5, sk 2+18 ("LOG#s#000000000001"), stream 6+1, seq 3+2, body 4+9 = 52 bytes
    # each under 1 KB: 1 unit, 2 inside a transaction
    assert (store.items_written, store.bytes_written, store.write_units) == (2, 85, 4)
    with pytest.raises(CheckpointConflict):
        store.commit(Commit("r", 0, {"a": 2}))
    assert (store.items_written, store.bytes_written, store.write_units) == (2, 85, 4)
    store.commit(Commit("r", 1, {"a": 2}, [LogEntry("s", 2, {"pad": "x" * 1_000_000})]))
    # the entry's text (1,000,010 bytes) is spilled to a blob of 4 parts, written with
    # standard writes: BLOB#key holds part 0 (pk 2+5, sk 2+76, data 4+262,144, parts 5+2,
    # size 4+4: 262,248 bytes), then 2 x 262,144 and 213,578 bytes (pk 7, sk 2+83, data 4)
    blob = [262_248, 96 + 262_144, 96 + 262_144, 96 + 213_578]
    # HEAD {"a":2}: 33 bytes; LOG row holding the 100-byte reference: 7+20+7+5+104
    rows = [33, 143]
    assert store.items_written == 2 + len(blob) + len(rows)
    assert store.bytes_written == 85 + sum(blob) + sum(rows)
    assert store.write_units == 4 + (257 + 257 + 257 + 209) + 2 * 2


def test_a_head_only_commit_is_one_conditional_put(dynamodb_backend: Any) -> None:
    store, sent = dynamodb_backend.store, Sent(dynamodb_backend.client)
    store.commit(Commit(RUN, 0, {"v": 1}, [LogEntry("s", 1, {"k": "v"})]))
    units = store.write_units
    assert store.commit(Commit(RUN, 1, {"v": 2})) == 2
    (item,) = sent.items["PutItem"]
    assert item["sk"]["S"] == "HEAD" and len(sent.items["TransactWriteItems"]) == 2
    assert store.write_units == units + 1  # a standard write: 1 unit, not 2
    with pytest.raises(CheckpointConflict) as info:
        store.commit(Commit(RUN, 1, {"v": 3}))  # a duplicate step: the CAS holds
    assert info.value.details["actual"] == 2
    assert store.load_head(RUN) == Head(2, {"v": 2})
    assert store.read(RUN, "s") == [LogEntry("s", 1, {"k": "v"})]


def test_a_retried_head_put_that_had_landed_is_our_own_success(
        dynamodb_backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore retries a PutItem whose response was lost; the retry's condition then
    fails on the write it made itself, which the commit token recognises."""
    store, client = dynamodb_backend.store, dynamodb_backend.client
    store.commit(Commit(RUN, 0, {"v": 1}, [LogEntry("s", 1, {"k": "v"})]))
    real = client.put_item

    def landed_then_retried(**params: Any) -> Any:
        real(**params)  # the first attempt lands; its response is lost
        return real(**params)  # botocore sends the same request again

    monkeypatch.setattr(client, "put_item", landed_then_retried)
    assert store.commit(Commit(RUN, 1, {"v": 2})) == 2
    assert store.load_head(RUN) == Head(2, {"v": 2})
    # another writer's put at that version is still a conflict
    monkeypatch.setattr(client, "put_item", real)
    with pytest.raises(CheckpointConflict):
        store.commit(Commit(RUN, 1, {"v": 9}))


def test_a_view_row_rides_in_its_source_records_item_and_reads_alike(
        dynamodb_backend: Any) -> None:
    """A step's ``view:`` row is carried by its ``src:`` row's item when one item bills
    fewer units than two; one that is too large (or whose seq is past the source's) is
    its own item. Reads of either stream see every row once, in order, at any
    ``after`` and ``limit``."""
    store, sent = dynamodb_backend.store, Sent(dynamodb_backend.client)
    version, views, sources = 0, [], []
    for n in range(1, 41):
        big = n % 7 == 0  # two rows of ~900 bytes: two items bill no more than one
        view = {"src": n, "message": {"role": "tool", "content": "v" * (850 if big else 40)}}
        source = {"kind": "tool", "message": {"role": "tool",
                                              "content": "s" * 850 if big else f"s{n}"}}
        entries = [LogEntry("src:main", n, source), LogEntry("view:main", n, view)]
        if n % 11 == 0:  # a view row ahead of the commit's source row: not carried
            entries.append(LogEntry("view:main", 100 + n, view))
            views.append((100 + n, view))
        version = store.commit(Commit(RUN, version, {"n": n}, entries))
        views.append((n, view))
        sources.append((n, source))
    views.sort(key=lambda row: row[0])
    logs = [i for i in sent.items["TransactWriteItems"] if i["sk"]["S"].startswith("LOG#")]
    carried = [i for i in logs if "vseq" in i]
    assert len(carried) == 40 - 5  # every seventh view is its own item
    assert len(logs) == 40 + 5 + 3
    assert max(item_size(i) for i in carried) <= 1024
    assert [(e.seq, e.body) for e in store.read(RUN, "view:main")] == views
    assert [(e.seq, e.body) for e in store.read(RUN, "src:main")] == sources
    for after in (0, 6, 7, 20, 39, 40, 110):
        for limit in (None, 1, 3, 50):
            want = [row for row in views if row[0] > after]
            want = want if limit is None else want[:limit]
            assert [(e.seq, e.body) for e in store.read(RUN, "view:main", after, limit)] \
                == want, (after, limit)
    with pytest.raises(CheckpointConflict):  # a stale step changes nothing, carried or not
        store.commit(Commit(RUN, version - 1, {"n": 0}, [LogEntry("src:main", 41, {}),
                                                         LogEntry("view:main", 41, {})]))
    assert [e.seq for e in store.read(RUN, "view:main", 40)] == [111, 122, 133]


def test_largest_commit_stays_under_the_transaction_limit(dynamodb_backend: Any) -> None:
    """Whatever the bodies hold, after spilling a commit of 100 items fits in 4 MB, even
    with long run ids and stream names."""
    store, sent = dynamodb_backend.store, Sent(dynamodb_backend.client)
    run, stream, frame = "r" * 500, "s" * 400, len('{"pad":""}')
    at_limit = {"pad": "e" * (ENTRY_INLINE_BYTES - frame)}
    store.commit(Commit(run, 0, {"pad": "h" * (HEAD_INLINE_BYTES - frame)},
                        [LogEntry(stream, n, at_limit)
                         for n in range(1, MAX_ENTRIES_PER_COMMIT + 1)]))
    sizes = [item_size(i) for i in sent.items["TransactWriteItems"]]
    assert len(sizes) == MAX_ENTRIES_PER_COMMIT + 1
    assert sum(sizes) < 0.85 * MAX_TRANSACT_BYTES
    assert len(store.read(run, stream)) == MAX_ENTRIES_PER_COMMIT


def test_transaction_limit_guard_if_the_inline_limits_were_raised(
        dynamodb_backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store = dynamodb_backend.store
    store.commit(Commit(RUN, 0, {"v": 1}))
    monkeypatch.setattr(store_module, "ENTRY_INLINE_BYTES", 300_000)
    monkeypatch.setattr(store_module, "COMMIT_INLINE_BYTES", 10**9)
    big = Commit(RUN, 1, {"v": 2}, [LogEntry("s", n, {"pad": "x" * 290_000})
                                    for n in range(1, 16)])
    with pytest.raises(ConfigError, match="4 MB"):
        store.commit(big)
    assert store.load_head(RUN) == Head(1, {"v": 1})
    assert store.read(RUN, "s") == []


def test_importing_the_module_loads_no_sqlite() -> None:
    code = ("import sys, agentloom.stores.dynamodb_checkpoints\n"
            "print(sorted(m for m in sys.modules if 'sqlite' in m))\n"
            "from agentloom.stores import SqliteCheckpointStore\n"
            "print(SqliteCheckpointStore.__module__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.splitlines()
    assert out == ["[]", "agentloom.stores.sqlite_checkpoints"]
