"""Encryption, on every encrypted adapter (memory and SQLite with a ``LocalKeyring``,
DynamoDB with a ``KmsKeyring``, on moto): nothing the backend holds is plaintext, a
ciphertext moved to another item or altered fails to open, a store opened without its
codec or with another keyring fails clearly, and a cold process opens a run with one
unwrap and keeps the run's data key. The rest of the contract runs over the same
encrypted stores in ``test_checkpoint_store`` and ``test_checkpoint_sizes``."""

from __future__ import annotations

import base64
import json
from collections import Counter
from typing import Any

import pytest
from conformance.conftest import Backend, session_scope

from agentloom.crypto import EnvelopeCodec, Keyring, KeyScope
from agentloom.crypto.codec import HEADER_BYTES, KEY_ID_BYTES, MAGIC, record_name
from agentloom.stores.dynamodb_checkpoints import MAX_ENTRIES_PER_COMMIT, item_size
from agentloom_runtime.checkpoint import BaseCheckpointStore, Commit, Head, LogEntry
from agentloom_runtime.checkpoint.store import (
    ENTRY_INLINE_BYTES,
    HEAD_INLINE_BYTES,
    ItemId,
    _seal_row,
    blob_key,
    dumps,
)
from agentloom_runtime.errors import ConfigError, PersistenceError

RUN, OTHER = "run-1", "run-2"
SECRET = "the vault code is 7319 — ne le dis à personne"
BIG_SECRET = "spilled tool output: " + "secret line\n" * 5_000  # ~60 KB: spilled to a blob
BLOB_SECRET = b"raw blob bytes: the vault code is 7319"
NEEDLES = ["vault code", "7319", "spilled tool output", "secret line", "ne le dis"]


def envelope_key_id(envelope: bytes) -> bytes:
    """The key id an envelope names (after "ALE" and the version byte)."""
    assert envelope[:len(MAGIC)] == MAGIC
    return envelope[len(MAGIC) + 1:len(MAGIC) + 1 + KEY_ID_BYTES]

class CountingKeyring:
    """Wraps a keyring; counts its calls."""

    def __init__(self, inner: Keyring) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    @property
    def keyring_id(self) -> str:
        return self.inner.keyring_id

    def generate(self, context: KeyScope) -> tuple[bytes, bytes]:
        self.calls["generate"] += 1
        return self.inner.generate(context)

    def unwrap(self, wrapped: bytes, context: KeyScope) -> bytes:
        self.calls["unwrap"] += 1
        return self.inner.unwrap(wrapped, context)


def write_run(store: BaseCheckpointStore, run_id: str = RUN) -> str:
    """Two commits holding the secrets inline, spilled and as a blob; the blob's key."""
    store.commit(Commit(run_id, 0, {"task": SECRET}, [
        LogEntry("s", 1, {"text": SECRET}), LogEntry("s", 2, {"output": BIG_SECRET})]))
    store.commit(Commit(run_id, 1, {"task": SECRET, "step": 2},
                        [LogEntry("t", 1, {"args": {"q": SECRET}})]))
    return store.put_blob(run_id, BLOB_SECRET)


def reads_back(store: BaseCheckpointStore, blob: str, run_id: str = RUN) -> None:
    assert store.load_head(run_id) == Head(2, {"task": SECRET, "step": 2})
    assert [e.body for e in store.read(run_id, "s")] == [{"text": SECRET},
                                                         {"output": BIG_SECRET}]
    assert store.read(run_id, "t") == [LogEntry("t", 1, {"args": {"q": SECRET}})]
    assert store.get_blob(run_id, blob) == BLOB_SECRET


def raw_rows(store: BaseCheckpointStore, run_id: str = RUN) -> list[tuple[ItemId, str]]:
    head = store._get_head(run_id)
    assert head is not None
    return [(ItemId.head(run_id, head[0]), head[1]),
            *((ItemId.log(run_id, stream, seq), text) for stream in ("s", "t")
              for seq, text in store._query(run_id, stream, 0, None))]


