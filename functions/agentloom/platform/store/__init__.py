"""The platform store: ``PlatformStore``, one repository per kind of record
(``spaces``, ``agents``, ``sessions``, ``runs``, ``streams``, ``events``, ``tokens``)
over an ``ItemStore``, whose adapters implement three primitives, one per module:

- ``InMemoryItemStore`` (``memory``): the reference, for tests and one process;
- ``SqliteItemStore`` (``sqlite``): the embedded default, one SQLite file (WAL);
- ``DynamoDbItemStore`` (``dynamodb``): AWS, one table keyed by ``pk``/``sk``
  (imported on first use: it needs boto3, the ``aws`` extra).

The item layout is in ``items``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloom_runtime._lazy import lazy_exports

from .items import (
    ABSENT,
    ANY,
    ItemStore,
    Stored,
    Versioned,
    Write,
    WriteConflict,
    check,
    delete,
    put,
    retry_conflicts,
)
from .memory import InMemoryItemStore
from .platform_store import PlatformStore
from .tenancy import secret_hash

if TYPE_CHECKING:
    from .dynamodb import DynamoDbItemStore
    from .sqlite import SqliteItemStore

# The backends load on first use: a Lambda never opens SQLite, the embedded host never
# loads botocore.
__getattr__ = lazy_exports(__name__, {"DynamoDbItemStore": ".dynamodb",
                                      "SqliteItemStore": ".sqlite"})


__all__ = ["ABSENT", "ANY", "DynamoDbItemStore", "InMemoryItemStore", "ItemStore",
           "PlatformStore", "SqliteItemStore", "Stored", "Versioned", "Write",
           "WriteConflict", "check", "delete", "put", "retry_conflicts", "secret_hash"]
