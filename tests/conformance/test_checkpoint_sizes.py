"""No size wedges a run: heads, entries and blobs of any size round-trip exactly on every
adapter (see conftest). Bodies above the inline limits are spilled to blobs by
``BaseCheckpointStore``; these tests hold the rules that make that safe.

On an encrypted store the rows hold envelopes: the helpers below open them through the
store's own codec path (``_open_row``), and the limits bound the row as stored
(``_inline_bytes``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.checkpoint import (
    BaseCheckpointStore,
    Commit,
    Head,
    InMemoryCheckpointStore,
    LogEntry,
)
from agentloom_runtime.checkpoint.store import (
    ENTRY_INLINE_BYTES,
    HEAD_INLINE_BYTES,
    SPILL_KEY,
    ItemId,
    _seal_row,
    blob_key,
    dumps,
)
from agentloom_runtime.errors import CheckpointConflict, PersistenceError

RUN = "run-1"
SIZES = [pytest.param(100_000, id="100KB"), pytest.param(1_000_000, id="1MB"),
         pytest.param(4_000_000, id="4MB")]
_UNIT = 'héllo wörld — 你好 🌍 "quoted" \\ back\nslash\t\x00 '


def payload(size: int, salt: str = "") -> dict[str, Any]:
    """A body whose stored JSON is about ``size`` bytes: non-ASCII, escapes, random hex."""
    text = _UNIT * (size // 2 // len(json.dumps(_UNIT, ensure_ascii=False).encode()))
    return {"salt": salt, "text": text, "hex": os.urandom(size // 4).hex()}


def entry(stream: str, seq: int, /, **body: Any) -> LogEntry:
    return LogEntry(stream, seq, {"seq": seq, **body})


def snapshot(store: BaseCheckpointStore) -> tuple[Head | None, dict[str, Any]]:
    return store.load_head(RUN), {s: store.read(RUN, s) for s in ("s", "t")}


def stored_rows(store: BaseCheckpointStore, stream: str) -> dict[int, Any]:
    """The rows as the backend holds them (references, not bodies), opened if sealed."""
    return {seq: json.loads(store._open_row(ItemId.log(RUN, stream, seq), text))
            for seq, text in store._query(RUN, stream, 0, None)}


def stored_head(store: BaseCheckpointStore) -> Any:
    raw = store._get_head(RUN)
    assert raw is not None
    return json.loads(store._open_row(ItemId.head(RUN, raw[0]), raw[1]))


def raw_write(store: BaseCheckpointStore, version: int, head: Any,
              rows: list[tuple[str, int, Any]]) -> None:
    """Write rows past the base's spilling, sealed as the store would seal them."""
    sealer = store._sealer(RUN)
    store._write(RUN, version - 1, version, _seal_row(sealer, ItemId.head(RUN, version),
                                                      dumps(head)),
                 [(s, n, _seal_row(sealer, ItemId.log(RUN, s, n), dumps(b)))
                  for s, n, b in rows])


def reference(body: Any) -> dict[str, Any]:
    data = dumps(body).encode()
    return {SPILL_KEY: blob_key(data), "bytes": len(data)}


def head_row(store: BaseCheckpointStore, head: Any, inline: bool) -> Any:
    """A large head's row: inline or a spill reference — or, on a store that keeps heads
    as deltas (``head_bases``), a reference to a base holding the same text (one key)."""
    if store.head_bases:
        return {"$base": blob_key(dumps(head).encode()), "$delta": {}}
    return head if inline else reference(head)


# -- round trips ---------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
def test_large_entry_round_trips(store: BaseCheckpointStore, size: int) -> None:
    body = payload(size)
    assert len(dumps(body).encode()) >= size * 0.9
    store.commit(Commit(RUN, 0, {"v": 1}, [entry("s", 1), LogEntry("s", 2, body),
                                           entry("s", 3)]))
    assert store.read(RUN, "s") == [entry("s", 1), LogEntry("s", 2, body), entry("s", 3)]
    assert store.read(RUN, "s", after=1, limit=1) == [LogEntry("s", 2, body)]
    assert stored_rows(store, "s")[2] == reference(body)


@pytest.mark.parametrize("size", SIZES)
def test_large_head_round_trips(store: BaseCheckpointStore, size: int) -> None:
    head = payload(size)
    store.commit(Commit(RUN, 0, head, [entry("s", 1)]))
    assert store.load_head(RUN) == Head(1, head)
    assert stored_head(store) == head_row(store, head, inline=False)
    grown = {**head, "step": 2}
    store.commit(Commit(RUN, 1, grown))
    assert store.load_head(RUN) == Head(2, grown)
    store.commit(Commit(RUN, 2, {"small": True}))  # and back inline
    assert store.load_head(RUN) == Head(3, {"small": True})
    assert stored_head(store) == {"small": True}
    assert store.read(RUN, "s") == [entry("s", 1)]