def sealed_head(store: BaseCheckpointStore, run_id: str, version: int) -> str:
    return _seal_row(store._sealer(run_id), ItemId.head(run_id, version),
                     dumps({"v": version}))


# -- at rest -------------------------------------------------------------------------


def test_nothing_the_backend_holds_is_plaintext(encrypted_backend: Backend) -> None:
    store = encrypted_backend.store
    blob = write_run(store)
    reads_back(store, blob)
    rows = raw_rows(store)
    envelopes = [base64.b64decode(text, validate=True) for _, text in rows]
    spilled = blob_key(dumps({"output": BIG_SECRET}).encode())
    envelopes += [store._get_blob(RUN, key) or b"" for key in (blob, spilled)]
    assert len(envelopes) == 6 and all(e[:4] == MAGIC + b"\x01" for e in envelopes)
    assert len({envelope_key_id(e) for e in envelopes}) == 1  # one data key for the run
    record = store._get_blob(RUN, record_name(envelope_key_id(envelopes[0])))
    assert record is not None and b'"wrapped"' in record  # the wrapped key, stored once
    for data in [*envelopes, record]:
        for needle in NEEDLES:
            assert needle.encode() not in data
    assert all(needle not in text for _, text in rows for needle in NEEDLES)


def test_plaintext_in_an_encrypted_store_is_refused(encrypted_backend: Backend) -> None:
    store = encrypted_backend.store
    store._write(RUN, 0, 1, dumps({"planted": True}), [("s", 1, dumps({"planted": True}))])
    with pytest.raises(PersistenceError, match="not encrypted"):
        store.load_head(RUN)
    with pytest.raises(PersistenceError, match="not encrypted"):
        store.read(RUN, "s")
    store._put_blob(RUN, blob_key(b"planted"), b"planted")
    with pytest.raises(PersistenceError, match="not an encrypted envelope"):
        store.get_blob(RUN, blob_key(b"planted"))


# -- moved and altered ciphertexts ---------------------------------------------------


MOVES = ["head-to-another-run", "head-to-another-version", "row-to-another-seq",
         "row-to-another-stream", "row-to-another-run", "row-to-the-head",
         "blob-to-another-key", "blob-to-another-run"]


@pytest.mark.parametrize("move", MOVES)
def test_a_ciphertext_moved_to_another_item_fails_to_open(
        encrypted_backend: Backend, move: str) -> None:
    store = encrypted_backend.store
    blob = write_run(store)
    write_run(store, OTHER)  # the other run exists, with its own key record
    v1 = store._get_head(RUN)
    assert v1 is not None
    (_, head), row = v1, store._query(RUN, "s", 0, 1)[0][1]
    data = store._get_blob(RUN, blob)
    assert data is not None
    other_key = blob_key(b"another blob")
    if move == "head-to-another-run":
        store._write("run-3", 0, 2, head, [])  # same version, other run
        check: Any = lambda: store.load_head("run-3")  # noqa: E731
    elif move == "head-to-another-version":
        store._write(RUN, 2, 3, sealed_head(store, RUN, 3), [])
        store._write(RUN, 3, 4, head, [])  # the version-2 head replayed as version 4
        check = lambda: store.load_head(RUN)  # noqa: E731
    elif move == "row-to-the-head":
        store._write(RUN, 2, 3, row, [])
        check = lambda: store.load_head(RUN)  # noqa: E731
    elif move == "blob-to-another-key":
        store._put_blob(RUN, other_key, data)
        check = lambda: store.get_blob(RUN, other_key)  # noqa: E731
    elif move == "blob-to-another-run":
        store._put_blob("run-3", blob, data)
        check = lambda: store.get_blob("run-3", blob)  # noqa: E731
    else:
        run, stream, seq = {"row-to-another-seq": (RUN, "s", 9),
                            "row-to-another-stream": (RUN, "u", 1),
                            "row-to-another-run": (OTHER, "s", 9)}[move]
        store._write(run, 2, 3, sealed_head(store, run, 3), [(stream, seq, row)])
        check = lambda: store.read(run, stream, after=seq - 1)  # noqa: E731
    with pytest.raises(PersistenceError) as info:
        check()
    assert not any(needle in str(info.value) for needle in NEEDLES)
    # the originals are untouched
    assert [e.body for e in store.read(RUN, "s", limit=2)] == [{"text": SECRET},
                                                               {"output": BIG_SECRET}]
    assert store.get_blob(RUN, blob) == BLOB_SECRET


