"""``CodecSecrets``: the platform's ``SecretSealer`` (``admin.py``), provider keys and
other per-resource secrets sealed by the one envelope codec every store uses
(``agentloom.crypto.EnvelopeCodec``) over any ``Keyring``: ``LocalKeyring`` embedded,
``KmsKeyring`` in AWS — the same code either way.

The document of a connection's key is ``model:{space}:{connection}``; its key scope
(the KMS encryption context) is ``{"space", "connection"}`` and the AAD binds the value
to that document (``["blob", "model:…", "api_key", 0]``), so a sealed key moved to
another connection or space fails to open. Each document has its own data key, its key
record (the wrapped data key: no secret) kept in the platform store under
``secret#{document}`` / ``key#{name}``; the codec's bounded cache keeps opening the same
key from costing a KMS call each time.

AWS wiring: ``CodecSecrets(KmsKeyring(key_id, client=kms), platform_store)``, or
``CodecSecrets.kms(key_id, client=kms, store=platform_store)``.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from pydantic import BaseModel

from agentloom.crypto import EnvelopeCodec, Keyring
from agentloom.platform.store import PlatformStore, WriteConflict
from agentloom.platform.store.items import ABSENT, put
from agentloom_runtime.checkpoint.store import ItemId
from agentloom_runtime.errors import PersistenceError

if TYPE_CHECKING:  # the boto3 stubs (the dev extra)
    from mypy_boto3_kms import KMSClient


class _KeyRecord(BaseModel):
    record: str  # base64 of the codec's key record (a wrapped data key; no secret)


class _StoreKeySlots:
    """The codec's ``KeySlots`` on the platform store: item ``secret#{document}`` /
    ``key#{name}`` holds a key record."""

    def __init__(self, store: PlatformStore) -> None:
        self.store = store

    def get(self, run_id: str, name: str) -> bytes | None:
        found = self.store.items.get(f"secret#{run_id}", f"key#{name}", _KeyRecord)
        return None if found is None else base64.b64decode(found.value.record)

    def put(self, run_id: str, name: str, data: bytes) -> None:
        record = _KeyRecord(record=base64.b64encode(data).decode("ascii"))
        try:
            self.store.items.transact([put(f"secret#{run_id}", f"key#{name}", record, ABSENT)])
        except WriteConflict:  # present already: a no-op, as KeySlots.put promises
            pass


class CodecSecrets:
    """``SecretSealer`` through the envelope codec over ``keyring``."""

    def __init__(self, keyring: Keyring, store: PlatformStore) -> None:
        self.keyring = keyring
        self._codec = EnvelopeCodec(keyring, scope=self._scope)
        self._slots = _StoreKeySlots(store)

    @classmethod
    def kms(cls, key_id: str, *, client: KMSClient, store: PlatformStore) -> CodecSecrets:
        """Sealed with the KMS key ``key_id`` (a boto3 ``kms`` client injected)."""
        from agentloom.crypto.kms_keyring import KmsKeyring

        return cls(KmsKeyring(key_id, client=client), store)

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
