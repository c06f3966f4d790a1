"""Store adapters: one backend per module, each implementing a port's primitives.

Checkpoints (port: ``agentloom_runtime.checkpoint.BaseCheckpointStore``):

- ``SqliteCheckpointStore`` (embedded default, one file, WAL) — exported here;
- ``agentloom.stores.dynamodb_checkpoints.DynamoDbCheckpointStore`` (AWS) — import it
  from its module: it needs boto3 (``pip install 'agentloom[aws]'``), and importing this
  package must not.

Every adapter takes ``codec=`` (``agentloom.crypto.EnvelopeCodec``) to encrypt what it
stores; the encryption lives in the base class, not here (docs/encryption.md).

Importing this package imports no adapter: ``SqliteCheckpointStore`` is loaded on first
use, so that importing ``agentloom.stores.dynamodb_checkpoints`` (in a Lambda function)
does not load the SQLite adapter, nor ``sqlite3``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .sqlite_checkpoints import SqliteCheckpointStore

__all__ = ["SqliteCheckpointStore"]


def __getattr__(name: str) -> Any:
    if name == "SqliteCheckpointStore":
        from .sqlite_checkpoints import SqliteCheckpointStore

        return SqliteCheckpointStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
