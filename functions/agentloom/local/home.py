"""A home: the one SQLite file (and its key file) both embedded hosts keep state in.

``home/agentloom.sqlite3`` (mode 0600) holds the checkpoint store (runs, encrypted under
``home/agentloom.key``) and the platform store (sessions, runs, the session record
streams, events …; its bodies sealed under the same key file: ``embedded_items``).
``open_home`` wires them the one way both hosts use — the CLI (``LocalApp``) and
``agentloom serve`` (``EmbeddedPlatform``): the platform's companion ``SessionCommits``
attached to the checkpoint store, so a run's commit, its session records, usage, events
and reusable view are one SQLite transaction, and a ``RunTracker`` over both.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from agentloom.crypto import EnvelopeCodec, LocalKeyring, fixed_scope
from agentloom.platform.redaction import Redactor
from agentloom.platform.store import PlatformStore
from agentloom.platform.store.session_commits import SessionCommits
from agentloom.platform.store.sqlite import embedded_items
from agentloom.platform.tracker import RunTracker
from agentloom.stores import layout
from agentloom.stores.layout import DATABASE as DATABASE
from agentloom.stores.layout import KEY_FILE as KEY_FILE
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.errors import ConfigError


@dataclass(frozen=True)
class Home:
    """The stores of one home, wired (``open_home``)."""

    checkpoints: SqliteCheckpointStore
    platform: PlatformStore
    commits: SessionCommits
    tracker: RunTracker

    def close(self) -> None:
        self.platform.close()
        self.checkpoints.close()


def open_home(home: Path, redactor: Redactor, *, reader: bool = False) -> Home:
    """``reader``: for a process that only reads (a full disk: ``stores.sqlite_connections``)."""
    checkpoints = open_checkpoint_store(home, reader=reader)
    platform = PlatformStore(embedded_items(home, reader=reader))  # sealed bodies
    commits = SessionCommits(platform, redactor=redactor)  # one transaction, one file
    checkpoints.attach(commits)
    tracker = RunTracker(platform, checkpoints, redactor=redactor, commits=commits)
    return Home(checkpoints, platform, commits, tracker)


def open_checkpoint_store(home: Path, *, reader: bool = False) -> SqliteCheckpointStore:
    """The embedded checkpoint store: ``home/agentloom.sqlite3`` (mode 0600, made so by
    ``agentloom.stores.layout.prepare`` before SQLite opens it), encrypted
    with the envelope codec under the local key file ``home/agentloom.key`` (created 0600
    on first use; ``ConfigError`` when it is unreadable, not ours or open to group or
    others). State written before encryption became the default is refused, naming the
    file: the codec reads no plaintext (docs/encryption.md, "Embedded mode")."""
    path, key = layout.prepare(home), home / KEY_FILE  # owner-only, never reopened
    if not key.exists() and _holds_runs(path):
        raise ConfigError(
            f"{path} holds runs stored without encryption (written before embedded mode "
            f"encrypted by default), and there is no key file {key}; encrypted and "
            f"plaintext runs are not mixed in one store: move {path} and its -wal/-shm "
            "files aside to start afresh (or read them with the earlier version)",
            details={"code": "unencrypted_state", "path": str(path)})
    codec = EnvelopeCodec(LocalKeyring(key), scope=fixed_scope(space="local"))
    return SqliteCheckpointStore(path, codec=codec, reader=reader)


def _holds_runs(path: Path) -> bool:
    """Whether the SQLite file at ``path`` holds checkpoint rows (read-only look)."""
    if not path.exists() or path.stat().st_size == 0:
        return False
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        return any(conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None
                   for table in ("heads", "log", "blobs") if table in tables)
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{path} is not a readable SQLite database: {exc}") from None
    finally:
        conn.close()
