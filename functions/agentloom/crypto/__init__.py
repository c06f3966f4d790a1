"""Envelope encryption for every store: keyrings, the envelope codec, its key cache.

::

    from agentloom.crypto import EnvelopeCodec, LocalKeyring, fixed_scope
    from agentloom.stores import SqliteCheckpointStore

    codec = EnvelopeCodec(LocalKeyring(home / "agentloom.key"),
                          scope=fixed_scope(space="local"))
    store = SqliteCheckpointStore(home / "agentloom.db", codec=codec)

    # AWS (KmsKeyring needs boto3: import it from its module)
    from agentloom.crypto.kms_keyring import KmsKeyring
    codec = EnvelopeCodec(KmsKeyring(key_arn, client=boto3.client("kms")),
                          scope=lambda run_id: {"space": ..., "session": ...})
    store = DynamoDbCheckpointStore(table, client=dynamodb, codec=codec)

Ports in ``contracts`` (``Keyring``, ``KeyScope``, ``ScopeResolver``); the codec's hook in
the store is ``agentloom_runtime.checkpoint.store.RecordCodec``. ``KmsKeyring`` is loaded
on first use (``agentloom.crypto.KmsKeyring``) so importing this package needs no boto3.
See docs/encryption.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .codec import CacheLimits, EnvelopeCodec
from .contracts import Keyring, KeyScope, ScopeResolver, fixed_scope
from .local_keyring import LocalKeyring

if TYPE_CHECKING:
    from .kms_keyring import KmsKeyring

__all__ = ["CacheLimits", "EnvelopeCodec", "KeyScope", "Keyring", "KmsKeyring",
           "LocalKeyring", "ScopeResolver", "fixed_scope"]


def __getattr__(name: str) -> Any:
    if name == "KmsKeyring":
        from .kms_keyring import KmsKeyring

        return KmsKeyring
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
