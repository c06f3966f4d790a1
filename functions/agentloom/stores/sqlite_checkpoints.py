"""SQLite checkpoint store: the embedded default (one machine, one file).

Layout (``PRAGMA user_version`` = ``SCHEMA_VERSION``)::

    heads(run_id PK, version, body)                 the small versioned head
    log(run_id, stream, seq, body)  PK(run_id, stream, seq)   append-only entries
    blobs(run_id, key, data)        PK(run_id, key)           content-addressed bytes

The file is in WAL mode, so readers never block the writer. Opening a file that holds
the schema already writes nothing (a store on a full disk still opens and reads). A commit is one
``BEGIN IMMEDIATE`` transaction: it takes the write lock first (waiting up to
``busy_timeout``), then compares-and-sets the head and inserts the rows; any clash rolls
the whole transaction back and raises ``CheckpointConflict``. The lock is SQLite's own,
so the rules hold between threads (one connection per thread) and between processes
sharing the file alike.

A plaintext head row longer than ``PACK_BYTES`` is stored deflated (zlib, a BLOB in ``heads.body``)
and whole (no base delta: ``head_bases``): the engine's head is 1–2 KB, which as text
spills from a 1 KiB page into overflow pages that every commit rewrites; deflated it is
one page, so a commit that changes only the head writes one WAL frame. A head stored as
text (by an earlier version, or short) reads as before. An encrypted head (a base64
envelope of ciphertext, which hardly deflates) is stored as it is.

Bodies above the inline limits reach this adapter already spilled (see
``agentloom_runtime.checkpoint.store``): ``heads.body`` and ``log.body`` then hold a small
``{"$spill": …}`` reference and ``blobs.data`` the text, as a BLOB of any size (up to
SQLite's 1 GB default ``SQLITE_MAX_LENGTH``). A spilled value's blob is inserted, in its
own transaction, before the commit's transaction.

Encrypted (``codec=``, e.g. ``agentloom.crypto.EnvelopeCodec`` with a ``LocalKeyring``):
``heads.body`` and ``log.body`` hold base64 envelopes, ``blobs.data`` raw ones, and
``blobs`` also holds the runs' key records (wrapped data keys); ``run_id``, ``stream``,
``seq``, ``version`` and blob keys stay plaintext. The base class does all of it.

Companion writes (``companion=``, ``agentloom_runtime.checkpoint.CommitCompanion``):
``join`` receives this store's ``sqlite3.Connection`` inside the commit's ``BEGIN
IMMEDIATE``, after the head and rows were written and before ``COMMIT``: the host's
writes (the platform store's items in the same file: ``agentloom.platform.store``) are
part of the same transaction, and any failure rolls everything back.

Counters, for benchmarks (UTF-8 bytes, counted once the transaction has committed; a
conflict or a rollback adds nothing): ``bytes_written`` — the head and row texts of each
commit; ``blob_bytes_written`` — blobs newly inserted (an existing key adds nothing).
Neither counts SQLite's own overhead (pages, WAL frames, indexes).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import zlib
from pathlib import Path
from types import TracebackType
from typing import Literal

from agentloom.stores.sqlite_connections import ThreadConnections
from agentloom_runtime.checkpoint.store import (
    BaseCheckpointStore,
    CommitCompanion,
    CompanionWrites,
    RecordCodec,
)
from agentloom_runtime.errors import CheckpointConflict, ConfigError, PersistenceError

SCHEMA_VERSION = 1
PACK_BYTES = 512  # a head row longer than this is stored deflated (``_packed``)

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS heads (
        run_id TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        body TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS log (
        run_id TEXT NOT NULL,
        stream TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (run_id, stream, seq))""",
    """CREATE TABLE IF NOT EXISTS blobs (
        run_id TEXT NOT NULL,
        key TEXT NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (run_id, key))""",
)

Synchronous = Literal["FULL", "NORMAL"]


