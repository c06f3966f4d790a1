"""One SQLite connection per thread for a database file, shared by the stores that live
in it (checkpoints, platform records).

``isolation_level=None``: no implicit transactions, the stores issue BEGIN/COMMIT.
``check_same_thread=False`` only so that ``close()`` may close every thread's
connection; each connection is otherwise used by its own thread alone. Connections of
threads that have ended are closed when a new one is opened.

A new file gets pages of ``PAGE_SIZE`` (1 KiB, not SQLite's 4 KiB): a commit writes
whole pages to the WAL and fsyncs them, and a step's commits change a few small rows
(the head, two log rows and their index entries, the session's items), so small pages
write and sync about 40 % of the bytes (``tests/benchmarks/bench_floor.py``). A file
created with other pages keeps them (the pragma changes only a file without tables;
``VACUUM`` outside WAL mode would convert one) and works as before.

``reader=True`` (a process that only reads, e.g. ``agentloom show``): to read a file in
WAL mode SQLite must create and size its ``-shm`` index, which a full disk refuses
(``SQLITE_IOERR_SHMSIZE``). When that happens and the WAL holds nothing (every commit is
in the file), the file is opened ``immutable`` instead: read-only, without the index and
without locks (``immutable``), so writes fail and another process's later commits may
not be seen — enough to read a home on a full disk.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from pathlib import Path

from agentloom_runtime.errors import ConfigError

PAGE_SIZE = 1024  # bytes, for a new file (module notes)


class ThreadConnections:
    def __init__(self, path: Path, *, busy_ms: int, synchronous: str, what: str,
                 reader: bool = False) -> None:
        self.path = path
        self.reader = reader
        self.immutable = False  # reader on a full disk: see the module docstring
        self._busy_ms = busy_ms
        self._synchronous = synchronous
        self._what = what  # "checkpoint store", for the closed error
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list[tuple[weakref.ref[threading.Thread], sqlite3.Connection]] = []
        self._closed = False

    def get(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        with self._lock:
            if self._closed:
                raise ConfigError(f"{self._what} {self.path} is closed")
            self._reap_dead_threads()
            conn = self._open()
            self._conns.append((weakref.ref(threading.current_thread()), conn))
        self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close every connection. Call it once no operation is in flight."""
        with self._lock:
            self._closed = True
            for _, conn in self._conns:
                conn.close()
            self._conns = []
        self._local = threading.local()

    def _open(self) -> sqlite3.Connection:
        if self.immutable:
            return self._open_immutable()
        conn = sqlite3.connect(self.path, timeout=self._busy_ms / 1000,
                               isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # a no-op once there are tables
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            if self.reader:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError as exc:
            conn.close()
            if not (self.reader and _no_room(exc) and self._wal_empty()):
                raise
            self.immutable = True
            return self._open_immutable()
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_immutable(self) -> sqlite3.Connection:
        return sqlite3.connect(f"{self.path.resolve().as_uri()}?immutable=1", uri=True,
                               isolation_level=None, check_same_thread=False)

    def _wal_empty(self) -> bool:
        try:
            return Path(f"{self.path}-wal").stat().st_size == 0
        except FileNotFoundError:
            return True

    def _reap_dead_threads(self) -> None:
        alive = []
        for ref, conn in self._conns:
            thread = ref()
            if thread is None or not thread.is_alive():
                conn.close()
            else:
                alive.append((ref, conn))
        self._conns = alive


def _no_room(exc: sqlite3.OperationalError) -> bool:
    """SQLite could not make room for the WAL index (or anything): a full disk."""
    return exc.sqlite_errorcode == sqlite3.SQLITE_IOERR_SHMSIZE or \
        exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_FULL
