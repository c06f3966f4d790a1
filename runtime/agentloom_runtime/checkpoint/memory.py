"""In-memory reference store: the behaviour every adapter must match.

Companion writes (``CommitCompanion``): ``join`` receives ``None`` — the host's writes
apply themselves (atomically, in their own in-memory store) while this store holds its
lock, after its own conditions were checked and before its state changes; a
``CompanionConflict`` leaves both unchanged.

Counters, for benchmarks (UTF-8 bytes of what committed; a conflict adds nothing):
``bytes_written`` — head and row texts as stored (a spilled body counts as its
reference); ``blob_bytes_written`` — blobs newly stored, spilled bodies included.
"""

from __future__ import annotations

import threading

from agentloom_runtime.errors import CheckpointConflict

from .store import BaseCheckpointStore, CommitCompanion, CompanionWrites


class InMemoryCheckpointStore(BaseCheckpointStore):
    head_bases = False  # nothing is persisted: a delta would only cost CPU

    def __init__(self, *, companion: CommitCompanion | None = None) -> None:
        super().__init__(companion=companion)
        self._lock = threading.Lock()
        self._heads: dict[str, tuple[int, str]] = {}
        self._rows: dict[tuple[str, str], dict[int, str]] = {}
        self._blobs: dict[tuple[str, str], bytes] = {}
        self.bytes_written = 0
        self.blob_bytes_written = 0

    def _get_head(self, run_id: str) -> tuple[int, str] | None:
        return self._heads.get(run_id)

    def _write(self, run_id: str, expected: int, new: int, head: str,
               rows: list[tuple[str, int, str]], joined: CompanionWrites | None = None) -> None:
        with self._lock:
            current = self._heads.get(run_id, (0, ""))[0]
            if current != expected:
                raise CheckpointConflict(
                    f"run {run_id}: head is at version {current}, step expected {expected}",
                    details={"run_id": run_id, "expected": expected, "actual": current})
            for stream, seq, _ in rows:
                if seq in self._rows.get((run_id, stream), {}):
                    raise CheckpointConflict(f"run {run_id}: {stream}#{seq} exists",
                                             details={"run_id": run_id})
            if joined is not None:
                joined.join(None)
            self._heads[run_id] = (new, head)
            for stream, seq, text in rows:
                self._rows.setdefault((run_id, stream), {})[seq] = text
            self.bytes_written += len(head.encode()) + sum(len(t.encode())
                                                           for _, _, t in rows)

    def _query(self, run_id: str, stream: str, after: int,
               limit: int | None) -> list[tuple[int, str]]:
        with self._lock:
            rows = self._rows.get((run_id, stream), {})
            seqs = sorted(s for s in rows if s > after)
            if limit is not None:
                seqs = seqs[:limit]
            return [(s, rows[s]) for s in seqs]

    def _put_blob(self, run_id: str, key: str, data: bytes) -> None:
        with self._lock:
            if (run_id, key) not in self._blobs:
                self._blobs[run_id, key] = bytes(data)
                self.blob_bytes_written += len(data)

    def _get_blob(self, run_id: str, key: str) -> bytes | None:
        return self._blobs.get((run_id, key))

    def delete_run(self, run_id: str) -> None:
        """Forget the run: head, log, blobs (a deleted session's; absent is done)."""
        with self._lock:
            self._heads.pop(run_id, None)
            for key in [k for k in self._rows if k[0] == run_id]:
                del self._rows[key]
            for key in [k for k in self._blobs if k[0] == run_id]:
                del self._blobs[key]
        self._remembered.forget(run_id)