class SqliteCheckpointStore(BaseCheckpointStore):
    """Checkpoints in one SQLite file, safe across threads and processes.

    ``busy_timeout`` (seconds) bounds the wait for the write lock; past it a commit
    raises ``PersistenceError``. ``synchronous="FULL"`` (default) fsyncs every commit;
    ``"NORMAL"`` is faster but may lose the last commits on power loss (never on a
    process crash) — never a torn one. ``codec``: encrypt what is stored with it
    (``None``: plaintext). ``companion``: the host's writes joined to every commit.
    ``reader``: a process that only reads (``stores.sqlite_connections``: a full disk).
    """

    # A head row is stored whole: SQLite bills by page, not by item, and a delta costs a
    # diff per commit plus a base blob every few commits (more CPU and more WAL here).
    head_bases = False

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0,
                 synchronous: Synchronous = "FULL", codec: RecordCodec | None = None,
                 companion: CommitCompanion | None = None, reader: bool = False) -> None:
        super().__init__(codec=codec, companion=companion)
        text = os.fspath(path)
        if not text or text == ":memory:" or text.startswith("file:"):
            raise ConfigError("SqliteCheckpointStore needs a file path; use "
                              "InMemoryCheckpointStore for a store in memory")
        if busy_timeout < 0:
            raise ConfigError("busy_timeout must be >= 0")
        if synchronous not in ("FULL", "NORMAL"):
            raise ConfigError(f"synchronous must be FULL or NORMAL, not {synchronous!r}")
        self.path = Path(text)
        self._busy_ms = int(busy_timeout * 1000)
        self._synchronous = synchronous
        self._pool = ThreadConnections(self.path, busy_ms=self._busy_ms,
                                       synchronous=synchronous, what="checkpoint store",
                                       reader=reader)
        self._counter_lock = threading.Lock()
        self.bytes_written = 0
        self.blob_bytes_written = 0
        self._init_schema(self._conn())

    # -- connections -------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        return self._pool.get()

    def _enable_wal(self, conn: sqlite3.Connection) -> str:
        # Switching to WAL needs an exclusive lock and, when it races another process
        # opening the same fresh file, SQLite answers SQLITE_BUSY without calling the
        # busy handler; so wait here, within busy_timeout. Once in WAL it is a no-op.
        deadline, delay = time.monotonic() + self._busy_ms / 1000, 0.002
        while True:
            try:
                return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                    raise
                if time.monotonic() >= deadline:
                    raise PersistenceError(f"{self.path}: cannot switch to WAL: {exc}") \
                        from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        if self._pool.immutable:  # a reader on a full disk: the schema must be there
            if not self._schema_found(conn):
                raise ConfigError(f"{self.path} holds no checkpoint store")
            return
        mode = self._enable_wal(conn)
        if mode.lower() != "wal":
            raise ConfigError(f"{self.path}: cannot use WAL mode (journal_mode={mode})")
        if self._schema_found(conn):
            return  # nothing to write: a store on a full disk still opens and reads
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._schema_found(conn)  # the version check again, under the write lock
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

    def _schema_found(self, conn: sqlite3.Connection) -> bool:
        """Whether the file holds this schema already (``ConfigError`` for another
        version); a read, no write."""
        found = conn.execute("PRAGMA user_version").fetchone()[0]
        if found not in (0, SCHEMA_VERSION):
            raise ConfigError(f"{self.path}: checkpoint schema version {found}, "
                              f"this code reads version {SCHEMA_VERSION}")
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        return found == SCHEMA_VERSION and {"heads", "log", "blobs"} <= tables

    def close(self) -> None:
        """Close every connection. Call it once no operation is in flight."""
        self._pool.close()

    def __enter__(self) -> SqliteCheckpointStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- primitives --------------------------------------------------------------------

    def _get_head(self, run_id: str) -> tuple[int, str] | None:
        row = self._conn().execute(
            "SELECT version, body FROM heads WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else (int(row[0]), _text(row[1]))

    def _write(self, run_id: str, expected: int, new: int, head: str,
               rows: list[tuple[str, int, str]], joined: CompanionWrites | None = None) -> None:
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")  # the write lock, or wait busy_timeout
        except sqlite3.Error as exc:
            raise PersistenceError(f"run {run_id}: cannot lock {self.path}: {exc}",
                                   details={"run_id": run_id}) from exc
        try:
            _put_head(conn, run_id, expected, new,
                      head if self._codec is not None else _packed(head))
            _insert_rows(conn, run_id, rows)
            if joined is not None:
                joined.join(conn)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback(conn)
            raise PersistenceError(f"run {run_id}: commit failed: {exc}",
                                   details={"run_id": run_id}) from exc
        except BaseException:
            _rollback(conn)
            raise
        written = len(head.encode()) + sum(len(body.encode()) for _, _, body in rows)
        with self._counter_lock:
            self.bytes_written += written

    def _query(self, run_id: str, stream: str, after: int,
               limit: int | None) -> list[tuple[int, str]]:
        rows = self._conn().execute(
            "SELECT seq, body FROM log WHERE run_id = ? AND stream = ? AND seq > ? "
            "ORDER BY seq LIMIT ?",
            (run_id, stream, after, -1 if limit is None else max(limit, 0))).fetchall()
        return [(int(seq), str(body)) for seq, body in rows]

    def _put_blob(self, run_id: str, key: str, data: bytes) -> None:
        try:
            cursor = self._conn().execute(
                "INSERT OR IGNORE INTO blobs (run_id, key, data) VALUES (?, ?, ?)",
                (run_id, key, data))
        except sqlite3.Error as exc:
            raise PersistenceError(f"run {run_id}: cannot store blob {key}: {exc}",
                                   details={"run_id": run_id}) from exc
        if cursor.rowcount == 1:
            with self._counter_lock:
                self.blob_bytes_written += len(data)

    def delete_run(self, run_id: str) -> None:
        """Remove the run — head, log rows, blobs and its key records — in one
        transaction (a deleted session's run; absent is done)."""
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            for table in ("heads", "log", "blobs"):
                conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback(conn)
            raise PersistenceError(f"run {run_id}: cannot delete it: {exc}",
                                   details={"run_id": run_id}) from exc
        self._remembered.forget(run_id)

    def _get_blob(self, run_id: str, key: str) -> bytes | None:
        row = self._conn().execute(
            "SELECT data FROM blobs WHERE run_id = ? AND key = ?", (run_id, key)).fetchone()
        return None if row is None else bytes(row[0])


def _packed(text: str) -> str | bytes:
    """A head row's stored value: its text, or past ``PACK_BYTES`` the text deflated (a
    BLOB), so that the row stays within one page instead of spilling to overflow pages
    that every commit rewrites (about half the WAL frames of a commit)."""
    data = text.encode()
    return text if len(data) <= PACK_BYTES else zlib.compress(data, 1)


def _text(value: str | bytes) -> str:
    return value if isinstance(value, str) else zlib.decompress(value).decode()


def _put_head(conn: sqlite3.Connection, run_id: str, expected: int, new: int,
              head: str | bytes) -> None:
    if expected == 0:
        try:
            conn.execute("INSERT INTO heads (run_id, version, body) VALUES (?, ?, ?)",
                         (run_id, new, head))
            return
        except sqlite3.IntegrityError:
            pass
    else:
        cursor = conn.execute(
            "UPDATE heads SET version = ?, body = ? WHERE run_id = ? AND version = ?",
            (new, head, run_id, expected))
        if cursor.rowcount == 1:
            return
    row = conn.execute("SELECT version FROM heads WHERE run_id = ?", (run_id,)).fetchone()
    actual = 0 if row is None else int(row[0])
    raise CheckpointConflict(
        f"run {run_id}: head is at version {actual}, step expected {expected}",
        details={"run_id": run_id, "expected": expected, "actual": actual})


def _insert_rows(conn: sqlite3.Connection, run_id: str,
                 rows: list[tuple[str, int, str]]) -> None:
    for stream, seq, body in rows:
        try:
            conn.execute("INSERT INTO log (run_id, stream, seq, body) VALUES (?, ?, ?, ?)",
                         (run_id, stream, seq, body))
        except sqlite3.IntegrityError as exc:
            raise CheckpointConflict(f"run {run_id}: {stream}#{seq} exists",
                                     details={"run_id": run_id, "stream": stream,
                                              "seq": seq}) from exc


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")