@pytest.mark.parametrize("size", SIZES)
def test_large_blob_round_trips(store: BaseCheckpointStore, size: int) -> None:
    data = os.urandom(size)
    key = store.put_blob(RUN, data)
    assert key == blob_key(data)
    assert store.get_blob(RUN, key) == data
    assert store.put_blob(RUN, data) == key  # idempotent
    assert store.get_blob(RUN, key) == data


def test_commit_of_many_large_values(store: BaseCheckpointStore) -> None:
    """~5.5 MB in one commit (more than a DynamoDB transaction holds) is still one commit."""
    head = payload(1_000_000, "head")
    bodies = [payload(300_000, str(n)) for n in range(15)]
    store.commit(Commit(RUN, 0, head, [LogEntry("s", n + 1, b) for n, b in enumerate(bodies)]
                        + [entry("t", 1)]))
    assert store.load_head(RUN) == Head(1, head)
    assert [e.body for e in store.read(RUN, "s")] == bodies
    assert store.read(RUN, "t") == [entry("t", 1)]


def test_identical_large_bodies_share_one_blob(store: BaseCheckpointStore) -> None:
    body = payload(100_000)
    store.commit(Commit(RUN, 0, {}, [LogEntry("s", 1, body), LogEntry("t", 1, body)]))
    store.commit(Commit(RUN, 1, {}, [LogEntry("s", 2, body)]))
    assert [e.body for e in store.read(RUN, "s") + store.read(RUN, "t")] == [body] * 3
    assert {json.dumps(r) for s in ("s", "t") for r in stored_rows(store, s).values()} \
        == {json.dumps(reference(body))}


# -- the inline limits and the reference format --------------------------------------


