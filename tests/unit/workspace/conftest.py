"""Fixtures: an instance workspace next to an 'outside' directory holding a sentinel."""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloom_runtime.tool_contracts import ToolContext
from agentloom_runtime.workspace import InstanceWorkspace, PosixWorkspaceStore, WorkspaceProvider

SENTINEL = "SENTINEL-7f3a9c-outside-secret"


def snapshot(root: Path) -> dict[str, Any]:
    """Names, types, contents and mtimes of everything under root (links not followed)."""
    seen: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
            seen[str(path.relative_to(root))] = (st.st_mode, st.st_mtime_ns,
                                                 hashlib.sha256(data).hexdigest())
    return seen


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    """A directory the workspace must never read or change; checked after each test."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text(f"{SENTINEL}\n")
    (out / "sub").mkdir()
    (out / "sub" / "deep.txt").write_text(f"deep {SENTINEL}\n")
    before = snapshot(out)
    yield out
    assert snapshot(out) == before, "something outside the workspace changed"


@pytest.fixture
def workspace(tmp_path: Path, outside: Path) -> InstanceWorkspace:
    provider = WorkspaceProvider(tmp_path / "volume")
    return provider.for_instance("space1", "agent1", "session1", "run1", "main")


@pytest.fixture
def store(workspace: InstanceWorkspace) -> PosixWorkspaceStore:
    store = workspace.store()
    assert isinstance(store, PosixWorkspaceStore)
    return store


def context_for(store: Any, *, config: dict[str, Any] | None = None,
                **services: Any) -> ToolContext:
    return ToolContext(config=config or {}, instance="main", run_id="run1", call_id="call-1",
                       request_id="req-1", workspace=store, services=services)


@pytest.fixture
def sentinel() -> str:
    return SENTINEL


@pytest.fixture
def make_context() -> Any:
    return context_for


@pytest.fixture
def hostile(workspace: InstanceWorkspace, outside: Path) -> dict[str, bool]:
    """Plant links and special files inside the workspace; returns what could be made."""
    root = workspace.root
    (root / "dir" / "x").mkdir(parents=True)
    (root / "dir" / "inside.txt").write_text("inside\n")
    (root / "victim.txt").write_text("victim\n")
    os.symlink(outside, root / "link_out")
    os.symlink(outside, root / "dir" / "link_mid")
    os.symlink(outside / "secret.txt", root / "link_file")
    os.symlink("/", root / "link_root")
    os.symlink(outside / "missing.txt", root / "link_dangling")
    os.symlink("../" * 12 + str(outside).lstrip("/"), root / "link_up")
    os.link(outside / "secret.txt", root / "hard.txt")
    os.mkfifo(root / "fifo")
    made = {"device": False, "socket": False}
    cwd = os.getcwd()
    try:  # AF_UNIX paths are short: bind relative to the directory
        os.chdir(root)
        sock = socket.socket(socket.AF_UNIX)
        sock.bind("sock")
        sock.close()
        made["socket"] = True
    finally:
        os.chdir(cwd)
    if os.geteuid() == 0:
        os.mknod(root / "dev_null", 0o666 | 0o020000, os.makedev(1, 3))
        made["device"] = True
    return made
