"""The embedded default index: vectors as float32 blobs in SQLite, searched by an exact
cosine scan with numpy.

Table ``knowledge_vectors`` (base, key, document, dimension, vector) in the platform's
SQLite file (WAL). A query reads the bases' vectors into one matrix and takes the dot
products with the (unit) query vector — exact, so recall is the embedding model's own.
A matrix per base is cached with the base's change counter (``knowledge_bases_rev``),
so repeated queries skip the read until the base changes. Measured on this machine
(``tests/benchmarks/bench_knowledge.py``, 384 dimensions): see docs/knowledge.md —
exact search stays in single-digit milliseconds up to ~100,000 chunks per query.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .index import Hit, IndexedVector, check_dimension, rank

_SCHEMA = """
CREATE TABLE IF NOT EXISTS knowledge_vectors (
    base_id TEXT NOT NULL, key TEXT NOT NULL, document_id TEXT NOT NULL,
    dimension INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (base_id, key));
CREATE INDEX IF NOT EXISTS knowledge_vectors_doc ON knowledge_vectors (base_id, document_id);
CREATE TABLE IF NOT EXISTS knowledge_bases_rev (
    base_id TEXT PRIMARY KEY, rev INTEGER NOT NULL);
"""
Matrix = tuple[int, list[str], list[str], npt.NDArray[np.float32]]


class SqliteIndex:
    def __init__(self, path: Path | str) -> None:
        self._path = str(path)
        self._local = threading.local()
        self._cache: dict[str, Matrix] = {}
        self._lock = threading.Lock()
        with self._db() as db:
            db.executescript(_SCHEMA)

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self._path, timeout=30, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA busy_timeout=30000")
            self._local.db = db
        return db

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    def _bump(self, db: sqlite3.Connection, base_id: str) -> None:
        db.execute("INSERT INTO knowledge_bases_rev VALUES (?, 1) ON CONFLICT (base_id) "
                   "DO UPDATE SET rev = rev + 1", (base_id,))

    def upsert(self, base_id: str, vectors: Sequence[IndexedVector]) -> None:
        if not vectors:
            return
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT dimension FROM knowledge_vectors WHERE base_id = ? "
                             "LIMIT 1", (base_id,)).fetchone()
            dim = check_dimension(base_id, row[0] if row else None, vectors)
            db.executemany(
                "INSERT OR REPLACE INTO knowledge_vectors VALUES (?, ?, ?, ?, ?)",
                [(base_id, v.key, v.document_id, dim,
                  np.asarray(v.vector, dtype=np.float32).tobytes()) for v in vectors])
            self._bump(db, base_id)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def delete(self, base_id: str, keys: Sequence[str]) -> None:
        if not keys:
            return
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany("DELETE FROM knowledge_vectors WHERE base_id = ? AND key = ?",
                           [(base_id, k) for k in keys])
            self._bump(db, base_id)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def drop(self, base_id: str) -> None:
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        db.execute("DELETE FROM knowledge_vectors WHERE base_id = ?", (base_id,))
        self._bump(db, base_id)
        db.execute("COMMIT")

    def keys(self, base_id: str, document_id: str) -> set[str]:
        rows = self._db().execute("SELECT key FROM knowledge_vectors WHERE base_id = ? AND "
                                  "document_id = ?", (base_id, document_id))
        return {r[0] for r in rows}

    def _matrix(self, base_id: str) -> Matrix:
        db = self._db()
        db.execute("BEGIN")  # one snapshot: the counter and the rows agree
        try:
            row = db.execute("SELECT rev FROM knowledge_bases_rev WHERE base_id = ?",
                             (base_id,)).fetchone()
            rev = row[0] if row else 0
            with self._lock:
                cached = self._cache.get(base_id)
            if cached is not None and cached[0] == rev:
                return cached
            rows = db.execute("SELECT key, document_id, vector FROM knowledge_vectors "
                              "WHERE base_id = ? ORDER BY key", (base_id,)).fetchall()
        finally:
            db.execute("COMMIT")
        keys = [r[0] for r in rows]
        docs = [r[1] for r in rows]
        matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32)
        matrix = matrix.reshape(len(rows), -1) if rows else matrix.reshape(0, 0)
        found: Matrix = (rev, keys, docs, matrix)
        with self._lock:
            self._cache[base_id] = found
        return found

    def query(self, base_ids: Sequence[str], vector: Sequence[float],
              top_k: int) -> list[Hit]:
        q = np.asarray(vector, dtype=np.float32)
        hits: list[Hit] = []
        for base_id in dict.fromkeys(base_ids):
            _, keys, docs, matrix = self._matrix(base_id)
            if not keys or matrix.shape[1] != q.shape[0]:
                continue
            # einsum, not BLAS matmul: no thread pool to contend for on a busy host
            scores = np.einsum("ij,j->i", matrix, q)
            take = min(top_k + 16, len(keys))  # a margin so ties rank by key
            best = np.argpartition(-scores, take - 1)[:take]
            hits.extend(Hit(base_id, keys[i], docs[i], float(scores[i])) for i in best)
        return rank(hits, top_k)
