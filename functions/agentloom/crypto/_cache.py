"""The codec's bounded cache of plaintext data keys (by count, age and use).

Three maps, each an LRU bounded by count:

- ``keys``: key id -> ``DataKey`` (the AES-GCM key and when it was obtained from the
  keyring). An entry older than ``max_age`` is dropped: the next use asks the keyring
  again. ``uses`` counts the values this process sealed under each key id (it outlives
  the key's entry): a key that sealed ``max_uses`` values still opens, but seals no
  more — a fresh key follows.
- ``scopes``: scope -> the key id new documents of that scope are sealed with (one
  ``GenerateDataKey`` per scope per ``max_age``, shared by the runs of a session).
- ``documents``: run id -> the key id its head was last sealed or seen with, so a run
  keeps one data key for its life (a cold process pays one ``Decrypt``, no
  ``GenerateDataKey``). ``recorded``: (run id, key id) pairs whose key record is known
  to be stored. These two hold ids, not secrets; they are bounded at
  ``DOCUMENT_ENTRIES``.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from agentloom_runtime.errors import ConfigError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

DOCUMENT_ENTRIES = 16_384  # runs remembered (ids only), and (run, key) records known

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True)
class CacheLimits:
    """Bounds of the data-key cache (per codec, per process).

    ``max_keys``: plaintext data keys held at once; ``max_age``: seconds a data key is
    used after it was obtained from the keyring (then obtained again: one KMS call);
    ``max_uses``: values this process seals under one data key before it makes a new
    one (random 96-bit nonces stay far below the 2**32 bound per key)."""

    max_keys: int = 256
    max_age: float = 600.0
    max_uses: int = 2**24

    def __post_init__(self) -> None:
        if self.max_keys < 1 or self.max_age <= 0 or not 1 <= self.max_uses <= 2**32:
            raise ConfigError("CacheLimits: max_keys >= 1, max_age > 0, "
                              "1 <= max_uses <= 2**32")


@dataclass(frozen=True)
class DataKey:
    key_id: bytes
    aead: AESGCM
    record: bytes  # the stored key record: the wrapped key and its context, no secret
    obtained: float


class _Lru(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self.items.get(key)
        if value is not None:
            self.items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self.items[key] = value
        self.items.move_to_end(key)
        while len(self.items) > self.size:
            self.items.popitem(last=False)

    def pop(self, key: K) -> None:
        self.items.pop(key, None)


class DataKeyCache:
    """Thread-safe; every method takes the cache's lock briefly (no I/O under it)."""

    def __init__(self, limits: CacheLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: _Lru[bytes, DataKey] = _Lru(limits.max_keys)
        self._scopes: _Lru[tuple[tuple[str, str], ...], bytes] = _Lru(limits.max_keys)
        self._documents: _Lru[str, bytes] = _Lru(DOCUMENT_ENTRIES)
        self._recorded: _Lru[tuple[str, bytes], bool] = _Lru(DOCUMENT_ENTRIES)
        self._uses: _Lru[bytes, int] = _Lru(DOCUMENT_ENTRIES)

    def now(self) -> float:
        return self._clock()

    def key(self, key_id: bytes, *, sealing: bool) -> DataKey | None:
        """The key, if held and not too old; for ``sealing``, also not used up."""
        with self._lock:
            key = self._keys.get(key_id)
            if key is None:
                return None
            if self._clock() - key.obtained > self.limits.max_age:
                self._keys.pop(key_id)
                return None
            if sealing and self._used_up(key_id):
                return None
            return key

    def _used_up(self, key_id: bytes) -> bool:  # under the lock
        return (self._uses.get(key_id) or 0) >= self.limits.max_uses

    def add(self, key: DataKey) -> None:
        with self._lock:
            self._keys.put(key.key_id, key)

    def scope_key(self, scope: tuple[tuple[str, str], ...]) -> DataKey | None:
        with self._lock:
            key_id = self._scopes.get(scope)
        return None if key_id is None else self.key(key_id, sealing=True)

    def set_scope_key(self, scope: tuple[tuple[str, str], ...], key: DataKey) -> None:
        with self._lock:
            self._keys.put(key.key_id, key)
            self._scopes.put(scope, key.key_id)

    def document_key(self, run_id: str) -> bytes | None:
        with self._lock:
            return self._documents.get(run_id)

    def set_document_key(self, run_id: str, key_id: bytes) -> None:
        with self._lock:
            self._documents.put(run_id, key_id)

    def recorded(self, run_id: str, key_id: bytes) -> bool:
        with self._lock:
            return self._recorded.get((run_id, key_id)) is not None

    def set_recorded(self, run_id: str, key_id: bytes) -> None:
        with self._lock:
            self._recorded.put((run_id, key_id), True)

    def use(self, key_id: bytes) -> None:
        with self._lock:
            self._uses.put(key_id, (self._uses.get(key_id) or 0) + 1)

    def is_used_up(self, key_id: bytes) -> bool:
        with self._lock:
            return self._used_up(key_id)
