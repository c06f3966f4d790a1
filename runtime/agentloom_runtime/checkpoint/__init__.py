from .memory import InMemoryCheckpointStore
from .store import BaseCheckpointStore, Commit, Head, LogEntry

__all__ = ["BaseCheckpointStore", "Commit", "Head", "InMemoryCheckpointStore", "LogEntry"]
