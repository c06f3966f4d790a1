"""The embedded platform: what ``agentloom serve`` runs on one machine.

One state directory (``--home``) holds one SQLite file, ``agentloom.sqlite3`` (mode
0600), shared by the checkpoint store (runs, encrypted under the key file
``agentloom.key``: ``agentloom.local.app.open_checkpoint_store``) and the platform store
(spaces, agents, sessions, tokens, the session record streams, run events), and the run
workspaces (``workspaces/``). Runs are driven by ``LocalRunLauncher`` in a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agentloom.local.app import DATABASE, open_checkpoint_store
from agentloom.local.redaction import Redactor
from agentloom.platform.admin import AdminService
from agentloom.platform.agents import DraftRules
from agentloom.platform.identity import BearerTokens
from agentloom.platform.launcher import ModelFactory
from agentloom.platform.local_launcher import LocalEngines, LocalRunLauncher
from agentloom.platform.sessions import SessionService
from agentloom.platform.store import SqlitePlatformStore
from agentloom.platform.tracker import RunTracker
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.contracts import ModelGateway
from agentloom_runtime.snapshot import AgentSnapshot


def default_model_factory(snapshot: AgentSnapshot) -> ModelGateway:
    """The provider the snapshot names, its key read from the environment variable of
    ``api_key_ref`` (one the server allows: ``DraftRules.key_refs``)."""
    from agentloom.local.models import gateway_for

    return gateway_for(snapshot)


@dataclass
class EmbeddedPlatform:
    home: Path
    store: SqlitePlatformStore
    checkpoints: SqliteCheckpointStore
    tracker: RunTracker
    launcher: LocalRunLauncher
    admin: AdminService
    sessions: SessionService
    tokens: BearerTokens

    @classmethod
    def open(cls, home: Path, *, model_factory: ModelFactory | None = None,
             rules: DraftRules | None = None) -> EmbeddedPlatform:
        checkpoints = open_checkpoint_store(home)
        store = SqlitePlatformStore(home / DATABASE)
        tracker = RunTracker(store, checkpoints, redactor=Redactor.from_environment())
        engines = LocalEngines(home, checkpoints, tracker,
                               model_factory or default_model_factory)
        launcher = LocalRunLauncher(engines)
        sessions = SessionService(store, tracker, launcher, engines)
        return cls(home=home, store=store, checkpoints=checkpoints, tracker=tracker,
                   launcher=launcher, admin=AdminService(store, rules), sessions=sessions,
                   tokens=BearerTokens(store))

    def close(self) -> None:
        self.launcher.close()
        self.store.close()
        self.checkpoints.close()
