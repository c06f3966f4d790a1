"""Which ``agentloom serve`` uses a home: ``home/serve.lock``.

A running server holds an exclusive ``flock`` on the file for its whole life and keeps
its pid and URL in it (``ServerLock``): a second server on the same home is refused,
naming the first, and the CLI finds the server (``serving``) before it drives a run of
one of the server's sessions — the server drives those (with its model connections, its
event log, its workers), so the CLI names the API command instead
(``agentloom.cli._served``). A lock file left by a killed server is no lock: ``flock``
ends with its holder.

Sharing the SQLite file itself is safe either way (WAL, one write lock, no descriptor of
the database ever closed beside SQLite's: ``agentloom.stores.layout.prepare``);
reading commands (``show``, ``runs``, ``sessions``), ``cancel`` and ``serve token`` work
while a server runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from agentloom.stores import layout
from agentloom_runtime.errors import ConfigError


@dataclass(frozen=True)
class Server:
    """A live server on a home: its pid and URL (None while it is starting)."""

    pid: int | None
    url: str | None

    def describe(self) -> str:
        where = f" at {self.url}" if self.url else " (starting)"
        return f"agentloom serve (pid {self.pid if self.pid else '?'}){where}"


def serving(home: Path) -> Server | None:
    """The server that holds ``home``'s lock, or None (no lock file, or nobody holds
    it). Reads only: nothing in the home is created or changed."""
    try:
        fd = os.open(home / layout.SERVER_LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read(fd: int) -> Server:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        data = {}  # being written: a server, whose address is not known yet
    if not isinstance(data, dict):
        data = {}
    pid, url = data.get("pid"), data.get("url")
    return Server(pid if isinstance(pid, int) else None, url if isinstance(url, str) else None)


class ServerLock:
    """The lock a server holds on its home (``acquire``, ``announce``, ``release``)."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, home: Path) -> ServerLock:
        """Take the home's lock, or ``ConfigError`` (code ``home_served``) naming the
        server that holds it."""
        layout.private_dir(home)
        fd = os.open(home / layout.SERVER_LOCK,
                     os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = _read(fd)
            os.close(fd)
            raise ConfigError(f"{home} is served already by {other.describe()}; stop it "
                              "first, or serve another --home",
                              details={"code": "home_served", "pid": other.pid,
                                       "url": other.url}) from None
        except BaseException:
            os.close(fd)
            raise
        lock = cls(fd)
        lock.announce(None)
        return lock

    def announce(self, url: str | None) -> None:
        """Record this server's pid and URL (once it listens) for the CLI to name."""
        if self._fd is None:
            return
        data = json.dumps({"pid": os.getpid(), "url": url, "since": time.time()}).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # the flock ends with the descriptor
