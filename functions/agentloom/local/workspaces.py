"""Local workspaces for embedded runs: a directory per instance, file tools, and the
bubblewrap command sandbox.

The layout and the file tools are the platform's (``SessionWorkspaces``). Commands run in
bubblewrap; without a usable sandbox the tool is refused, never run on the host. On a
root host commands run as ``nobody``, and the file tools hand what they create to that
user, so both work on the same files. Everything is its owner's alone: an instance
directory 0700 (its files 0600, commands run with umask 077), the directories on the way
to it 0700 (0711 on a root host: ``agentloom.stores.layout.dir_mode``). The marker store
and the file tools use the runner's liveness: a marker whose sandbox provably holds
nothing no longer blocks the session.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentloom.platform.host import SessionWorkspaces, WorkspacesFactory
from agentloom.sandbox.bwrap import BubblewrapRunner
from agentloom.stores import layout
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.workspace import (
    CommandResult,
    CommandSpec,
    InstanceWorkspace,
    PosixWorkspaceStore,
    SandboxUnavailable,
    WorkspaceProvider,
    WorkspaceStorage,
)

NOBODY = (65534, 65534)


def sandbox_user() -> tuple[int, int] | None:
    """The kernel does not apply the process limit to uid 0, so a root host runs commands
    as nobody (who then owns the instance directories and their files)."""
    return NOBODY if os.geteuid() == 0 else None


class LocalWorkspaces(SessionWorkspaces):
    def __init__(self, root: Path, snapshot: AgentSnapshot, session: str, *,
                 dir_mode: int) -> None:
        self._sandbox_user = sandbox_user()
        self._runner = BubblewrapRunner(sandbox_user=self._sandbox_user)
        super().__init__(WorkspaceProvider(root, store_factory=self._store,
                                           dir_mode=dir_mode), snapshot,
                         session, liveness=self._runner.liveness)

    @staticmethod
    def factory(root: Path) -> WorkspacesFactory:
        """The run host's port: a session's workspaces under ``root`` (made owner-only
        once, here: created so, or tightened in a home made before)."""
        layout.private_dir(root)
        mode = layout.dir_mode()
        return lambda snapshot, session: LocalWorkspaces(root, snapshot, session,
                                                         dir_mode=mode)

    def _store(self, root: Path, lock_dir: Path) -> WorkspaceStorage:
        return PosixWorkspaceStore(root, lock_dir, owner=self._sandbox_user,
                                   liveness=self._runner.liveness, private=True)

    def services(self) -> dict[str, Any]:
        return {"command_runner": self}

    def ensure_available(self) -> None:
        """The sandbox works here: bubblewrap is usable and, when commands run as another
        user, that user can reach the workspace (a private parent directory would make
        every command fail obscurely)."""
        self._runner.ensure_available()
        if self._sandbox_user is None:
            return
        for folder in [self.provider.root, *self.provider.root.parents]:
            if folder.exists() and not folder.stat().st_mode & 0o001:
                raise SandboxUnavailable(
                    f"commands run as uid {self._sandbox_user[0]} on a root host, and that "
                    f"user cannot reach {self.provider.root} ({folder} is private); run "
                    "agentloom as a normal user or use a state directory under a "
                    "traversable path (AGENTLOOM_HOME / --home)")

    def instance(self, instance: str) -> InstanceWorkspace:
        ws = super().instance(instance)
        found = ws.root.stat()
        if self._sandbox_user is not None and found.st_uid != self._sandbox_user[0]:
            os.chown(ws.root, *self._sandbox_user)
        if found.st_mode & 0o077:  # the commands' user alone (a home's files are private)
            os.chmod(ws.root, 0o700)
        return ws

    def runner(self) -> LocalRunner:
        return LocalRunner(self)


class LocalRunner:
    """The driver's command runner: bubblewrap over the instance's directory."""

    def __init__(self, workspaces: LocalWorkspaces) -> None:
        self._ws = workspaces

    async def run(self, spec: dict[str, Any], instance: str) -> dict[str, Any]:
        command = CommandSpec.from_dict(spec)
        result: CommandResult = await self._ws._runner.run(command, self._ws.instance(instance))
        return result.to_dict()
