"""How hosts build the knowledge capability.

``ConnectionEmbedders`` resolves a base's embedder from its space's model connection
(base URL, its ``embedding`` settings — batch size and deadline; a connection saved
before they existed gets the defaults — and the key the platform's ``SecretSealer``
opens: used for the request, never kept elsewhere) through ``OpenAIEmbeddings`` with
the SSRF policy the host gives (``allow_loopback`` only for tests and a single-machine
server talking to a local embeddings server). ``embedded_knowledge(home)`` is the
embedded default: records in the platform's SQLite file, vectors in ``SqliteIndex``
(same file), passages sealed under the home's key file. In AWS the host builds
``KnowledgeService`` the same way with the DynamoDB platform store, ``S3VectorsIndex``
and a KMS keyring.
"""

from __future__ import annotations

from pathlib import Path

from agentloom.crypto import Keyring, LocalKeyring
from agentloom.models import EmbeddingSettings
from agentloom.models._addresses import AddressPolicy
from agentloom.platform.admin import SecretSealer
from agentloom.platform.domain import ModelConnectionRecord
from agentloom.platform.errors import Invalid
from agentloom.platform.secrets import CodecSecrets
from agentloom.platform.secrets import _StoreKeySlots as StoreKeySlots
from agentloom.platform.store import PlatformStore
from agentloom.platform.store.sqlite import embedded_items
from agentloom.stores import layout
from agentloom.stores.layout import KEY_FILE

from .capability import KnowledgeCapability
from .embeddings import ConnectionEmbedder, Embedder, Endpoint, OpenAIEmbeddings
from .errors import EmbeddingFailed
from .index import VectorIndex
from .service import KnowledgeService
from .store import ContentSealer, KnowledgeBase, KnowledgeStore


class ConnectionEmbedders:
    def __init__(self, store: PlatformStore, secrets: SecretSealer, *,
                 policy: AddressPolicy | None = None) -> None:
        self._store, self._secrets = store, secrets
        self._policy = policy or AddressPolicy()

    def _record(self, space_id: str, connection_id: str) -> ModelConnectionRecord | None:
        found = self._store.items.get(f"space#{space_id}", f"model#{connection_id}",
                                      ModelConnectionRecord)
        return None if found is None else found.value

    def check(self, space_id: str, connection_id: str) -> None:
        if self._record(space_id, connection_id) is None:
            message = f"no model connection {connection_id[:80]!r} in this space"
            raise Invalid(f"connection_id: {message}", code="model_connection_not_found",
                          details={"fields": [{"field": "connection_id",
                                               "message": message}]})

    def for_base(self, base: KnowledgeBase) -> Embedder:
        record = self._record(base.space_id, base.connection_id)
        if record is None:
            raise EmbeddingFailed(f"knowledge base {base.base_id}'s model connection "
                                  f"{base.connection_id} was deleted", reason="no_connection")
        key = "" if record.sealed_key is None else self._secrets.open(
            base.space_id, base.connection_id, record.sealed_key)
        settings = EmbeddingSettings.model_validate(record.spec.get("embedding") or {})
        client = OpenAIEmbeddings(Endpoint(str(record.spec["base_url"]), key),
                                  policy=self._policy, timeout=settings.timeout_seconds,
                                  max_batch=settings.max_batch)
        return ConnectionEmbedder(client, connection_id=base.connection_id,
                                  document_model=base.document_model,
                                  query_model=base.query_model)


def knowledge_service(store: PlatformStore, keyring: Keyring, index: VectorIndex, *,
                      policy: AddressPolicy | None = None) -> KnowledgeService:
    return KnowledgeService(
        KnowledgeStore(store), ContentSealer(keyring, StoreKeySlots(store)), index,
        ConnectionEmbedders(store, CodecSecrets(keyring, store), policy=policy))


def embedded_knowledge(home: Path, *, allow_loopback: bool = False) -> KnowledgeCapability:
    """The embedded default under ``home`` (``agentloom serve``): pass it in
    ``EmbeddedPlatform.open(capabilities=Capabilities.of([..., embedded_knowledge(home)]))``."""
    from .sqlite_index import SqliteIndex  # numpy: embedded only (not in the Lambda bundle)

    items = embedded_items(home)  # owner-only before SQLite opens it, bodies sealed
    keyring = LocalKeyring(home / KEY_FILE)
    store = PlatformStore(items)
    return KnowledgeCapability(knowledge_service(
        store, keyring, SqliteIndex(home / layout.DATABASE),
        policy=AddressPolicy(allow_loopback=allow_loopback)))
