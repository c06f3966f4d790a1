"""``WorkspaceProvider``: a workspace from host identity only (docs/contract.md#workspaces).

Layout under the volume root (the model never chooses any of it)::

    spaces/<space>/agents/<agent>/sessions/<session>/main/                      main
    spaces/<space>/agents/<agent>/sessions/<session>/runs/<run>/children/<id>/  sub-N
    .agentloom-locks/<sha256(session scope)>/                                  locks, markers

New questions of a session reuse ``main/``; agents, sessions and children are disjoint, and
the lock directory sits outside every directory that is mounted into a sandbox.

Modes: ``local`` (default; the root is created) and ``shared_posix`` (a pre-mounted NFS /
EFS / NAS volume: absolute root, fixed ``volume_id``, a ``.agentloom-volume`` file at the
root holding that id; a missing mount or marker raises ``volume_unavailable`` /
``volume_mismatch`` and never falls back to creating an empty local directory).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentloom_runtime.errors import ConfigError, ResumeMismatch

from ._paths import open_root, walk
from .errors import WorkspaceError
from .posix_store import PosixWorkspaceStore
from .storage import WorkspaceStorage

Mode = Literal["local", "shared_posix"]
VOLUME_MARKER = ".agentloom-volume"
LOCKS_DIR = ".agentloom-locks"
BINDING_FORMAT = 1
_IDENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")

StoreFactory = Callable[[Path, Path], WorkspaceStorage]


def check_identity(kind: str, value: object) -> str:
    """Safe charset, no separators, not dots-only, at most 128 chars."""
    if not isinstance(value, str) or not _IDENT.match(value) or ".." in value:
        raise ConfigError(f"invalid {kind} id {value!r}: use [A-Za-z0-9_.-], start with a "
                          "letter or digit, no '..'")
    return value


def session_scope_hash(space: str, agent: str, session: str) -> str:
    scope = json.dumps(["agentloom-session/v1", space, agent, session], separators=(",", ":"))
    return hashlib.sha256(scope.encode()).hexdigest()


def session_parts(space: str, agent: str, session: str) -> tuple[str, ...]:
    """The session's workspace directory under the root, as path parts (ids checked)."""
    for kind, value in (("space", space), ("agent", agent), ("session", session)):
        check_identity(kind, value)
    return ("spaces", space, "agents", agent, "sessions", session)


def remove_directory(directory: Path) -> None:
    """Remove a session's directory: a link is unlinked, never followed (so is every link
    inside: ``rmtree`` is fd-based on Linux); absent is done. A command may have left
    directories read-only or unreadable (``chmod -R a-w``): their owner — the user the
    commands ran as, which the host can act for — gets them back (0700) and the removal
    is tried again."""
    if directory.is_symlink():
        directory.unlink()
        return
    if not directory.exists():
        return
    try:
        shutil.rmtree(directory)
    except PermissionError:
        pending = [directory]
        while pending:
            current = pending.pop()
            os.chmod(current, 0o700)
            with os.scandir(current) as entries:
                pending.extend(Path(e.path) for e in entries if e.is_dir(follow_symlinks=False))
        shutil.rmtree(directory)


def session_directories(root: Path, space: str, agent: str, session: str) -> list[Path]:
    """Everything the provider makes for a session under ``root`` (existing or not): its
    workspace directory and its lock directory — what deleting the session removes."""
    return [root.joinpath(*session_parts(space, agent, session)),
            root / LOCKS_DIR / session_scope_hash(space, agent, session)]


@dataclass(frozen=True)
class InstanceWorkspace:
    space: str
    agent: str
    session: str
    run: str
    instance: str
    root: Path  # bound at /workspace in a sandbox
    lock_dir: Path  # never mounted into a sandbox
    store_factory: StoreFactory = PosixWorkspaceStore

    def store(self) -> WorkspaceStorage:
        """The instance's WorkspaceStorage (``PosixWorkspaceStore`` by default)."""
        return self.store_factory(self.root, self.lock_dir)


