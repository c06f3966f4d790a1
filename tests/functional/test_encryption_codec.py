"""The envelope codec's key management on a real SQLite file: the data-key cache's
bounds (age, uses, count), one keyring call for concurrent misses, the scope resolver's
answers checked before anything is written, and envelopes of another version refused."""

from __future__ import annotations

import base64
import threading
from collections import Counter
from pathlib import Path

import pytest

from agentloom.crypto import CacheLimits, EnvelopeCodec, Keyring, KeyScope, LocalKeyring
from agentloom.crypto.codec import KEY_ID_BYTES, MAGIC, record_name
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.checkpoint import Commit, Head, LogEntry
from agentloom_runtime.errors import ConfigError, PersistenceError


def envelope_key_id(envelope: bytes) -> bytes:
    """The key id an envelope names (after "ALE" and the version byte)."""
    assert envelope[:len(MAGIC)] == MAGIC
    return envelope[len(MAGIC) + 1:len(MAGIC) + 1 + KEY_ID_BYTES]

class CountingKeyring:
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


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def per_run(run_id: str) -> KeyScope:
    return {"space": "s", "session": run_id}


def per_space(run_id: str) -> KeyScope:
    return {"space": "s", "session": "one"}


@pytest.fixture
def keyring(tmp_path: Path) -> CountingKeyring:
    return CountingKeyring(LocalKeyring(tmp_path / "agentloom.key"))


def open_store(tmp_path: Path, codec: EnvelopeCodec) -> SqliteCheckpointStore:
    return SqliteCheckpointStore(tmp_path / "c.db", codec=codec)


def head_key(store: SqliteCheckpointStore, run_id: str) -> bytes:
    raw = store._get_head(run_id)
    assert raw is not None
    return envelope_key_id(base64.b64decode(raw[1]))


def test_new_runs_of_a_scope_share_one_data_key_until_it_ages(
        tmp_path: Path, keyring: CountingKeyring) -> None:
    clock = Clock()
    store = open_store(tmp_path, EnvelopeCodec(keyring, scope=per_space,
                                               limits=CacheLimits(max_age=60), clock=clock))
    for n in range(5):
        store.commit(Commit(f"run-{n}", 0, {"n": n}))
    assert keyring.calls == {"generate": 1}
    assert len({head_key(store, f"run-{n}") for n in range(5)}) == 1
    clock.now += 61
    store.commit(Commit("run-new", 0, {}))  # the scope's key aged out: a new one
    assert keyring.calls == {"generate": 2}
    assert head_key(store, "run-new") != head_key(store, "run-0")
    head = store.load_head("run-0")  # an old run keeps its own key: one unwrap
    assert head is not None
    store.commit(Commit("run-0", head.version, {"n": "again"}))
    assert keyring.calls == {"generate": 2, "unwrap": 1}
    assert head_key(store, "run-0") == head_key(store, "run-1")
    store.close()


def test_a_used_up_key_seals_no_more_but_still_opens(
        tmp_path: Path, keyring: CountingKeyring) -> None:
    store = open_store(tmp_path, EnvelopeCodec(keyring, scope=per_run,
                                               limits=CacheLimits(max_uses=5)))
    store.commit(Commit("run", 0, {"v": 1}, [LogEntry("s", n, {"n": n}) for n in (1, 2, 3)]))
    store.commit(Commit("run", 1, {"v": 2}, [LogEntry("s", 4, {"n": 4})]))  # 4 + 2 heads
    store.commit(Commit("run", 2, {"v": 3}, [LogEntry("s", 5, {"n": 5})]))
    assert keyring.calls == {"generate": 2}
    keys = [envelope_key_id(base64.b64decode(text)) for _, text in store._query(
        "run", "s", 0, None)]
    assert keys[:4] == [keys[0]] * 4 and keys[4] != keys[0]
    assert [e.body["n"] for e in store.read("run", "s")] == [1, 2, 3, 4, 5]
    assert store.load_head("run") == Head(3, {"v": 3})
    assert keyring.calls == {"generate": 2}  # both keys still held: no unwrap
    store.close()


