"""The platform store port (``PlatformStore``) and its adapters, one per module:

- ``InMemoryPlatformStore`` (``memory``): the reference, for tests and one process;
- ``SqlitePlatformStore`` (``sqlite``): the embedded default, one SQLite file (WAL);
- ``DynamoDbPlatformStore`` (``dynamodb``): AWS, one table keyed by ``pk``/``sk``
  (imported on first use: it needs boto3, the ``aws`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import (
    ABSENT,
    ANY,
    PlatformStore,
    Versioned,
    Write,
    WriteConflict,
    retry_conflicts,
    secret_hash,
)
from .memory import InMemoryPlatformStore
from .sqlite import SqlitePlatformStore

if TYPE_CHECKING:
    from .dynamodb import DynamoDbPlatformStore


def __getattr__(name: str) -> object:
    if name == "DynamoDbPlatformStore":
        from .dynamodb import DynamoDbPlatformStore

        return DynamoDbPlatformStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ABSENT", "ANY", "DynamoDbPlatformStore", "InMemoryPlatformStore", "PlatformStore",
           "SqlitePlatformStore", "Versioned", "Write", "WriteConflict", "retry_conflicts",
           "secret_hash"]
