"""The platform store port (``PlatformStore``) and its adapters, one per module:

- ``InMemoryPlatformStore`` (``memory``): the reference, for tests and one process;
- ``SqlitePlatformStore`` (``sqlite``): the embedded default, one SQLite file (WAL).

A DynamoDB adapter implements the same three primitives (``_get``, ``_query``,
``_transact``) on one table keyed by ``pk``/``sk``; it is not written yet.
"""

from __future__ import annotations

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

__all__ = ["ABSENT", "ANY", "InMemoryPlatformStore", "PlatformStore", "SqlitePlatformStore",
           "Versioned", "Write", "WriteConflict", "retry_conflicts", "secret_hash"]
