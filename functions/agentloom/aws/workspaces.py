"""Workspaces of AWS runs: EFS, the layout (docs/contract.md#workspaces), commands on Fargate.

The step function mounts the volume at ``AGENTLOOM_WORKSPACE_ROOT`` and uses the runtime's
``WorkspaceProvider`` in ``shared_posix`` mode (a missing mount is ``volume_unavailable``,
never an empty stand-in; the ``.agentloom-volume`` marker holding the stage's volume id is
written on first use of an empty volume). The layout, the file tools and the lock
directory are those of embedded mode (``agentloom.local.workspaces``, reused); the marker
store has no liveness — nothing here can prove that a Fargate task is gone, so a marker
without a result is an unknown outcome. Commands never run in this process: the step hands
the spec to the state machine (``agentloom.aws.sandbox``).

The API function does not mount the volume, yet attaches engines (status, resolve,
cancel) whose bindings name it: ``DetachedProvider`` has the same binding (mode and volume
id) and refuses every file access with ``volume_unavailable``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentloom.local.workspaces import LocalWorkspaces
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.workspace import (
    MarkerStore,
    PosixWorkspaceStore,
    WorkspaceError,
    WorkspaceProvider,
)
from agentloom_runtime.workspace.provider import VOLUME_MARKER


class DetachedProvider(WorkspaceProvider):
    """The volume's binding without the volume (the API function)."""

    def __init__(self, root: str, volume_id: str) -> None:  # no super(): nothing mounted
        self.mode = "shared_posix"
        self.volume_id = volume_id
        self.store_factory = PosixWorkspaceStore
        self.root = Path(root)

    def _verify_volume(self) -> None:
        raise WorkspaceError("volume_unavailable", "the API function does not mount the "
                             "workspace volume; workspaces are used by the step function")

    def lock_dir(self, space: str, agent: str, session: str) -> Path:
        self._verify_volume()
        raise AssertionError("unreachable")  # pragma: no cover


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


class EfsWorkspaces(LocalWorkspaces):
    """``LocalWorkspaces`` on the EFS volume (``mounted``) or detached (the API): same
    layout, tools and lock directory; no local sandbox."""

    def __init__(self, root: str, volume_id: str, snapshot: AgentSnapshot, session: str,
                 *, mounted: bool) -> None:  # no super(): no bubblewrap, no local root
        self._sandbox_user = None
        self.mounted = mounted
        if mounted:
            ensure_volume_marker(root, volume_id)
            self.provider = WorkspaceProvider(root, mode="shared_posix", volume_id=volume_id)
        else:
            self.provider = DetachedProvider(root, volume_id)
        self.snapshot = snapshot
        self.session = session
        self._engine: Any = None

    @property
    def commands(self) -> MarkerStore:
        snap = self.snapshot
        return MarkerStore(self.provider.lock_dir(snap.space_id, snap.agent_id, self.session))

    def services(self) -> dict[str, Any]:
        return {}

    def ensure_available(self) -> None:
        return None  # Fargate is always there; a task that cannot start is a failed result

    def session_dir(self) -> Path:
        snap = self.snapshot
        return self.provider.root.joinpath("spaces", snap.space_id, "agents", snap.agent_id,
                                           "sessions", self.session)
