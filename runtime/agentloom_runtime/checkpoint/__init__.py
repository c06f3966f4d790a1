from .memory import InMemoryCheckpointStore
from .store import (
    BaseCheckpointStore,
    Commit,
    CommitCompanion,
    CompanionConflict,
    CompanionWrites,
    Head,
    LogEntry,
)

__all__ = ["BaseCheckpointStore", "Commit", "CommitCompanion", "CompanionConflict",
           "CompanionWrites", "Head", "InMemoryCheckpointStore", "LogEntry"]
