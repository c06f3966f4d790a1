"""Local workspaces for embedded runs (filled in with the workspace provider)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentloom_runtime.snapshot import AgentSnapshot


class LocalWorkspaces:
    def __init__(self, root: Path, snapshot: AgentSnapshot, session: str) -> None:
        self.root = root
        self.snapshot = snapshot
        self.session = session
        self.provider = None
        self._engine: Any = None

    def bind(self, engine: Any) -> None:
        self._engine = engine

    def tools(self) -> list[Any]:
        return []

    def for_instance(self, instance: str) -> Any:
        return None

    def runner(self) -> Any:
        return None