@pytest.mark.parametrize("offset", [0, 3, 4, 19, 20, 31, HEADER_BYTES, -1],
                         ids=["magic", "version", "key-id", "key-id-end", "nonce",
                              "nonce-end", "ciphertext", "tag"])
def test_an_altered_ciphertext_fails_to_open(encrypted_backend: Backend, offset: int) -> None:
    store = encrypted_backend.store
    blob = write_run(store)
    raw = bytearray(base64.b64decode(store._query(RUN, "t", 0, 1)[0][1]))
    raw[offset] ^= 0x01
    store._write(RUN, 2, 3, sealed_head(store, RUN, 3),
                 [("t", 2, base64.b64encode(raw).decode())])
    with pytest.raises(PersistenceError):
        store.read(RUN, "t", after=1)
    data = bytearray(store._get_blob(RUN, blob) or b"")
    data[offset] ^= 0x80
    altered = blob_key(b"altered")
    store._put_blob(RUN, altered, bytes(data))
    store._put_blob(RUN, blob_key(b"cut"), bytes(data[:HEADER_BYTES + 15]))
    for key in (altered, blob_key(b"cut")):
        with pytest.raises(PersistenceError):
            store.get_blob(RUN, key)


def test_a_missing_key_record_is_a_persistence_error(encrypted_backend: Backend) -> None:
    store = encrypted_backend.store
    write_run(store)
    assert encrypted_backend.reopen is not None and encrypted_backend.codec is not None
    head = store._get_head(RUN)
    assert head is not None
    store._write("run-3", 0, 2, head[1], [])  # no key record in run-3; a cold process
    cold = encrypted_backend.reopen(EnvelopeCodec(encrypted_backend.codec.keyring,
                                                  scope=session_scope))
    with pytest.raises(PersistenceError, match=r"key record .* is missing"):
        cold.load_head("run-3")


# -- other processes, other keys -----------------------------------------------------


def test_a_store_opened_without_its_codec_fails_clearly(encrypted_backend: Backend) -> None:
    blob = write_run(encrypted_backend.store)
    assert encrypted_backend.reopen is not None
    plain = encrypted_backend.reopen(None)
    with pytest.raises(PersistenceError, match="without its codec"):
        plain.load_head(RUN)
    with pytest.raises(PersistenceError, match="without its codec"):
        plain.read(RUN, "s")
    with pytest.raises(KeyError):  # the bytes are not the blob: they do not hash to it
        plain.get_blob(RUN, blob)


def test_another_keyring_is_a_config_error(encrypted_backend: Backend) -> None:
    blob = write_run(encrypted_backend.store)
    assert encrypted_backend.reopen is not None and encrypted_backend.other_keyring
    other = encrypted_backend.reopen(EnvelopeCodec(encrypted_backend.other_keyring(),
                                                   scope=session_scope))
    for read in (lambda: other.load_head(RUN), lambda: other.read(RUN, "t"),
                 lambda: other.get_blob(RUN, blob)):
        with pytest.raises(ConfigError, match="cannot open its data key") as info:
            read()
        assert not any(needle in str(info.value) for needle in NEEDLES)
    reads_back(encrypted_backend.store, blob)