def test_inline_limits_are_exact_in_utf8_bytes(store: BaseCheckpointStore) -> None:
    frame = len('{"pad":""}')
    head_limit = store._inline_bytes(HEAD_INLINE_BYTES)  # the limits themselves if plain
    entry_limit = store._inline_bytes(ENTRY_INLINE_BYTES)
    head_at = {"pad": "h" * (head_limit - frame)}
    at = {"pad": "e" * (entry_limit - frame)}
    over = {"pad": "e" * (entry_limit - frame + 1)}
    over_in_bytes = {"pad": "é" * ((entry_limit - frame) // 2 + 1)}  # fewer chars
    assert len(dumps(at).encode()) == entry_limit
    store.commit(Commit(RUN, 0, head_at, [LogEntry("s", 1, at), LogEntry("s", 2, over),
                                          LogEntry("s", 3, over_in_bytes)]))
    assert stored_head(store) == head_row(store, head_at, inline=True)
    assert stored_rows(store, "s") == {1: at, 2: reference(over), 3: reference(over_in_bytes)}
    assert reference(over)["bytes"] == entry_limit + 1
    assert [e.body for e in store.read(RUN, "s")] == [at, over, over_in_bytes]
    # the largest inline row, as stored, is exactly at the limit (encrypted or not)
    assert max(len(text.encode()) for _, text in store._query(RUN, "s", 0, None)) \
        == ENTRY_INLINE_BYTES
    head_over = {"pad": "h" * (head_limit - frame + 1)}
    store.commit(Commit(RUN, 1, head_over))
    # spilled, or (a delta of the whole head: the shorter one) its base in the same blob
    assert stored_head(store) in (reference(head_over), head_row(store, head_over, False))
    assert store.load_head(RUN) == Head(2, head_over)
    key = reference(head_over)[SPILL_KEY]
    assert store.get_blob(RUN, key) == dumps(head_over).encode()  # the blob is the text


@pytest.mark.parametrize("body", [
    {SPILL_KEY: "sha256:" + "0" * 64, "bytes": 3},
    {SPILL_KEY: "anything", "other": [1, 2]},
    {SPILL_KEY: None},
])
def test_a_body_that_looks_like_a_reference_round_trips(
        store: BaseCheckpointStore, body: dict[str, Any]) -> None:
    store.commit(Commit(RUN, 0, body, [LogEntry("s", 1, body)]))
    assert store.load_head(RUN) == Head(1, body)
    assert store.read(RUN, "s") == [LogEntry("s", 1, body)]
    assert stored_rows(store, "s")[1] == reference(body)  # always spilled: unambiguous


def test_a_dangling_reference_is_a_persistence_error(store: BaseCheckpointStore) -> None:
    """Cannot happen through ``commit`` (blobs first); a damaged store says so."""
    missing = {SPILL_KEY: blob_key(b"gone"), "bytes": 4}
    raw_write(store, 1, missing, [("s", 1, missing)])
    with pytest.raises(PersistenceError, match="missing"):
        store.load_head(RUN)
    with pytest.raises(PersistenceError, match="missing"):
        store.read(RUN, "s")


# -- atomicity with spilled values ---------------------------------------------------


@pytest.mark.parametrize("expected", [0, 2])  # stale / ahead
def test_spilled_commit_that_loses_the_cas_changes_nothing_visible(
        store: BaseCheckpointStore, expected: int) -> None:
    store.commit(Commit(RUN, 0, {"v": 1}, [entry("s", 1)]))
    before = snapshot(store)
    big = payload(1_000_000, "lost")
    with pytest.raises(CheckpointConflict):
        store.commit(Commit(RUN, expected, {**big, "v": "lost"},
                            [LogEntry("s", 2, big), LogEntry("t", 1, big)]))
    assert snapshot(store) == before
    assert stored_head(store) == {"v": 1}
    won = payload(1_000_000, "won")  # the next commit at the right version is unaffected
    store.commit(Commit(RUN, 1, won, [LogEntry("s", 2, won)]))
    assert snapshot(store) == (Head(2, won), {"s": [entry("s", 1), LogEntry("s", 2, won)],
                                              "t": []})


def test_spilled_commit_with_a_row_clash_changes_nothing_visible(
        store: BaseCheckpointStore) -> None:
    store.commit(Commit(RUN, 0, {"v": 1}, [entry("s", 1)]))
    before = snapshot(store)
    big = payload(1_000_000)
    with pytest.raises(CheckpointConflict):
        store.commit(Commit(RUN, 1, big, [LogEntry("t", 1, big), LogEntry("s", 1, big)]))
    assert snapshot(store) == before


def test_spilled_values_are_stored_before_the_conditional_write(
        backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store, calls = backend.store, list[str]()
    put_blob, write = store._put_blob, store._write
    head, body = payload(100_000, "head"), payload(100_000, "entry")
    contents = {blob_key(dumps(head).encode()), blob_key(dumps(body).encode())}

    def recording_put(run_id: str, key: str, data: bytes) -> None:
        calls.append("blob" if key in contents else "key record")
        put_blob(run_id, key, data)

    def checking_write(run_id: str, expected: int, new: int, head: str,
                       rows: list[tuple[str, int, str]], joined: Any = None) -> None:
        for item, text in [(ItemId.head(run_id, new), head),
                           *((ItemId.log(run_id, s, n), t) for s, n, t in rows)]:
            ref = json.loads(store._open_row(item, text))
            if SPILL_KEY in ref:  # every reference resolves before the head moves
                assert len(store.get_blob(run_id, ref[SPILL_KEY])) == ref["bytes"]
        calls.append("write")
        write(run_id, expected, new, head, rows, joined)

    monkeypatch.setattr(store, "_put_blob", recording_put)
    monkeypatch.setattr(store, "_write", checking_write)
    store.commit(Commit(RUN, 0, head, [LogEntry("s", 1, body), entry("s", 2),
                                       LogEntry("s", 3, body)]))
    # the two identical bodies share one blob; an encrypted run's key record goes first
    assert calls == ["key record"] * backend.encrypted + ["blob", "blob", "write"]
    assert snapshot(store) == (Head(1, head), {
        "s": [LogEntry("s", 1, body), entry("s", 2), LogEntry("s", 3, body)], "t": []})


def test_crash_after_the_blobs_leaves_nothing_visible_and_a_retry_commits(
        store: BaseCheckpointStore, monkeypatch: pytest.MonkeyPatch) -> None:
    write, crashes = store._write, [RuntimeError("power cut")]

    def crash_once(*args: Any) -> None:
        if crashes:
            raise crashes.pop()
        write(*args)

    monkeypatch.setattr(store, "_write", crash_once)
    head, body = payload(1_000_000, "head"), payload(1_000_000, "entry")
    step = Commit(RUN, 0, head, [LogEntry("s", 1, body)])
    with pytest.raises(RuntimeError, match="power cut"):
        store.commit(step)
    assert snapshot(store) == (None, {"s": [], "t": []})
    assert store.commit(step) == 1  # the same blobs again: idempotent
    assert snapshot(store) == (Head(1, head), {"s": [LogEntry("s", 1, body)], "t": []})


# -- byte counters of the embedded stores (DynamoDB's: test_dynamodb_checkpoints) -----


@pytest.mark.parametrize("name", ["memory", "sqlite"])
def test_byte_counters(name: str, tmp_path: Path) -> None:
    store: InMemoryCheckpointStore | SqliteCheckpointStore = (
        InMemoryCheckpointStore() if name == "memory"
        else SqliteCheckpointStore(tmp_path / "c.db"))
    store.commit(Commit(RUN, 0, {"a": "é"}, [LogEntry("s", 1, {"k": "v"})]))
    assert (store.bytes_written, store.blob_bytes_written) == (10 + 9, 0)  # UTF-8 bytes
    lost = payload(100_000, "lost")
    with pytest.raises(CheckpointConflict):
        store.commit(Commit(RUN, 0, {"a": 2}, [LogEntry("s", 2, lost)]))
    orphan = len(dumps(lost).encode())  # written before the CAS it lost: an orphan blob
    assert (store.bytes_written, store.blob_bytes_written) == (19, orphan)
    body = payload(100_000)
    store.commit(Commit(RUN, 1, {}, [LogEntry("s", 2, body), LogEntry("t", 1, body)]))
    ref = len(dumps(reference(body)).encode())
    assert store.bytes_written == 19 + len("{}") + 2 * ref
    assert store.blob_bytes_written == orphan + len(dumps(body).encode())  # stored once
    if isinstance(store, SqliteCheckpointStore):
        store.close()