class WorkspaceProvider:
    module_id = "workspace-provider/v1"

    def __init__(self, root: str | Path, *, mode: Mode = "local", volume_id: str | None = None,
                 store_factory: StoreFactory = PosixWorkspaceStore,
                 detached: bool = False, dir_mode: int = 0o755) -> None:
        """``detached`` (``shared_posix`` only): the volume's binding on a host that does not
        mount it — resume checks compare the same binding, every file access is refused
        with ``volume_unavailable``. ``dir_mode``: of the directories created on the way
        to an instance workspace (the lock area is 0700 whatever it is)."""
        self.dir_mode = dir_mode
        if mode not in ("local", "shared_posix"):
            raise ConfigError(f"unknown workspace mode {mode!r}")
        if detached and mode != "shared_posix":
            raise ConfigError("only a shared_posix volume can be detached")
        self.mode: Mode = mode
        self.volume_id = volume_id
        self.store_factory = store_factory
        self.detached = detached
        if mode == "shared_posix":
            if not os.path.isabs(root):
                raise ConfigError("shared_posix needs an absolute root path")
            check_identity("volume", volume_id)
            self.root = Path(root)
            if not detached:
                self._verify_volume()
        else:
            if volume_id is not None:
                check_identity("volume", volume_id)
            self.root = Path(root).absolute()
            self.root.mkdir(mode=dir_mode, parents=True, exist_ok=True)

    def _verify_volume(self) -> None:
        """The mount and its marker must be there: never create an empty stand-in."""
        if self.detached:
            raise WorkspaceError("volume_unavailable", "this host does not mount the "
                                 "workspace volume (it is used where runs are stepped)")
        if not self.root.is_dir():
            raise WorkspaceError("volume_unavailable", "the shared workspace volume is not "
                                 "mounted (root directory missing)")
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(self.root / VOLUME_MARKER, flags)
        except OSError as exc:
            raise WorkspaceError("volume_unavailable", f"the shared workspace volume has no "
                                 f"readable {VOLUME_MARKER} marker") from exc
        try:
            content = os.read(fd, 4096).decode("utf-8", "replace").strip()
        finally:
            os.close(fd)
        if content != self.volume_id:
            raise WorkspaceError("volume_mismatch", "the mounted volume is not the configured "
                                 "one (.agentloom-volume differs from volume_id)")

    def checkpoint_config(self) -> dict[str, Any]:
        return {"mode": self.mode, "volume_id": self.volume_id}

    def _fingerprint(self) -> str:
        return hashlib.sha256(os.fsencode(os.path.realpath(self.root))).hexdigest()[:32]

    def checkpoint_binding(self) -> dict[str, Any]:
        return {"format": BINDING_FORMAT, "mode": self.mode, "volume_id": self.volume_id,
                "root": self._fingerprint()}

    def verify_binding(self, saved: Mapping[str, Any] | None) -> None:
        """Refuse to resume on another volume. ``shared_posix`` compares the volume id only
        (hosts may mount one volume at different paths); ``local`` also the root path."""
        if saved is None:
            return
        current = self.checkpoint_binding()
        keys = ["mode", "volume_id"] + (["root"] if self.mode == "local" else [])
        changed = [k for k in keys if saved.get(k) != current[k]]
        if changed:
            raise ResumeMismatch("the run was saved on another workspace volume",
                                 details={"changed": changed})

    def lock_dir(self, space: str, agent: str, session: str) -> Path:
        for kind, value in (("space", space), ("agent", agent), ("session", session)):
            check_identity(kind, value)
        if self.detached:
            self._verify_volume()
        if self.mode == "local":  # never mounted into a sandbox: the host's alone
            (self.root / LOCKS_DIR).mkdir(mode=0o700, exist_ok=True)
        path = self.root / LOCKS_DIR / session_scope_hash(space, agent, session)
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path

    def for_instance(self, space: str, agent: str, session: str, run: str,
                     instance: str) -> InstanceWorkspace:
        for kind, value in (("space", space), ("agent", agent), ("session", session),
                            ("run", run), ("instance", instance)):
            check_identity(kind, value)
        if self.mode == "shared_posix":
            self._verify_volume()  # the mount may have gone since start-up
        parts = session_parts(space, agent, session)
        parts += ("main",) if instance == "main" else ("runs", run, "children", instance)
        root_fd = open_root(os.fspath(self.root))
        try:
            os.close(walk(root_fd, parts, create=True, mode=self.dir_mode))  # O_NOFOLLOW
        finally:
            os.close(root_fd)
        return InstanceWorkspace(space, agent, session, run, instance,
                                 self.root.joinpath(*parts), self.lock_dir(space, agent, session),
                                 self.store_factory)
