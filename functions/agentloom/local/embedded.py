"""The embedded platform: what ``agentloom serve`` runs on one machine.

One state directory (``--home``) holds one SQLite file, ``agentloom.sqlite3`` (mode
0600), shared by the checkpoint store (runs, encrypted under the key file
``agentloom.key``: ``agentloom.local.app.open_checkpoint_store``) and the platform store
(spaces, agents, sessions, tokens, the session record streams, run events), and the run
workspaces (``workspaces/``). Each run commit writes its session records in the same
SQLite transaction (``SessionCommits``, attached to the checkpoint store): the stores are
wired by ``agentloom.local.home.open_home``, as for the CLI. Engines come
from the run host (``local_host``: ``agentloom.platform.host`` with this machine's
ports); runs are driven by ``LocalRunLauncher`` in a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentloom.capabilities import Capabilities
from agentloom.crypto import LocalKeyring
from agentloom.local.home import KEY_FILE, open_home
from agentloom.local.runs import LocalRunLauncher
from agentloom.local.teardown import LocalSessionResources
from agentloom.local.workspaces import LocalWorkspaces
from agentloom.models import ModelDiscovery
from agentloom.models.gateway import ConnectionModels, default_model_factory
from agentloom.platform.admin import AdminService
from agentloom.platform.agents import DraftRules
from agentloom.platform.host import HookLoader, HostPorts, RunHost, hook_registry
from agentloom.platform.identity import BearerTokens
from agentloom.platform.launcher import ModelFactory
from agentloom.platform.redaction import Redactor
from agentloom.platform.secrets import CodecSecrets
from agentloom.platform.sessions import SessionService
from agentloom.platform.store import PlatformStore
from agentloom.platform.tracker import RunTracker
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.events import Emit


def local_host(home: Path, tracker: RunTracker, models: ModelFactory,
               capabilities: Capabilities, *,
               events: Callable[[str], Emit] | None = None,
               hooks: HookLoader = hook_registry) -> RunHost:
    """The run host on this machine: the home's workspaces (bubblewrap for commands), one
    observer per run, events into the platform's event log unless ``events`` says
    otherwise (the CLI's transcript)."""

    return RunHost(HostPorts(
        tracker=tracker, models=models, capabilities=capabilities,
        workspaces=LocalWorkspaces.factory(home / "workspaces"), events=events,
        hooks=hooks))


__all__ = ["CodecSecrets", "EmbeddedPlatform", "default_model_factory", "local_host"]


@dataclass
class EmbeddedPlatform:
    home: Path
    store: PlatformStore
    checkpoints: SqliteCheckpointStore
    tracker: RunTracker
    host: RunHost
    launcher: LocalRunLauncher
    admin: AdminService
    sessions: SessionService
    tokens: BearerTokens

    @classmethod
    def open(cls, home: Path, *, model_factory: ModelFactory | None = None,
             rules: DraftRules | None = None,
             allow_loopback_discovery: bool = False,
             capabilities: Capabilities | None = None) -> EmbeddedPlatform:
        """``allow_loopback_discovery``: model discovery may connect to 127.0.0.1 / ::1
        (tests with a local fake provider only; never set by ``agentloom serve``).
        ``capabilities``: the bound-resource kinds (Skills, MCP, knowledge) publish pins
        and runs use (``agentloom.capabilities``)."""
        capabilities = capabilities or Capabilities()
        opened = open_home(home, Redactor.from_environment())  # the CLI's wiring too
        store, checkpoints, tracker = opened.platform, opened.checkpoints, opened.tracker
        admin = AdminService(store, rules,
                             secrets=CodecSecrets(LocalKeyring(home / KEY_FILE), store),
                             discovery=ModelDiscovery(allow_loopback=allow_loopback_discovery),
                             capabilities=capabilities)
        # a version on a platform connection calls its provider with the stored key
        models = ConnectionModels(admin, model_factory or default_model_factory,
                                  redact=tracker.redactor.add)
        host = local_host(home, tracker, models, capabilities)
        launcher = LocalRunLauncher(host)
        sessions = SessionService(store, tracker, launcher, host,
                                  resources=LocalSessionResources(home / "workspaces"))
        return cls(home=home, store=store, checkpoints=checkpoints, tracker=tracker,
                   host=host, launcher=launcher, sessions=sessions, admin=admin,
                   tokens=BearerTokens(store))

    def close(self) -> None:
        self.launcher.close()
        self.store.close()
        self.checkpoints.close()
