"""Fixtures for the real bubblewrap sandbox (skipped where it cannot run).

On a root host the runner starts bwrap as uid/gid 65534 (the kernel does not enforce
RLIMIT_NPROC for host root), so workspaces are chowned to that user here, and the file
tools' store hands what it creates to that user.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentloom.sandbox import BubblewrapRunner
from agentloom_runtime.workspace import (
    InstanceWorkspace,
    PosixWorkspaceStore,
    SandboxUnavailable,
    WorkspaceProvider,
)

SANDBOX_USER = (65534, 65534) if os.geteuid() == 0 else None

SpawnOwner = Callable[[InstanceWorkspace, str, str], "subprocess.Popen[bytes]"]
FindProcesses = Callable[[bytes], list[int]]


def chown_tree(path: Path) -> None:
    if SANDBOX_USER is None:
        return
    for dirpath, _dirs, files in os.walk(path):
        os.chown(dirpath, *SANDBOX_USER)
        for name in files:
            os.chown(os.path.join(dirpath, name), *SANDBOX_USER)


@pytest.fixture
def base() -> Iterator[Path]:
    """Not pytest's tmp_path: its parents are 0700, which the sandbox user cannot cross."""
    path = Path(tempfile.mkdtemp(prefix="agentloom-sandbox-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def runner() -> BubblewrapRunner:
    runner = BubblewrapRunner(sandbox_user=SANDBOX_USER)
    try:
        runner.ensure_available()
    except SandboxUnavailable as exc:
        pytest.skip(f"bubblewrap sandbox unusable here: {exc.message}")
    return runner


@pytest.fixture
def ws(base: Path) -> InstanceWorkspace:
    workspace = WorkspaceProvider(base / "vol").for_instance("s", "a", "sess", "run1", "main")
    chown_tree(workspace.root)
    return workspace


@pytest.fixture
def shared_store(runner: BubblewrapRunner, ws: InstanceWorkspace) -> PosixWorkspaceStore:
    """The file tools' store as ``LocalWorkspaces`` builds it: files go to the sandbox
    user, markers are judged with the runner's liveness."""
    return PosixWorkspaceStore(ws.root, ws.lock_dir, owner=SANDBOX_USER,
                               liveness=runner.liveness)


@pytest.fixture
def spawn_owner() -> SpawnOwner:
    """Start a separate owner process: it runs ``BubblewrapRunner.run_sync`` of one
    command in the workspace, so the test can kill it (SIGKILL) mid-command."""

    def spawn(ws: InstanceWorkspace, request_id: str, command: str) -> subprocess.Popen[bytes]:
        helper = (f"import sys; sys.path[:0] = {sys.path!r}\n"
                  "from agentloom.sandbox import BubblewrapRunner\n"
                  "from agentloom_runtime.workspace import CommandSpec\n"
                  f"BubblewrapRunner(sandbox_user={SANDBOX_USER!r}).run_sync(\n"
                  f"    CommandSpec(request_id={request_id!r}, command={command!r},\n"
                  "                timeout_s=600),\n"
                  f"    {str(ws.root)!r}, {str(ws.lock_dir)!r})\n")
        return subprocess.Popen([sys.executable, "-c", helper])

    return spawn


@pytest.fixture
def sandbox_user() -> tuple[int, int] | None:
    return SANDBOX_USER


@pytest.fixture
def find_processes() -> FindProcesses:
    return processes_with_cmdline


def processes_with_cmdline(wanted: bytes) -> list[int]:
    """Live processes whose whole command line is ``wanted`` (NUL-separated)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if Path(f"/proc/{entry.name}/cmdline").read_bytes() == wanted:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
