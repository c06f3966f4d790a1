"""Embedded teardown of a session (``agentloom.platform.teardown``): its workspace
directory (every run's and instance's files) and its lock directory (command markers and
results) under the home's workspace root. Neither exists for a session that never used
a workspace; a missing one counts as removed, so a retry after a crash finishes."""

from __future__ import annotations

from pathlib import Path

from agentloom.platform.domain import Session
from agentloom_runtime.workspace.provider import remove_directory, session_directories


class LocalSessionResources:
    def __init__(self, workspace_root: Path) -> None:
        self.root = workspace_root

    def directories(self, session: Session) -> list[Path]:
        """The session's directories under the root (whether or not they exist)."""
        return session_directories(self.root, session.space_id, session.agent_id,
                                   session.session_id)

    def remove(self, session: Session) -> None:
        for directory in self.directories(session):
            remove_directory(directory)  # no link followed; read-only dirs given back
