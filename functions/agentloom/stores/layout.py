"""The files of an embedded home (the state directory, ``--home``): one SQLite file that
every store of the home shares, the key file its envelopes are sealed under, and the
lock file of the server that serves it.

Everything in a home is its owner's alone: files 0600 (the database, and its ``-wal`` /
``-shm`` files, which SQLite creates with the database file's mode; the key file; the
server lock), directories 0700 — 0711 when this process runs as root, whose commands run
as ``nobody`` in the sandbox and must traverse the home to reach their workspace (never
list it). ``prepare`` is called before any store opens the database, by every opener
(the CLI, ``agentloom serve`` and each capability's wiring).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

DATABASE = "agentloom.sqlite3"
KEY_FILE = "agentloom.key"
SERVER_LOCK = "serve.lock"  # held by a running `agentloom serve` (agentloom.local.served)
DATABASE_FILES = (DATABASE, f"{DATABASE}-wal", f"{DATABASE}-shm")


def dir_mode() -> int:
    """The mode of the home's directories (see the module docstring)."""
    return 0o711 if os.geteuid() == 0 else 0o700


def private_dir(path: Path) -> Path:
    """``path`` (and its missing parents) created with ``dir_mode``; an existing one
    loses the bits that let group or others list or write it."""
    mode = dir_mode()
    path.mkdir(mode=mode, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # not ours: the stores say what is wrong
        current = path.stat().st_mode & 0o777
        if current & ~mode:
            os.chmod(path, current & mode)
    return path


def prepare(home: Path) -> Path:
    """The home directory and its database file, owner-only, before SQLite opens it;
    returns the database's path.

    An existing database is never opened here, only ``chmod``-ed by name: closing any
    descriptor of the file would drop the POSIX locks this process's SQLite connections
    hold on it (a lock belongs to the process, not to the descriptor), and another
    process's SQLite, finding the file unlocked when it closes its last connection,
    checkpoints and deletes the WAL under the live connections ("disk I/O error")."""
    private_dir(home)
    path = home / DATABASE
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600))
    except FileExistsError:  # a new inode has no locks to lose; an old one is not opened
        for name in DATABASE_FILES:
            _owner_only(home / name)
    return path


def _owner_only(path: Path) -> None:
    """A file of a home written before files were made owner-only loses the group's and
    others' bits (by name: no descriptor is opened)."""
    with contextlib.suppress(OSError):
        found = os.stat(path, follow_symlinks=False)
        mode = found.st_mode & 0o777
        if stat.S_ISREG(found.st_mode) and mode & 0o077:
            os.chmod(path, mode & 0o700)
