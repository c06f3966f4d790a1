"""The session write lock and small durable files in the lock area.

``flock`` excludes other processes (on NFS the Linux client maps it to a POSIX lock, so
every executor must use the same storage and protocol; verify NFS locking on the target
mount). POSIX locks do not exclude threads of one process, so a per-path ``threading.Lock``
is taken first.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ._paths import atomic_write
from .errors import WorkspaceError

LOCK_FILE = "write.lock"
_REGISTRY: dict[str, threading.Lock] = {}
_REGISTRY_GUARD = threading.Lock()


def _thread_lock(path: str) -> threading.Lock:
    with _REGISTRY_GUARD:
        return _REGISTRY.setdefault(path, threading.Lock())


def ensure_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)


@contextmanager
def write_lock(lock_dir: Path, *, timeout_s: float = 30.0) -> Iterator[None]:
    """Hold the session's write lock; ``locked`` when it cannot be taken in time."""
    ensure_dir(lock_dir)
    path = os.path.realpath(lock_dir / LOCK_FILE)
    local = _thread_lock(path)
    deadline = time.monotonic() + timeout_s
    if not local.acquire(timeout=timeout_s):
        raise WorkspaceError("locked", "the workspace is locked by another writer; retry")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            _flock(fd, deadline)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    finally:
        local.release()


def _flock(fd: int, deadline: float) -> None:
    delay = 0.005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise WorkspaceError("locked",
                                     "the workspace is locked by another writer; retry") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def write_json(directory: Path, name: str, data: Mapping[str, Any]) -> None:
    """Atomically replace ``directory/name`` with JSON (fsync'd file and directory)."""
    ensure_dir(directory)
    raw = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        atomic_write(fd, name, raw, 0o600, name)
    finally:
        os.close(fd)


def remove_file(directory: Path, name: str) -> None:
    """Unlink and fsync the directory so the removal itself is durable."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            return
        os.fsync(fd)
    finally:
        os.close(fd)
