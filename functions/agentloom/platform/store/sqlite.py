"""The SQLite item store: the platform store's embedded default.

One table of items in a SQLite file in WAL mode; by default ``agentloom serve`` shares
the file with the checkpoint store (``agentloom.sqlite3``: one file to back up, one
write lock, readers never blocked). The checkpoint store keeps ``PRAGMA user_version``
for its own schema; this adapter records its schema in ``platform_schema``::

    platform_schema(name PK, version)                    name 'items', version 1
    platform_items(pk, sk, version, body)  PK(pk, sk)    WITHOUT ROWID

A transaction is one ``BEGIN IMMEDIATE``: it takes the write lock, checks every
condition, applies every write, commits; a failed condition rolls it all back and raises
``WriteConflict``. The rules hold across threads (a connection per thread) and processes.
``join_writes`` applies writes inside a ``SqliteCheckpointStore`` commit on the same
file (its connection, its transaction): the session stream rides in the run's commit.

``SealedItemStore``: the bodies of another item store sealed by the envelope codec
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
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from agentloom.crypto import EnvelopeCodec, Keyring, LocalKeyring, fixed_scope
from agentloom.stores import layout
from agentloom.stores.sqlite_connections import ThreadConnections
from agentloom_runtime.checkpoint.store import CompanionConflict, ItemId
from agentloom_runtime.errors import ConfigError, PersistenceError

from .items import ABSENT, ANY, ItemStore, Stored, Write, WriteConflict

SCHEMA_VERSION = 1
_TOP = "\U0010ffff"

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS platform_schema (
        name TEXT PRIMARY KEY, version INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS platform_items (
        pk TEXT NOT NULL, sk TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (pk, sk)) WITHOUT ROWID""",
)


class SqliteItemStore(ItemStore):
    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0,
                 reader: bool = False) -> None:
        """``reader``: a process that only reads (``stores.sqlite_connections``)."""
        text = os.fspath(path)
        if not text or text == ":memory:" or text.startswith("file:"):
            raise ConfigError("SqliteItemStore needs a file path; use "
                              "InMemoryItemStore for a store in memory")
        self.path = Path(text)
        self._file = self.path.resolve()
        self._busy_ms = int(busy_timeout * 1000)
        self._pool = ThreadConnections(self.path, busy_ms=self._busy_ms, synchronous="FULL",
                                       what="platform store", reader=reader)
        self._init_schema(self._conn())

    # -- connections ---------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        return self._pool.get()

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        if self._pool.immutable:  # a reader on a full disk: the schema must be there
            if not self._schema_found(conn):
                raise ConfigError(f"{self.path} holds no platform store")
            return
        deadline = time.monotonic() + self._busy_ms / 1000
        while True:  # switching to WAL may race another opener of a fresh file
            try:
                mode = str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
                break
            except sqlite3.OperationalError as exc:
                if time.monotonic() >= deadline:
                    raise PersistenceError(f"{self.path}: cannot switch to WAL: {exc}") \
                        from exc
                time.sleep(0.01)
        if mode.lower() != "wal":
            raise ConfigError(f"{self.path}: cannot use WAL mode (journal_mode={mode})")
        if self._schema_found(conn):
            return  # nothing to write: a store on a full disk still opens and reads
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA:
                conn.execute(statement)
            if not self._schema_found(conn):
                conn.execute("INSERT INTO platform_schema VALUES ('items', ?)",
                             (SCHEMA_VERSION,))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _schema_found(self, conn: sqlite3.Connection) -> bool:
        """Whether the file holds this schema (``ConfigError`` for another version)."""
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"platform_schema", "platform_items"} <= tables:
            return False
        row = conn.execute("SELECT version FROM platform_schema WHERE name = 'items'"
                           ).fetchone()
        if row is not None and int(row[0]) != SCHEMA_VERSION:
            raise ConfigError(f"{self.path}: platform schema version {row[0]}, this "
                              f"code reads version {SCHEMA_VERSION}")
        return row is not None

    def close(self) -> None:
        self._pool.close()

    def join_writes(self, writes: Sequence[Write], transaction: object) -> None:
        """In a ``SqliteCheckpointStore`` commit on the same file: ``transaction`` is its
        connection inside ``BEGIN IMMEDIATE``; the writes become part of it."""
        if not isinstance(transaction, sqlite3.Connection) \
                or _database_file(transaction) != self._file:
            raise ConfigError(f"the platform store {self.path} joins only the commits of a "
                              "SqliteCheckpointStore on the same file")
        try:
            _apply(transaction, writes)
        except WriteConflict as err:
            raise CompanionConflict(f"session stream: {err.message}") from err

    # -- primitives ----------------------------------------------------------------------

    def _get(self, pk: str, sk: str) -> tuple[int, str] | None:
        row = self._conn().execute(
            "SELECT version, body FROM platform_items WHERE pk = ? AND sk = ?",
            (pk, sk)).fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    def _query(self, pk: str, prefix: str, after: str | None, limit: int | None,
               reverse: bool) -> list[Stored]:
        sql = "SELECT sk, version, body FROM platform_items WHERE pk = ? AND sk >= ? AND sk < ?"
        args: list[object] = [pk, prefix, prefix + _TOP]
        if after is not None:
            sql += " AND sk < ?" if reverse else " AND sk > ?"
            args.append(after)
        sql += " ORDER BY sk DESC" if reverse else " ORDER BY sk"
        sql += " LIMIT ?"
        args.append(-1 if limit is None else max(limit, 0))
        rows = self._conn().execute(sql, args).fetchall()
        return [Stored(str(sk), int(version), str(body)) for sk, version, body in rows]

    def _transact(self, writes: Sequence[Write]) -> None:
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise PersistenceError(f"cannot lock {self.path}: {exc}") from exc
        try:
            _apply(conn, writes)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback(conn)
            raise PersistenceError(f"platform store {self.path}: write failed: {exc}") from exc
        except BaseException:
            _rollback(conn)
            raise


def _apply(conn: sqlite3.Connection, writes: Sequence[Write]) -> None:
    """Check every condition and apply every write, inside the caller's transaction."""
    for index, w in enumerate(writes):
        row = conn.execute("SELECT version FROM platform_items WHERE pk = ? AND sk = ?",
                           (w.pk, w.sk)).fetchone()
        version = ABSENT if row is None else int(row[0])
        if w.expect != ANY and w.expect != version:
            raise WriteConflict(f"{w.pk} {w.sk}: version {version}, expected "
                                f"{w.expect}", index=index, pk=w.pk, sk=w.sk)
        if w.check:
            continue
        if w.body is None:
            conn.execute("DELETE FROM platform_items WHERE pk = ? AND sk = ?", (w.pk, w.sk))
        else:
            conn.execute(
                "INSERT INTO platform_items (pk, sk, version, body) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (pk, sk) DO UPDATE SET version = excluded.version, "
                "body = excluded.body", (w.pk, w.sk, version + 1, w.body))


def _database_file(conn: sqlite3.Connection) -> Path | None:
    for _, name, file in conn.execute("PRAGMA database_list").fetchall():
        if name == "main" and file:
            return Path(file).resolve()
    return None


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")


# -- the embedded home's items: sealed at rest ------------------------------------------

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
