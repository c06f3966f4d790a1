"""Envelope encryption for the checkpoint store: ``EnvelopeCodec`` (a ``RecordCodec``).

**Envelope, version 1** (bytes; a row holds it in standard base64, a blob raw)::

    "ALE" | 0x01 | key id (16) | nonce (12) | AES-256-GCM ciphertext | tag (16)

The first 32 bytes are the header. The AAD is the header followed by the item's
identity, ``["head", run_id, "", version]``, ``["log", run_id, stream, seq]`` or
``["blob", run_id, blob_key, 0]`` as compact UTF-8 JSON: a ciphertext copied to another
item, another run, or a head replayed at another version fails to open, as does any
altered byte. The nonce is random (``os.urandom``) per value. ``overhead`` = 48 bytes.

**Data keys and key records.** Each data key has a random 16-byte key id, named by every
envelope sealed with it. Its *key record* (compact JSON, no secret)::

    {"context": {...}, "format": 1, "key_id": "<base64url>", "keyring": "<kind>:<id>",
     "wrapped": "<base64 of the keyring's wrapped key>"}

is stored once per (run, key) in the run's blob space (``KeySlots``), under the name
``sha256:<hex of SHA-256("agentloom/key-record\\0" + key id)>``, before anything sealed
with that key is written — so every envelope a store holds has its record, even the
spilled values of a commit that lost its compare-and-set. The plaintext key is never
stored.

**Which key a write uses.** A run keeps the data key its head was sealed with (learned
when this process opened or sealed its head), so a run normally has one data key for
its life. A run with no usable key in this process — a new run, or one whose key was
used up (``max_uses``) — takes its scope's current key: ``scope(run_id)`` names the scope
(the keyring's encryption context, e.g. ``{"space": s, "session": x}``) and one
``GenerateDataKey`` per scope per ``max_age`` serves every new run of that scope in the
process. Reads never consult ``scope``: the key record carries the context.

KMS calls: one ``GenerateDataKey`` per scope per process and ``max_age``; one
``Decrypt`` per data key per cold process and ``max_age``; a key a process unwrapped
also serves as its scope's current key there (so a step container that opened a run's
head seals the run's inbox and the session's next run without a ``GenerateDataKey``).
A process holds at most ``max_keys`` plaintext keys.

Errors: an envelope that fails authentication, is malformed, has an unknown version or
a missing key record is a ``PersistenceError``; a key this codec's keyring cannot open
(another key file, another KMS key, another kind of keyring) is a ``ConfigError``.
Neither message holds plaintext.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from agentloom_runtime.checkpoint.store import ItemId, KeySlots
from agentloom_runtime.errors import ConfigError, PersistenceError

try:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
except ImportError as exc:  # pragma: no cover - the extra is installed in tests
    raise ImportError("agentloom.crypto needs cryptography: "
                      "pip install 'agentloom[aws]'") from exc

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from .contracts import Keyring, ScopeResolver, check_scope

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

MAGIC = b"ALE"
VERSION = 1
KEY_ID_BYTES = 16
NONCE_BYTES = 12
TAG_BYTES = 16
HEADER_BYTES = len(MAGIC) + 1 + KEY_ID_BYTES + NONCE_BYTES  # 32
DATA_KEY_BYTES = 32  # AES-256
KEY_RECORD_FORMAT = 1
_RECORD_DOMAIN = b"agentloom/key-record\x00"

Scope = tuple[tuple[str, str], ...]
DEFAULT_LIMITS = CacheLimits()


class EnvelopeCodec:
    """AES-256-GCM envelopes under data keys from ``keyring``; see the module docstring.

    ``scope``: the key scope of a run id, asked when a run needs a new data key (it may
    raise ``ConfigError`` for a run it does not know: nothing is written then).
    ``limits``: the data-key cache's bounds. ``clock``: for tests of the age limit."""

    overhead = HEADER_BYTES + TAG_BYTES

    def __init__(self, keyring: Keyring, *, scope: ScopeResolver,
                 limits: CacheLimits = DEFAULT_LIMITS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.keyring = keyring
        self._scope = scope
        self._cache = DataKeyCache(limits, clock)
        # One keyring call at a time: concurrent misses of one key make one call.
        self._keyring_lock = threading.Lock()

    # -- RecordCodec ---------------------------------------------------------------------

    def sealer(self, run_id: str, slots: KeySlots) -> _Sealer:
        key = self._run_key(run_id, slots)
        if key is None:
            key = self._scope_key(run_id)
        if not self._cache.recorded(run_id, key.key_id):
            slots.put(run_id, record_name(key.key_id), key.record)
            self._cache.set_recorded(run_id, key.key_id)
        self._cache.set_document_key(run_id, key.key_id)
        return _Sealer(key, self._cache)

    def open(self, item: ItemId, envelope: bytes, slots: KeySlots) -> bytes:
        key_id, nonce = _parse_header(item, envelope)
        key = self._cache.key(key_id, sealing=False) or self._open_key(item.run_id, key_id,
                                                                      slots)
        try:
            plaintext = key.aead.decrypt(nonce, envelope[HEADER_BYTES:],
                                         _aad(envelope[:HEADER_BYTES], item))
        except InvalidTag:
            raise PersistenceError(
                f"run {item.run_id}: {item.describe()} failed authentication: its "
                "ciphertext was altered or belongs to another item",
                details={"run_id": item.run_id, "key_id": _kid(key_id)}) from None
        # Sealed for this run under this key, so the run holds the key's record.
        self._cache.set_recorded(item.run_id, key_id)
        if item.kind == "head":
            self._cache.set_document_key(item.run_id, key_id)
        return plaintext

    # -- keys ----------------------------------------------------------------------------

    def _run_key(self, run_id: str, slots: KeySlots) -> DataKey | None:
        """The key the run's head was sealed with, if this process knows it and it may
        still seal (reopened from the run's record once it aged out of the cache)."""
        key_id = self._cache.document_key(run_id)
        if key_id is None or self._cache.is_used_up(key_id):
            return None
        key = self._cache.key(key_id, sealing=True)
        if key is None:
            key = self._open_key(run_id, key_id, slots)
        return key

    def _scope_key(self, run_id: str) -> DataKey:
        scope = check_scope(self._scope(run_id), f"key scope of run {run_id!r}")
        name = _scope_name(scope)
        key = self._cache.scope_key(name)
        if key is not None:
            return key
        with self._keyring_lock:
            key = self._cache.scope_key(name)
            if key is not None:
                return key
            plaintext, wrapped = self.keyring.generate(scope)
            if len(plaintext) != DATA_KEY_BYTES:
                raise ConfigError(f"keyring {self.keyring.keyring_id} returned a data key "
                                  f"of {len(plaintext)} bytes, not {DATA_KEY_BYTES}")
            key_id = os.urandom(KEY_ID_BYTES)
            key = DataKey(key_id, AESGCM(plaintext),
                          _key_record(key_id, self.keyring.keyring_id, scope, wrapped),
                          self._cache.now())
            self._cache.set_scope_key(name, key)
        return key

    def _open_key(self, run_id: str, key_id: bytes, slots: KeySlots) -> DataKey:
        """The data key ``key_id`` of ``run_id``, unwrapped from the run's key record."""
        with self._keyring_lock:
            key = self._cache.key(key_id, sealing=False)
            if key is not None:
                return key
            raw = slots.get(run_id, record_name(key_id))
            if raw is None:
                raise PersistenceError(
                    f"run {run_id}: the key record of data key {_kid(key_id)} is missing",
                    details={"run_id": run_id, "key_id": _kid(key_id)})
            keyring, context, wrapped = _parse_record(run_id, key_id, raw)
            plaintext = self._unwrap(run_id, key_id, keyring, context, wrapped)
            key = DataKey(key_id, AESGCM(plaintext), raw, self._cache.now())
            # it also seals what its scope's other runs write next (a run's inbox, the
            # next run of the session): no GenerateDataKey after a Decrypt in a container
            self._cache.set_scope_key(_scope_name(context), key)
        return key

    def _unwrap(self, run_id: str, key_id: bytes, keyring: str, context: dict[str, str],
                wrapped: bytes) -> bytes:
        ours = self.keyring.keyring_id
        details = {"run_id": run_id, "key_id": _kid(key_id), "wrapped_by": keyring,
                   "keyring": ours}
        if _kind(keyring) != _kind(ours):
            raise ConfigError(f"run {run_id}: its data key {_kid(key_id)} was wrapped by "
                              f"keyring {keyring}; this store's keyring is {ours}",
                              details=details)
        try:
            plaintext = self.keyring.unwrap(wrapped, context)
        except ConfigError as exc:
            raise ConfigError(f"run {run_id}: keyring {ours} cannot open its data key "
                              f"{_kid(key_id)} (wrapped by {keyring}): {exc.message}",
                              details={**exc.details, **details}) from exc
        except PersistenceError as exc:
            raise PersistenceError(f"run {run_id}: cannot open its data key "
                                   f"{_kid(key_id)}: {exc.message}",
                                   details={**exc.details, **details}) from exc
        if len(plaintext) != DATA_KEY_BYTES:
            raise PersistenceError(f"run {run_id}: data key {_kid(key_id)} unwrapped to "
                                   f"{len(plaintext)} bytes", details=details)
        return plaintext


class _Sealer:
    def __init__(self, key: DataKey, cache: DataKeyCache) -> None:
        self._key = key
        self._cache = cache

    def seal(self, item: ItemId, plaintext: bytes) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        header = MAGIC + bytes([VERSION]) + self._key.key_id + nonce
        self._cache.use(self._key.key_id)
        return header + self._key.aead.encrypt(nonce, plaintext, _aad(header, item))


def _scope_name(context: dict[str, str]) -> Scope:
    return tuple(sorted(context.items()))


def record_name(key_id: bytes) -> str:
    """Where a run's key record of ``key_id`` is stored (a blob-key-shaped name)."""
    return "sha256:" + hashlib.sha256(_RECORD_DOMAIN + key_id).hexdigest()


def _aad(header: bytes, item: ItemId) -> bytes:
    identity = json.dumps([item.kind, item.run_id, item.name, item.number],
                          ensure_ascii=False, separators=(",", ":"))
    return header + identity.encode()


def _parse_header(item: ItemId, envelope: bytes) -> tuple[bytes, bytes]:
    def bad(why: str) -> PersistenceError:
        return PersistenceError(f"run {item.run_id}: {item.describe()} {why}",
                                details={"run_id": item.run_id})

    if len(envelope) < HEADER_BYTES + TAG_BYTES or envelope[:len(MAGIC)] != MAGIC:
        raise bad("is not an encrypted envelope (plaintext, or damaged)")
    version = envelope[len(MAGIC)]
    if version != VERSION:
        raise bad(f"has envelope version {version}; this code reads version {VERSION}")
    start = len(MAGIC) + 1
    return (envelope[start:start + KEY_ID_BYTES],
            envelope[start + KEY_ID_BYTES:HEADER_BYTES])


def _key_record(key_id: bytes, keyring: str, context: dict[str, str],
                wrapped: bytes) -> bytes:
    record = {"format": KEY_RECORD_FORMAT, "key_id": _kid(key_id), "keyring": keyring,
              "context": context, "wrapped": base64.b64encode(wrapped).decode("ascii")}
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"),
                      sort_keys=True).encode()


def _parse_record(run_id: str, key_id: bytes, raw: bytes) -> tuple[str, dict[str, str], bytes]:
    try:
        record: Any = json.loads(raw)
        if not isinstance(record, dict) or record.get("format") != KEY_RECORD_FORMAT:
            raise ValueError("format")
        keyring, context = record["keyring"], record["context"]
        if record["key_id"] != _kid(key_id) or not isinstance(keyring, str):
            raise ValueError("key id")
        wrapped = base64.b64decode(record["wrapped"], validate=True)
        return keyring, check_scope(context, "key record"), wrapped
    except (ValueError, KeyError, TypeError, ConfigError):
        raise PersistenceError(f"run {run_id}: the key record of data key {_kid(key_id)} "
                               "is malformed", details={"run_id": run_id}) from None


def _kid(key_id: bytes) -> str:
    return base64.urlsafe_b64encode(key_id).decode("ascii").rstrip("=")


def _kind(keyring_id: str) -> str:
    return keyring_id.split(":", 1)[0]
