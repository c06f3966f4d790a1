"""A run's workspaces, as the run host sees them (a port with two adapters:
``agentloom.local.workspaces`` on a local directory with the bubblewrap sandbox,
``agentloom.aws.workspaces`` on the EFS volume with commands on Fargate).

``SessionWorkspaces`` holds what both share: the instance directories of one session
(the layout of docs/workspaces.md, resolved from host identity only, never from the
model), the file tools the snapshot asks for, and the command markers in the session's
lock directory. An adapter adds how commands run (``runner``, ``services``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.tool_contracts import ToolDefinition
from agentloom_runtime.workspace import (
    InstanceWorkspace,
    MarkerStore,
    WorkspaceProvider,
    WorkspaceStorage,
    file_tools,
)
from agentloom_runtime.workspace.commands import MarkerLiveness


class BoundRun(Protocol):
    """What workspaces read of the engine they serve: its run id."""

    @property
    def run_id(self) -> str: ...


class CommandRunner(Protocol):
    """Runs a ``workspace_command`` spec for an instance and returns its result dict (the
    embedded driver's port; on AWS the state machine runs commands on Fargate)."""

    async def run(self, spec: dict[str, Any], instance: str) -> dict[str, Any]: ...


class RunWorkspaces(Protocol):
    """What the run host needs of a run's workspaces."""

    provider: WorkspaceProvider

    def for_instance(self, instance: str) -> WorkspaceStorage: ...

    def tools(self) -> list[ToolDefinition]: ...

    def services(self) -> dict[str, Any]: ...

    def markers(self) -> MarkerStore | None:
        """The engine's command port (None: no commands run from this host)."""
        ...

    def bind(self, engine: BoundRun) -> None: ...

    def runner(self) -> CommandRunner | None: ...


WorkspacesFactory = Callable[[AgentSnapshot, str], RunWorkspaces]  # (snapshot, session)


class SessionWorkspaces:
    """One session's workspaces on a ``WorkspaceProvider``: instance directories, file
    tools, command markers. ``liveness`` lets a marker whose sandbox provably holds
    nothing stop blocking the session (None: nothing can prove it)."""

    def __init__(self, provider: WorkspaceProvider, snapshot: AgentSnapshot, session: str,
                 *, liveness: MarkerLiveness | None = None) -> None:
        self.provider = provider
        self.snapshot = snapshot
        self.session = session
        self._liveness = liveness
        self._engine: BoundRun | None = None

    def bind(self, engine: BoundRun) -> None:
        self._engine = engine

    @property
    def commands(self) -> MarkerStore:
        """Execution markers and results by request id, in the session's lock directory."""
        snap = self.snapshot
        return MarkerStore(self.provider.lock_dir(snap.space_id, snap.agent_id, self.session),
                           liveness=self._liveness)

    def markers(self) -> MarkerStore | None:
        return self.commands

    def services(self) -> dict[str, Any]:
        return {}

    def runner(self) -> CommandRunner | None:
        return None

    def tools(self) -> list[ToolDefinition]:
        wanted = set(self.snapshot.tools)
        return [t for t in file_tools()
                if ("workspace" in wanted and t.name != "workspace_command")
                or t.name in wanted]

    def instance(self, instance: str) -> InstanceWorkspace:
        if self._engine is None:
            raise RuntimeError("workspaces used before an engine was bound")
        snap = self.snapshot
        return self.provider.for_instance(snap.space_id, snap.agent_id, self.session,
                                          self._engine.run_id, instance)

    def for_instance(self, instance: str) -> WorkspaceStorage:
        return self.instance(instance).store()

    def session_dir(self) -> Path:
        snap = self.snapshot
        return self.provider.root.joinpath("spaces", snap.space_id, "agents", snap.agent_id,
                                           "sessions", self.session)