def test_a_cold_process_opens_a_run_with_one_unwrap_and_keeps_its_key(
        encrypted_backend: Backend) -> None:
    blob = write_run(encrypted_backend.store)
    assert encrypted_backend.reopen is not None and encrypted_backend.codec is not None
    keyring = CountingKeyring(encrypted_backend.codec.keyring)
    cold = encrypted_backend.reopen(EnvelopeCodec(keyring, scope=session_scope))
    reads_back(cold, blob)
    cold.commit(Commit(RUN, 2, {"v": 3}, [LogEntry("s", 3, {"text": SECRET})]))
    cold.put_blob(RUN, b"another blob")
    assert keyring.calls == {"unwrap": 1}  # no GenerateDataKey: the run keeps its key
    assert len({envelope_key_id(base64.b64decode(text)) for _, text in raw_rows(cold)}) == 1
    cold.commit(Commit(OTHER, 0, {"v": 1}))  # a new run takes a new key
    assert keyring.calls == {"unwrap": 1, "generate": 1}


def test_the_scope_resolver_is_asked_only_for_new_keys_and_may_refuse(
        encrypted_backend: Backend) -> None:
    write_run(encrypted_backend.store)
    assert encrypted_backend.reopen is not None and encrypted_backend.codec is not None
    asked: list[str] = []

    def known_runs(run_id: str) -> KeyScope:
        asked.append(run_id)
        if run_id != RUN:
            raise ConfigError(f"no session is known for run {run_id}")
        return session_scope(run_id)

    cold = encrypted_backend.reopen(EnvelopeCodec(encrypted_backend.codec.keyring,
                                                  scope=known_runs))
    head = cold.load_head(RUN)
    assert head is not None
    cold.commit(Commit(RUN, head.version, {"v": 3}))
    assert asked == []  # the run's key came from its head's envelope and key record
    with pytest.raises(ConfigError, match="no session is known"):
        cold.commit(Commit("run-9", 0, {"v": 1}, [LogEntry("s", 1, {"big": BIG_SECRET})]))
    assert cold.load_head("run-9") is None
    assert cold._get_blob("run-9", blob_key(dumps({"big": BIG_SECRET}).encode())) is None


# -- DynamoDB: a sealed commit still fits one transaction ----------------------------


def test_largest_encrypted_commit_stays_under_the_transaction_limit(
        kms_dynamodb_backend: Backend) -> None:
    store, client = kms_dynamodb_backend.store, kms_dynamodb_backend.client
    sizes: list[int] = []
    client.meta.events.register(
        "provide-client-params.dynamodb.TransactWriteItems",
        lambda params, **_: sizes.extend(item_size(a["Put"]["Item"])
                                         for a in params["TransactItems"]))
    run, stream, frame = "r" * 500, "s" * 400, len('{"pad":""}')
    at_limit = {"pad": "e" * (store._inline_bytes(ENTRY_INLINE_BYTES) - frame)}
    head = {"pad": "h" * (store._inline_bytes(HEAD_INLINE_BYTES) - frame)}
    store.commit(Commit(run, 0, head, [LogEntry(stream, n, at_limit)
                                       for n in range(1, MAX_ENTRIES_PER_COMMIT + 1)]))
    assert len(sizes) == MAX_ENTRIES_PER_COMMIT + 1
    assert max(sizes) < ENTRY_INLINE_BYTES + 1_500  # the row at the limit, keys, names
    assert sum(sizes) < 0.85 * 4 * 1024 * 1024
    assert store.load_head(run) == Head(1, head)
    assert len(store.read(run, stream)) == MAX_ENTRIES_PER_COMMIT


def test_key_records_hold_the_scope_and_no_secret(encrypted_backend: Backend) -> None:
    store, codec = encrypted_backend.store, encrypted_backend.codec
    assert codec is not None
    write_run(store)
    envelope = base64.b64decode(raw_rows(store)[0][1])
    record = json.loads(store._get_blob(RUN, record_name(envelope_key_id(envelope))) or b"{}")
    assert sorted(record) == ["context", "format", "key_id", "keyring", "wrapped"]
    key_id = base64.urlsafe_b64encode(envelope_key_id(envelope)).decode().rstrip("=")
    assert record["format"] == 1 and record["key_id"] == key_id
    assert record["keyring"] == codec.keyring.keyring_id
    assert record["context"] in ({"space": "conformance", "session": "local"},
                                 session_scope(RUN))
