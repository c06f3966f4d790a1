"""Embedded sessions: the runs of a session, in order, and the history a new run inherits.

A session's index is itself a checkpoint-store document (``session:<id>``): its head is
updated with compare-and-set like a run's, and its ``runs`` stream lists the runs in the
order they were asked. A new question is refused while the session's last run is still
``running`` (a killed run must be resumed first). The history of a new run is the
projection of the earlier runs' main-instance records (``build_run_history``): call ids
rewritten, unknown placeholders for calls without results, child internals excluded.

Embedded simplification: session order is run by run; the platform store orders records
by commit across runs (seed 000 §4), which only matters when an old run is resumed after
newer runs were asked.
"""

from __future__ import annotations

from typing import Any

from agentloom_runtime.checkpoint.store import BaseCheckpointStore, Commit, LogEntry
from agentloom_runtime.context.history import (
    RunHistory,
    SessionView,
    build_run_history,
    can_save_view,
    make_view,
)
from agentloom_runtime.errors import CheckpointConflict, ConfigError

HISTORY_KINDS_SKIPPED = ("system", "history")


class LocalSessions:
    def __init__(self, store: BaseCheckpointStore) -> None:
        self.store = store

    @staticmethod
    def _key(session: str) -> str:
        return f"session:{session}"

    def runs(self, session: str) -> list[str]:
        return [e.body["run_id"] for e in self.store.read(self._key(session), "runs")]

    def check_idle(self, session: str) -> None:
        runs = self.runs(session)
        if not runs:
            return
        head = self.store.load_head(runs[-1])
        if head is not None and head.body["status"] == "running":
            raise ConfigError(f"session {session!r} has an active run {runs[-1]}; resume "
                              "it (agentloom resume) before asking a new question")

    def add_run(self, session: str, run_id: str) -> None:
        self._append(session, "runs", {"run_id": run_id})

    def _append(self, session: str, stream: str, body: dict[str, Any]) -> None:
        key = self._key(session)
        for _ in range(20):  # CAS retry: another process may write at the same time
            head = self.store.load_head(key)
            version, counts = (head.version, dict(head.body)) if head else (0, {})
            counts[stream] = int(counts.get(stream, 0)) + 1
            try:
                self.store.commit(Commit(key, version, counts,
                                         [LogEntry(stream, counts[stream], body)]))
                return
            except CheckpointConflict:
                continue
        raise ConfigError(f"could not write to session {session!r}")

    def records(self, session: str) -> list[dict[str, Any]]:
        """Main-instance source records of the session's runs, with session seqs."""
        out: list[dict[str, Any]] = []
        for run_id in self.runs(session):
            for entry in self.store.read(run_id, "src:main"):
                kind = entry.body["kind"]
                if kind in HISTORY_KINDS_SKIPPED:
                    continue
                out.append({"seq": len(out) + 1, "run_id": run_id, "instance": "main",
                            "kind": kind, "message": entry.body["message"]})
        return out

    def views(self, session: str) -> list[SessionView]:
        return [SessionView.model_validate(e.body)
                for e in self.store.read(self._key(session), "views")]

    def history(self, session: str) -> RunHistory:
        return build_run_history(self.records(session), self.views(session))

    def save_view(self, session: str, run_id: str, history: RunHistory,
                  messages: list[dict[str, Any]], counters: dict[str, int]) -> bool:
        """After a run whose main view was compacted: save it as a reusable view if it
        covers an observed, contiguous prefix of the session (seed 000 §4)."""
        check = can_save_view(self.records(session), run_id=run_id,
                              inherited_seqs=history.inherited_seqs, pending_tools=False,
                              queued_inputs=False)
        if not check.allowed:
            return False
        view = make_view(check, run_id=run_id, messages=messages, counters=counters,
                         revision=len(self.views(session)) + 1)
        self._append(session, "views", view.model_dump(mode="json"))
        return True
