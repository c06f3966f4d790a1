"""``SealedItemStore``: the bodies of another item store sealed by the envelope codec
(``agentloom.crypto.EnvelopeCodec``) — the embedded platform store's, which hold what
people wrote: session titles, agent prompts and drafts, run errors (a cancel's reason),
events, knowledge base and MCP records. ``embedded_items(home)`` is the one way a home's
platform items are opened (the CLI, ``agentloom serve`` and each capability's wiring).

- ``pk``, ``sk`` and ``version`` stay plaintext: the index. A body is the base64 of an
  envelope whose AAD binds it to its item (``["blob", "platform", "[pk, sk]", 0]``): a
  body copied to another item fails to open.
- **Bodies written before sealing** (JSON text, which starts with ``{``) are read as they
  are and sealed when the item is next written; nothing is migrated at once.
- **Data keys**: one document (``platform``, scope ``{"store": "platform"}``), so the
  codec's cache gives a process one data key per ``max_age``. Its key record (the wrapped
  data key, no secret) is the inner store's item ``seal#platform`` / ``key#{name}``, in
  clear, stored before anything sealed under the key: in a transaction of its own, or —
  while a checkpoint commit is joined, whose transaction holds the file's one write
  lock — in that very transaction, and again in each later one until it is read back
  (a commit that rolled back took the record with it).
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from agentloom.crypto import EnvelopeCodec, Keyring, LocalKeyring, fixed_scope
from agentloom.stores import layout
from agentloom_runtime.checkpoint.store import ItemId
from agentloom_runtime.errors import PersistenceError

from .items import ABSENT, ANY, ItemStore, Stored, Write, WriteConflict
from .sqlite import SqliteItemStore

DOCUMENT = "platform"
KEYS_PK = f"seal#{DOCUMENT}"


def embedded_items(home: Path, *, reader: bool = False) -> SealedItemStore:
    """The platform items of an embedded home: ``home/agentloom.sqlite3`` (owner-only
    first: ``agentloom.stores.layout.prepare``), sealed under ``home/agentloom.key``.
    ``reader``: for a process that only reads (``SqliteItemStore``)."""
    database = layout.prepare(home)
    return SealedItemStore(SqliteItemStore(database, reader=reader),
                           LocalKeyring(home / layout.KEY_FILE))


class _KeySlots:
    """The codec's ``KeySlots`` on the inner store (module docstring, "Data keys")."""

    def __init__(self, inner: ItemStore) -> None:
        self.inner = inner
        self._pending: dict[str, bytes] = {}  # records not yet read back from the store
        self._lock = threading.Lock()
        self._joining = threading.local()

    def get(self, run_id: str, name: str) -> bytes | None:
        found = self.inner.get_raw(KEYS_PK, f"key#{name}")
        if found is None:
            return None
        return base64.b64decode(json.loads(found[1])["record"])

    def put(self, run_id: str, name: str, data: bytes) -> None:
        with self._lock:
            self._pending[name] = data
        if not getattr(self._joining, "on", False):
            self.store_pending()

    def store_pending(self) -> None:
        """Outside any transaction: each pending record in one of its own."""
        with self._lock:
            pending = dict(self._pending)
        for name, data in pending.items():
            try:
                self.inner.transact([_record(name, data, ABSENT)])
            except WriteConflict:
                pass  # stored already
            with self._lock:
                self._pending.pop(name, None)

    def joined(self) -> list[Write]:
        """The pending records, to ride in the transaction being joined."""
        with self._lock:
            pending = dict(self._pending)
        writes = []
        for name, data in pending.items():
            if self.inner.get_raw(KEYS_PK, f"key#{name}") is not None:
                with self._lock:
                    self._pending.pop(name, None)
            else:
                writes.append(_record(name, data, ANY))
        return writes

    def joining(self, on: bool) -> None:
        self._joining.on = on


def _record(name: str, data: bytes, expect: int) -> Write:
    body = json.dumps({"record": base64.b64encode(data).decode("ascii")})
    return Write(KEYS_PK, f"key#{name}", body, expect)


def _item(pk: str, sk: str) -> ItemId:
    return ItemId.blob(DOCUMENT, json.dumps([pk, sk], ensure_ascii=False))


class SealedItemStore(ItemStore):
    """``inner``'s items with sealed bodies (module docstring); keys from ``keyring``."""

    def __init__(self, inner: ItemStore, keyring: Keyring) -> None:
        self.inner = inner
        self._codec = EnvelopeCodec(keyring, scope=fixed_scope(store=DOCUMENT))
        self._slots = _KeySlots(inner)

    def close(self) -> None:
        self.inner.close()

    # -- reads ---------------------------------------------------------------------------

    def _get(self, pk: str, sk: str) -> tuple[int, str] | None:
        found = self.inner.get_raw(pk, sk)
        return None if found is None else (found[0], self._open(pk, sk, found[1]))

    def _query(self, pk: str, prefix: str, after: str | None, limit: int | None,
               reverse: bool) -> list[Stored]:
        return [Stored(s.sk, s.version, self._open(pk, s.sk, s.text))
                for s in self.inner.query_raw(pk, prefix, after=after, limit=limit,
                                              reverse=reverse)]

    def _open(self, pk: str, sk: str, text: str) -> str:
        if text.startswith("{"):
            return text  # written before bodies were sealed
        try:
            envelope = base64.b64decode(text, validate=True)
        except ValueError:
            raise PersistenceError(f"platform item {pk} / {sk} is neither JSON nor a "
                                   "sealed envelope") from None
        return self._codec.open(_item(pk, sk), envelope, self._slots).decode()

    # -- writes --------------------------------------------------------------------------

    def _seal(self, writes: Sequence[Write]) -> list[Write]:
        sealer = self._codec.sealer(DOCUMENT, self._slots)
        return [w if w.body is None else replace(w, body=base64.b64encode(
            sealer.seal(_item(w.pk, w.sk), w.body.encode())).decode("ascii"))
            for w in writes]

    def _transact(self, writes: Sequence[Write]) -> None:
        sealed = self._seal(writes)  # a new data key's record is stored first
        self._slots.store_pending()
        self.inner.transact(sealed)

    def join_writes(self, writes: Sequence[Write], transaction: object) -> None:
        self._slots.joining(True)
        try:
            sealed = self._seal(writes)
        finally:
            self._slots.joining(False)
        self.inner.join_writes([*sealed, *self._slots.joined()], transaction)
