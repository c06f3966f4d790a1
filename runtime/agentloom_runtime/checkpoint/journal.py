"""A unit of work over one run's checkpoint: head mutations + appended log entries,
committed together with compare-and-set on the head version. Values of any size are
fine: the store spills what is larger than an item to blobs."""

from __future__ import annotations

from typing import Any

from agentloom_runtime.checkpoint.store import BaseCheckpointStore, Commit, LogEntry
from agentloom_runtime.errors import AgentLoomError, CheckpointConflict, PersistenceError


class Journal:
    """Holds the loaded head. After a failed commit the journal is stale: the caller must
    reload, because in-memory state may be ahead of what is stored."""

    def __init__(self, store: BaseCheckpointStore, run_id: str, version: int,
                 head: Any) -> None:
        self.store = store
        self.run_id = run_id
        self.version = version
        self.head: dict[str, Any] = head
        self._entries: list[LogEntry] = []
        self.stale = False

    def append(self, stream: str, body: dict[str, Any]) -> int:
        seqs = self.head.setdefault("streams", {})
        seq = int(seqs.get(stream, 0)) + 1
        seqs[stream] = seq
        self._entries.append(LogEntry(stream, seq, body))
        return seq

    def last_seq(self, stream: str) -> int:
        return int(self.head.get("streams", {}).get(stream, 0))

    def read(self, stream: str, after: int = 0, limit: int | None = None) -> list[LogEntry]:
        stored = self.store.read(self.run_id, stream, after, limit)
        pending = [e for e in self._entries if e.stream == stream and e.seq > after]
        return stored + pending

    def commit(self, point: str) -> int:
        """Write the head and the appended entries atomically (CAS on the version).
        ``point`` names the commit point (see docs/concepts.md, "What is saved when");
        an error raised here names it too (``details["commit_point"]`` and the message),
        so a failed or conflicting save says which commit it was."""
        where = {"run_id": self.run_id, "commit_point": point}
        if self.stale:
            raise CheckpointConflict(f"this engine's state is stale; load the run again "
                                     f"(commit point {point})", details=where)
        try:
            new = self.store.commit(Commit(self.run_id, self.version, self.head,
                                           tuple(self._entries)))
        except PersistenceError as err:  # the store's own (a conflict, a failed write)
            self.stale = True
            _name_point(err, point)
            raise
        except AgentLoomError as err:
            self.stale = True
            raise PersistenceError(f"saving run {self.run_id} at commit point {point} "
                                   f"failed: {err.message}", details=where) from err
        except Exception as err:
            self.stale = True
            raise PersistenceError(f"saving run {self.run_id} at commit point {point} "
                                   f"failed: {type(err).__name__}", details=where) from err
        self.version = new
        self._entries = []
        return new


def _name_point(err: PersistenceError, point: str) -> None:
    """Keep the store's error as it is (type, code, details, cause) and add the commit
    point it was raised at."""
    if "commit_point" not in err.details:
        err.details["commit_point"] = point
        err.message = f"{err.message} (commit point {point})"
        err.args = (err.message,)
