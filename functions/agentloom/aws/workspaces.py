"""Workspaces of AWS runs: the EFS volume, the platform's layout (``SessionWorkspaces``,
docs/contract.md#workspaces), commands on Fargate.

The step function mounts the volume at ``AGENTLOOM_WORKSPACE_ROOT`` and uses the runtime's
``WorkspaceProvider`` in ``shared_posix`` mode (a missing mount is ``volume_unavailable``,
never an empty stand-in; the ``.agentloom-volume`` marker holding the stage's volume id is
written on first use of an empty volume). The marker store has no liveness — nothing here
can prove that a Fargate task is gone, so a marker without a result is an unknown
outcome. Commands never run in this process: the step hands the spec to the state
machine (``agentloom.aws.sandbox``).

The API function does not mount the volume, yet attaches engines (status, resolve,
supplements) whose bindings name it: its provider is ``detached`` (the same binding —
mode and volume id — with every file access refused as ``volume_unavailable``). A
deleted session's files are removed by the step on the API's request
(``agentloom.aws.session_files``).
"""

from __future__ import annotations

import os
from pathlib import Path

from agentloom.platform.host import SessionWorkspaces, WorkspacesFactory
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.workspace import MarkerStore, WorkspaceError, WorkspaceProvider
from agentloom_runtime.workspace.provider import VOLUME_MARKER


def ensure_volume_marker(root: str, volume_id: str) -> None:
    """Write the volume marker on first use (the mount itself is Lambda's guarantee: an
    invocation does not start without it). A marker naming another volume is left alone:
    the provider then refuses with ``volume_mismatch``."""
    path = Path(root)
    if not path.is_dir():
        raise WorkspaceError("volume_unavailable", f"the workspace volume is not mounted at "
                             f"{root}")
    try:
        fd = os.open(path / VOLUME_MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as out:
        out.write(volume_id)


class EfsWorkspaces(SessionWorkspaces):
    """One session's workspaces on the EFS volume (``mounted``: the step function) or
    detached from it (the API function); commands on Fargate, never here."""

    def __init__(self, root: str, volume_id: str, snapshot: AgentSnapshot, session: str,
                 *, mounted: bool) -> None:
        if mounted:
            ensure_volume_marker(root, volume_id)
        provider = WorkspaceProvider(root, mode="shared_posix", volume_id=volume_id,
                                     detached=not mounted)
        super().__init__(provider, snapshot, session)
        self.mounted = mounted

    @staticmethod
    def factory(root: str, volume_id: str, *, mounted: bool) -> WorkspacesFactory:
        """The run host's port: a session's workspaces on the volume."""
        return lambda snapshot, session: EfsWorkspaces(root, volume_id, snapshot, session,
                                                       mounted=mounted)

    def markers(self) -> MarkerStore | None:
        return self.commands if self.mounted else None
