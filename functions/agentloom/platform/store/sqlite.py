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
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from agentloom.stores.sqlite_connections import ThreadConnections
from agentloom_runtime.checkpoint.store import CompanionConflict
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