def test_the_cache_holds_at_most_max_keys(tmp_path: Path, keyring: CountingKeyring) -> None:
    codec = EnvelopeCodec(keyring, scope=per_run, limits=CacheLimits(max_keys=2))
    store = open_store(tmp_path, codec)
    for n in range(5):
        store.commit(Commit(f"run-{n}", 0, {"n": n}))
    assert keyring.calls == {"generate": 5}
    assert len(codec._cache._keys.items) == 2
    assert store.load_head("run-0") == Head(1, {"n": 0})  # evicted: unwrapped again
    assert store.load_head("run-4") == Head(1, {"n": 4})  # held
    assert keyring.calls == {"generate": 5, "unwrap": 1}
    store.close()


def test_concurrent_misses_make_one_keyring_call(
        tmp_path: Path, keyring: CountingKeyring) -> None:
    store = open_store(tmp_path, EnvelopeCodec(keyring, scope=per_space))
    workers = 8
    barrier, errors = threading.Barrier(workers), list[BaseException]()

    def first_commit(n: int) -> None:
        try:
            barrier.wait(timeout=30)
            store.commit(Commit(f"run-{n}", 0, {"n": n}))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=first_commit, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert keyring.calls == {"generate": 1}
    cold = SqliteCheckpointStore(tmp_path / "c.db", codec=EnvelopeCodec(keyring,
                                                                       scope=per_space))
    barrier, results = threading.Barrier(workers), list[Head | None]()

    def cold_read(n: int) -> None:
        barrier.wait(timeout=30)
        results.append(cold.load_head(f"run-{n}"))

    threads = [threading.Thread(target=cold_read, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(r.body["n"] for r in results if r is not None) == list(range(workers))
    assert keyring.calls == {"generate": 1, "unwrap": 1}
    store.close()
    cold.close()


@pytest.mark.parametrize("answer", [{}, {"space": ""}, {"space": 7}, ["space", "s"],
                                    {f"k{n}": "v" for n in range(9)}])
def test_a_bad_scope_is_refused_before_anything_is_written(
        tmp_path: Path, keyring: CountingKeyring, answer: object) -> None:
    store = open_store(tmp_path, EnvelopeCodec(keyring, scope=lambda run_id: answer))  # type: ignore[arg-type, return-value]
    with pytest.raises(ConfigError, match="key scope"):
        store.commit(Commit("run", 0, {"pad": "x" * 100_000}))
    assert keyring.calls == {}
    assert store._conn().execute("SELECT count(*) FROM blobs").fetchone() == (0,)
    store.close()


def test_an_envelope_of_another_version_or_a_damaged_key_record_is_refused(
        tmp_path: Path, keyring: CountingKeyring) -> None:
    store = open_store(tmp_path, EnvelopeCodec(keyring, scope=per_run))
    store.commit(Commit("run", 0, {"v": 1}, [LogEntry("s", 1, {"n": 1})]))
    (_, text), = store._query("run", "s", 0, None)
    raw = bytearray(base64.b64decode(text))
    raw[3] = 2  # a future envelope version
    store._write("run", 1, 2, store._get_head("run")[1], [  # type: ignore[index]
        ("s", 2, base64.b64encode(raw).decode())])
    with pytest.raises(PersistenceError, match="envelope version 2; this code reads "
                                               "version 1"):
        store.read("run", "s", after=1)
    name = record_name(envelope_key_id(bytes(raw)))
    with store._conn() as conn:
        conn.execute("UPDATE blobs SET data = ? WHERE key = ?", (b'{"format": 9}', name))
    cold = SqliteCheckpointStore(tmp_path / "c.db", codec=EnvelopeCodec(keyring,
                                                                       scope=per_run))
    with pytest.raises(PersistenceError, match=r"key record .* is malformed"):
        cold.read("run", "s")
    store.close()
    cold.close()


def test_cache_limits_are_checked() -> None:
    for bad in ({"max_keys": 0}, {"max_age": 0}, {"max_uses": 0}, {"max_uses": 2**33}):
        with pytest.raises(ConfigError):
            CacheLimits(**bad)
