"""``SqliteSkillItems``: the embedded backend of ``SkillItems`` — one table,
``skill_items``, in the platform's SQLite file (WAL; its own per-thread connections
through ``stores.sqlite_connections``). Values are the codec's envelopes (BLOB)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from agentloom.stores.sqlite_connections import ThreadConnections
from agentloom_runtime.errors import ConfigError, PersistenceError

T = TypeVar("T")
_SCHEMA = """CREATE TABLE IF NOT EXISTS skill_items (
    pk TEXT NOT NULL, sk TEXT NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (pk, sk)) WITHOUT ROWID"""


class SqliteSkillItems:
    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        text = os.fspath(path)
        if not text or text == ":memory:" or text.startswith("file:"):
            raise ConfigError("SqliteSkillItems needs a file path; use MemorySkillItems "
                              "for a store in memory")
        self.path = Path(text)
        self._pool = ThreadConnections(self.path, busy_ms=int(busy_timeout * 1000),
                                       synchronous="FULL", what="skill store")
        self._run(lambda c: c.execute(_SCHEMA))

    def _run(self, action: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return action(self._pool.get())
        except sqlite3.Error as exc:
            raise PersistenceError(f"skill store {self.path}: {exc}") from exc

    def get(self, pk: str, sk: str) -> bytes | None:
        row = self._run(lambda c: c.execute(
            "SELECT value FROM skill_items WHERE pk = ? AND sk = ?", (pk, sk)).fetchone())
        return None if row is None else bytes(row[0])

    def put(self, pk: str, sk: str, value: bytes, *, if_absent: bool = False) -> bool:
        verb = "INSERT OR IGNORE" if if_absent else "INSERT OR REPLACE"
        cursor = self._run(lambda c: c.execute(
            f"{verb} INTO skill_items (pk, sk, value) VALUES (?, ?, ?)", (pk, sk, value)))
        return bool(cursor.rowcount)

    def delete(self, pk: str, sk: str) -> None:
        self._run(lambda c: c.execute("DELETE FROM skill_items WHERE pk = ? AND sk = ?",
                                      (pk, sk)))

    def query(self, pk: str, prefix: str) -> list[tuple[str, bytes]]:
        upper = prefix + "\U0010ffff"
        rows = self._run(lambda c: c.execute(
            "SELECT sk, value FROM skill_items WHERE pk = ? AND sk >= ? AND sk < ? "
            "ORDER BY sk", (pk, prefix, upper)).fetchall())
        return [(str(sk), bytes(v)) for sk, v in rows if str(sk).startswith(prefix)]

    def close(self) -> None:
        self._pool.close()
