"""Heads as deltas (``agentloom_runtime.checkpoint._bases``): a large head is stored as a
small delta against a base blob of the run, on every adapter that persists
(``head_bases``), and reads back whole — from the writer and from a fresh store."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conformance.conftest import Backend

from agentloom.stores.dynamodb_checkpoints import DynamoDbCheckpointStore, item_size
from agentloom_runtime.checkpoint import BaseCheckpointStore, Commit, Head
from agentloom_runtime.checkpoint._bases import REBASE_COMMITS, apply, diff
from agentloom_runtime.checkpoint.store import ItemId, blob_key, dumps
from agentloom_runtime.errors import PersistenceError

RUN = "run-1"


def head_at(n: int) -> dict[str, Any]:
    """A head like the engine's in plan mode after ``n`` commits: a plan of 6 steps,
    labels, bindings, a frame whose counters, evidence and pending call change."""
    plan = {"steps": [{"id": str(i), "title": f"write the file number {i} of the plan",
                       "status": "completed" if i < n // 20 else "pending"}
                      for i in range(6)]}
    pending = [{"request_id": f"run-1.main.{n}", "call_id": f"call_{n}",
                "name": "workspace_write", "status": "requested",
                "arguments": json.dumps({"path": f"f{n}.txt", "content": "x" * 120})}
               ] if n % 2 else []
    return {
        "format": 2, "run_id": RUN, "status": "running", "execution": 1,
        "bindings": "sha256:" + "ab" * 32, "stack": ["main"], "op": None,
        "labels": {"session": "ses_01a2354fccbeb3a2cbe3", "space": "spc_0123456789ab",
                   "user": "alice"},
        "exec_options": {"confirm_hooks": False, "retry_unknown_models": False},
        "calls": n, "total_calls": n, "next_request": n,
        "usage": {"calls": n, "cost": 0.0, "input_tokens": 40 * n, "output_tokens": 9 * n},
        "streams": {"meta": 1, "src:main": 2 * n, "view:main": 2 * n},
        "frames": {"main": {
            "instance": "main", "template": "main", "parent": None, "plan": plan,
            "counters": {"model_steps": n, "user_turns": 1, "baseline_model_steps": 0,
                         "baseline_user_turns": 0},
            "evidence": list(range(5, 5 + 2 * min(n, 30), 2)), "iterations": n,
            "pending": pending, "inputs": [], "outcome": None, "candidate": None}},
    }


def persists(store: BaseCheckpointStore) -> None:
    if not store.head_bases:
        pytest.skip("this store keeps nothing to save (heads inline)")


def row_of(store: BaseCheckpointStore) -> tuple[int, str]:
    raw = store._get_head(RUN)
    assert raw is not None
    return len(raw[1].encode()), store._open_row(ItemId.head(RUN, raw[0]), raw[1])


def test_a_large_head_is_a_small_delta_and_reads_back_whole(backend: Backend) -> None:
    store = backend.store
    persists(store)
    blobs: list[str] = []
    put = store._put_blob

    def counting(run_id: str, key: str, data: bytes) -> None:
        blobs.append(key)
        put(run_id, key, data)

    store._put_blob = counting  # type: ignore[method-assign]
    rows = []
    for n in range(1, 61):
        head = head_at(n)
        assert len(dumps(head).encode()) > 1200
        store.commit(Commit(RUN, n - 1, head))
        assert store.load_head(RUN) == Head(n, head)
        rows.append(row_of(store)[1])
    assert all(json.loads(r).keys() == {"$base", "$delta"} for r in rows)
    # a row outgrows DELTA_BYTES only in the few commits after a rebase (no blob per
    # commit), and is never larger than the head itself
    over = [r for r in rows if len(r.encode()) > store._delta_bytes(RUN)]
    assert len(over) <= len(rows) // 4
    assert all(len(r.encode()) < len(dumps(head_at(60)).encode()) for r in rows)
    bases = [key for key in blobs if key.startswith("sha256:")]  # key records aside
    assert 1 <= len(set(bases)) <= 60 // REBASE_COMMITS
    assert backend.reopen is not None
    fresh = backend.reopen(backend.codec)  # no remembered base: read from its blob
    assert fresh.load_head(RUN) == Head(60, head_at(60))
    fresh.commit(Commit(RUN, 60, head_at(61)))
    assert store.load_head(RUN) == Head(61, head_at(61))


def test_the_head_item_stays_under_1_kb_sealed_after_60_cycles_with_a_plan_and_tool_calls(
        backend: Backend) -> None:
    store = backend.store
    if not isinstance(store, DynamoDbCheckpointStore) or not backend.encrypted:
        pytest.skip("DynamoDB with a codec: the item DynamoDB bills")
    sizes = []
    for n in range(1, 121):  # 60 model+tool cycles, two commits each
        store.commit(Commit(RUN, n - 1, head_at(n)))
        item = store._client.get_item(TableName=store.table_name, Key={
            "pk": {"S": f"RUN#{RUN}"}, "sk": {"S": "HEAD"}})["Item"]
        sizes.append(item_size(item))
    assert max(sizes) <= 1024  # 2 write units in a transaction, not 4 to 6
    assert "B" in item["body"]  # the envelope as bytes, not base64 text


def test_a_head_with_base_keys_of_its_own_round_trips(store: BaseCheckpointStore) -> None:
    odd = {"$base": "sha256:" + "0" * 64, "$delta": {"x": [1]}, "pad": "p" * 50}
    store.commit(Commit(RUN, 0, odd))
    assert store.load_head(RUN) == Head(1, odd)
    store.commit(Commit(RUN, 1, {**odd, "n": 2}))
    assert store.load_head(RUN) == Head(2, {**odd, "n": 2})


def backend_fresh_load(store: BaseCheckpointStore) -> Head | None:
    """``load_head`` without the bases the store remembers."""
    store._base_cache = None
    return store.load_head(RUN)


def test_a_lost_commit_after_its_base_blob_leaves_the_head_as_it_was(
        store: BaseCheckpointStore) -> None:
    persists(store)
    for n in range(1, 6):
        store.commit(Commit(RUN, n - 1, head_at(n)))
    write, put = store._write, store._put_blob
    blobs: list[str] = []

    def crash(*args: Any, **kwargs: Any) -> None:
        raise PersistenceError("crash between the base blob and the transaction")

    def counting(run_id: str, key: str, data: bytes) -> None:
        blobs.append(key)
        put(run_id, key, data)

    store._write, store._put_blob = crash, counting  # type: ignore[method-assign]
    moved = {**head_at(6), "labels": {"other": "x" * 900}}  # the delta outgrows a row
    with pytest.raises(PersistenceError):
        store.commit(Commit(RUN, 5, moved))
    store._write = write  # type: ignore[method-assign]
    assert blob_key(dumps(moved).encode()) in blobs  # the new base was written first
    assert store.load_head(RUN) == Head(5, head_at(5))
    assert backend_fresh_load(store) == Head(5, head_at(5))
    store.commit(Commit(RUN, 5, head_at(6)))
    assert store.load_head(RUN) == Head(6, head_at(6))


def test_a_missing_base_is_a_persistence_error(backend: Backend) -> None:
    store = backend.store
    persists(store)
    store.commit(Commit(RUN, 0, head_at(1)))
    _, text = row_of(store)
    key = json.loads(text)["$base"]
    assert backend.reopen is not None
    fresh = backend.reopen(backend.codec)

    def gone(run_id: str, k: str) -> bytes:
        raise KeyError(k)

    fresh.get_blob = gone  # type: ignore[method-assign,assignment]
    with pytest.raises(PersistenceError, match="base"):
        fresh.load_head(RUN)
    assert key == blob_key(dumps(head_at(1)).encode())


@pytest.mark.parametrize("old, new", [
    ({"a": 1, "b": {"c": [1, 2], "d": None}}, {"a": 1, "b": {"c": [1, 2, 3]}, "e": None}),
    ({"a": True}, {"a": 1}), ({"a": 1}, {"a": 1.0}), ({"a": {"b": 1}}, {"a": [1]}),
    ({"a": {}}, {}), ({}, {"a": {"b": {}}}),
])
def test_a_delta_applied_to_its_base_is_the_new_head(old: dict[str, Any],
                                                     new: dict[str, Any]) -> None:
    patched = apply(json.loads(json.dumps(old)), diff(old, new))
    assert dumps(patched) == dumps(new)
