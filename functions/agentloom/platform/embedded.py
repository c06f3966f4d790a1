"""The embedded platform: what ``agentloom serve`` runs on one machine.

One state directory (``--home``) holds one SQLite file, ``agentloom.sqlite3`` (mode
0600), shared by the checkpoint store (runs, encrypted under the key file
``agentloom.key``: ``agentloom.local.app.open_checkpoint_store``) and the platform store
(spaces, agents, sessions, tokens, the session record streams, run events), and the run
workspaces (``workspaces/``). Runs are driven by ``LocalRunLauncher`` in a worker thread.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from agentloom.capabilities import Capabilities
from agentloom.crypto import EnvelopeCodec, LocalKeyring
from agentloom.local.app import DATABASE, KEY_FILE, open_checkpoint_store
from agentloom.local.redaction import Redactor
from agentloom.models import ModelDiscovery
from agentloom.platform.admin import AdminService
from agentloom.platform.agents import DraftRules
from agentloom.platform.identity import BearerTokens
from agentloom.platform.launcher import ModelFactory
from agentloom.platform.local_launcher import LocalEngines, LocalRunLauncher
from agentloom.platform.sessions import SessionService
from agentloom.platform.store import PlatformStore, SqlitePlatformStore, WriteConflict
from agentloom.platform.store.base import ABSENT, put
from agentloom.platform.tracker import RunTracker
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.checkpoint.store import ItemId
from agentloom_runtime.contracts import ModelGateway
from agentloom_runtime.errors import PersistenceError
from agentloom_runtime.snapshot import AgentSnapshot


def default_model_factory(snapshot: AgentSnapshot) -> ModelGateway:
    """The provider the snapshot names, its key read from the environment variable of
    ``api_key_ref`` (one the server allows: ``DraftRules.key_refs``)."""
    from agentloom.local.models import gateway_for

    return gateway_for(snapshot)


class _KeyRecord(BaseModel):
    record: str  # base64 of the codec's key record (a wrapped data key; no secret)


class _StoreKeySlots:
    """The codec's ``KeySlots`` on the platform store: item ``secret#{document}`` /
    ``key#{name}`` holds a key record."""

    def __init__(self, store: PlatformStore) -> None:
        self.store = store

    def get(self, run_id: str, name: str) -> bytes | None:
        found = self.store.get(f"secret#{run_id}", f"key#{name}", _KeyRecord)
        return None if found is None else base64.b64decode(found.value.record)

    def put(self, run_id: str, name: str, data: bytes) -> None:
        record = _KeyRecord(record=base64.b64encode(data).decode("ascii"))
        try:
            self.store.transact([put(f"secret#{run_id}", f"key#{name}", record, ABSENT)])
        except WriteConflict:  # present already: a no-op, as KeySlots.put promises
            pass


class CodecSecrets:
    """``SecretSealer`` through the envelope codec: the document of a connection's key is
    ``model:{space}:{connection}``, its key scope ``{"space", "connection"}`` and the AAD
    binds the value to that document (``["blob", "model:…", "api_key", 0]``), so a sealed
    key moved to another connection or space fails to open. The codec's key records live
    in the platform store (``_StoreKeySlots``)."""

    def __init__(self, keyring: LocalKeyring, store: PlatformStore) -> None:
        self._codec = EnvelopeCodec(keyring, scope=self._scope)
        self._slots = _StoreKeySlots(store)

    @staticmethod
    def _scope(document: str) -> dict[str, str]:
        _, space_id, connection_id = document.split(":", 2)
        return {"space": space_id, "connection": connection_id}

    @staticmethod
    def _item(space_id: str, connection_id: str) -> ItemId:
        return ItemId.blob(f"model:{space_id}:{connection_id}", "api_key")

    def seal(self, space_id: str, connection_id: str, secret: str) -> str:
        item = self._item(space_id, connection_id)
        sealed = self._codec.sealer(item.run_id, self._slots).seal(item, secret.encode())
        return base64.b64encode(sealed).decode("ascii")

    def open(self, space_id: str, connection_id: str, sealed: str) -> str:
        try:
            envelope = base64.b64decode(sealed, validate=True)
        except ValueError:
            raise PersistenceError(f"the key of model connection {connection_id} is not "
                                   "an encrypted envelope") from None
        item = self._item(space_id, connection_id)
        return self._codec.open(item, envelope, self._slots).decode()


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
             rules: DraftRules | None = None,
             allow_loopback_discovery: bool = False,
             capabilities: Capabilities | None = None) -> EmbeddedPlatform:
        """``allow_loopback_discovery``: model discovery may connect to 127.0.0.1 / ::1
        (tests with a local fake provider only; never set by ``agentloom serve``).
        ``capabilities``: the bound-resource kinds (Skills, MCP, knowledge) publish pins
        and runs use (``agentloom.capabilities``)."""
        capabilities = capabilities or Capabilities()
        checkpoints = open_checkpoint_store(home)
        store = SqlitePlatformStore(home / DATABASE)
        tracker = RunTracker(store, checkpoints, redactor=Redactor.from_environment())
        engines = LocalEngines(home, checkpoints, tracker,
                               model_factory or default_model_factory, capabilities)
        launcher = LocalRunLauncher(engines)
        sessions = SessionService(store, tracker, launcher, engines)
        return cls(home=home, store=store, checkpoints=checkpoints, tracker=tracker,
                   launcher=launcher, sessions=sessions,
                   admin=AdminService(
                       store, rules,
                       secrets=CodecSecrets(LocalKeyring(home / KEY_FILE), store),
                       discovery=ModelDiscovery(allow_loopback=allow_loopback_discovery),
                       capabilities=capabilities),
                   tokens=BearerTokens(store))

    def close(self) -> None:
        self.launcher.close()
        self.store.close()
        self.checkpoints.close()
