"""The embedded application: SQLite checkpoints, a local workspace root, the local
sandbox, and the local driver — one machine, no cloud."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.contracts import StepResult
from agentloom_runtime.engine import Engine, create_engine
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.snapshot import AgentSnapshot

from .driver import drive
from .sessions import LocalSessions
from .workspaces import LocalWorkspaces

Emit = Callable[[str, Mapping[str, Any]], None]


class LocalApp:
    def __init__(self, home: Path, *, emit: Emit | None = None) -> None:
        self.home = home
        self.emit = emit
        self._store: SqliteCheckpointStore | None = None

    @property
    def store(self) -> SqliteCheckpointStore:
        if self._store is None:
            # Others may traverse (a sandbox running as nobody must reach its workspace)
            # but not list; the database holding conversations is owner-only (SQLite
            # gives its -wal/-shm files the database file's mode).
            self.home.mkdir(mode=0o711, parents=True, exist_ok=True)
            path = self.home / "agentloom.sqlite3"
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            self._store = SqliteCheckpointStore(path)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def meta(self, run_id: str) -> dict[str, Any]:
        entries = self.store.read(run_id, "meta", 0, 1)
        if not entries:
            raise ConfigError(f"run {run_id} does not exist in {self.home}")
        return entries[0].body

    def engine(self, snapshot: AgentSnapshot, gateway: Any, *, session: str,
               run_id: str | None = None) -> tuple[Engine, LocalWorkspaces]:
        workspaces = LocalWorkspaces(self.home / "workspaces", snapshot, session)
        engine = create_engine(snapshot, workspace=workspaces.for_instance, emit=self.emit,
                               save=self.store, checkpoint=run_id, model_gateway=gateway,
                               tools=workspaces.tools(),
                               workspace_provider=workspaces.provider,
                               commands=workspaces.commands, services=workspaces.services())
        workspaces.bind(engine)
        return engine, workspaces

    async def run(self, snapshot: AgentSnapshot, gateway: Any, question: str, *,
                  session: str = "cli", pause: float = 0.0) -> StepResult:
        sessions = LocalSessions(self.store)
        sessions.check_idle(session)
        history = sessions.history(session)
        engine, workspaces = self.engine(snapshot, gateway, session=session)
        try:
            run_id = uuid.uuid4().hex
            sessions.add_run(session, run_id)  # first, so a crash cannot orphan the run
            await engine.start(question, run_id=run_id, labels={"session": session},
                               history=history.messages, counters=history.counters,
                               history_watermark=history.history_watermark)
            result = await drive(engine, runner=workspaces.runner(), pause=pause)
            self._save_view(sessions, session, engine, history)
            return result
        finally:
            await engine.close()

    @staticmethod
    def _save_view(sessions: LocalSessions, session: str, engine: Engine,
                   history: Any) -> None:
        """A compacted main view becomes reusable by the session's next questions."""
        main = engine.head["frames"]["main"]
        if engine.head["status"] != "completed" or not main["view"]["snapshot"]:
            return
        view = [m for m in engine.context.view(engine.j, main) if m.get("role") != "system"]
        sessions.save_view(session, engine.run_id, history, view, dict(main["counters"]))

    async def resume(self, run_id: str, snapshot: AgentSnapshot, gateway: Any, *,
                     retry_unknown_models: bool = False, pause: float = 0.0) -> StepResult:
        session = self.store.load_head(run_id)
        labels = session.body.get("labels", {}) if session else {}
        engine, workspaces = self.engine(snapshot, gateway, run_id=run_id,
                                         session=labels.get("session", "cli"))
        try:
            await engine.begin_execution(retry_unknown_models=retry_unknown_models)
            return await drive(engine, runner=workspaces.runner(), pause=pause)
        finally:
            await engine.close()

    def show(self, run_id: str, out: TextIO) -> None:
        head = self.store.load_head(run_id)
        if head is None:
            raise ConfigError(f"run {run_id} does not exist in {self.home}")
        for instance in head.body["frames"]:
            for entry in self.store.read(run_id, f"src:{instance}"):
                message = entry.body["message"]
                text = message.get("content") or ""
                if message.get("tool_calls"):
                    text += " → " + ", ".join(
                        f"{c['function']['name']}({c['function']['arguments']})"
                        for c in message["tool_calls"])
                print(f"[{instance} #{entry.seq} {entry.body['kind']}] {text}", file=out)
        body = head.body
        print(f"status: {body['status']}" + (f" ({body['error']['code']}: "
                                              f"{body['error']['message']})"
                                              if body.get("error") else ""), file=out)
