"""Embedded mode encrypts by default: a CLI-style run through ``LocalApp`` leaves no
question, message text, tool argument or tool result in the SQLite file (nor in its
WAL); the key file is created 0600, a key file open to others is refused, and state
written before encryption was the default is refused naming the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentloom.local.app import LocalApp, open_checkpoint_store
from agentloom.local.embedded import EmbeddedPlatform
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.errors import ConfigError

from .test_local_sessions import asker, snapshot

QUESTION = "Question Q about the-purple-walrus-question"
CONTENT = "tool-argument: the-secret-file-content-7731"
PATH = "notes/walrus-memo.txt"


def raw(home: Path) -> bytes:
    """Every byte of the database and its WAL / shared-memory files."""
    return b"".join(p.read_bytes() for p in sorted(home.glob("agentloom.sqlite3*")))


async def test_a_cli_run_leaves_no_plaintext_in_the_sqlite_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    app = LocalApp(home)
    model = asker({"Q": [("workspace_write", {"path": PATH, "content": CONTENT}),
                         ("workspace_read", {"path": PATH})]})
    try:
        result = await app.run(snapshot(tools=["workspace"]), model, QUESTION, session="s")
        assert result.status == "completed"
        # what the run saw is stored (readable through the codec) ...
        bodies = [str(e.body) for e in app.store.read(result.run_id, "src:main")]
        assert any(CONTENT in body for body in bodies)  # the argument and the read result
        assert any("Answer Q" in body for body in bodies)
        stored = raw(home)
    finally:
        app.close()
    stored += raw(home)  # and after the checkpoint of the WAL at close
    for secret in (QUESTION, "the-purple-walrus", CONTENT, "secret-file-content",
                   "walrus-memo", "Answer Q"):
        assert secret.encode() not in stored, secret
    key = home / "agentloom.key"
    assert oct(key.stat().st_mode & 0o777) == "0o600" and key.stat().st_size == 32
    assert oct((home / "agentloom.sqlite3").stat().st_mode & 0o777) == "0o600"
    # reopened (a new process): the same key file reads the run
    again = LocalApp(home)
    try:
        assert again.summary(result.run_id).status == "completed"
    finally:
        again.close()


def test_a_key_file_open_to_others_is_refused(tmp_path: Path) -> None:
    store = open_checkpoint_store(tmp_path)
    store.close()
    os.chmod(tmp_path / "agentloom.key", 0o644)
    with pytest.raises(ConfigError, match=r"agentloom.key is accessible by group or "
                       r"others .*chmod 600"):
        open_checkpoint_store(tmp_path)
    os.chmod(tmp_path / "agentloom.key", 0o000)
    if os.geteuid() != 0:
        with pytest.raises(ConfigError, match=r"agentloom.key: cannot open it"):
            open_checkpoint_store(tmp_path)


def test_state_written_without_encryption_is_refused_naming_the_file(
        tmp_path: Path) -> None:
    plain = SqliteCheckpointStore(tmp_path / "agentloom.sqlite3")
    plain.put_blob("r", b"old plaintext run")
    plain.close()
    with pytest.raises(ConfigError) as caught:
        open_checkpoint_store(tmp_path)
    assert str(tmp_path / "agentloom.sqlite3") in caught.value.message
    assert "without encryption" in caught.value.message
    assert caught.value.details["code"] == "unencrypted_state"
    assert not (tmp_path / "agentloom.key").exists()  # nothing was created
    with pytest.raises(ConfigError, match="without encryption"):
        EmbeddedPlatform.open(tmp_path)


def test_an_empty_database_file_is_not_old_state(tmp_path: Path) -> None:
    (tmp_path / "agentloom.sqlite3").touch(mode=0o600)
    open_checkpoint_store(tmp_path).close()
    assert (tmp_path / "agentloom.key").exists()

