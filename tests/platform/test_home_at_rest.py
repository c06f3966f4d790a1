"""Issue 17, "Data and state": an embedded home keeps no user content in clear. The
platform items in ``agentloom.sqlite3`` (session titles, agent prompts, a cancel's
reason, …) are sealed under the home's key file like the checkpoints; items written in
clear before stay readable; a key record written inside a checkpoint commit survives the
commit's rollback."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentloom.crypto import LocalKeyring
from agentloom.local.embedded import EmbeddedPlatform
from agentloom.platform.domain import Session, now
from agentloom.platform.store import ABSENT, PlatformStore, SqliteItemStore, put
from agentloom.platform.store.sqlite import KEYS_PK, SealedItemStore, embedded_items

from .conftest import ALICE, Model

Wait = Callable[..., Any]

PROMPT = "You answer about the-orange-lighthouse-prompt."
TITLE = "Plans for the-velvet-harbour-title"
REASON = "the-copper-kettle-reason: not needed any more"


def _raw(home: Path) -> bytes:
    """Every byte of the database and its WAL and shared-memory files."""
    return b"".join(p.read_bytes() for p in sorted(home.glob("agentloom.sqlite3*")))


def test_titles_prompts_and_cancel_reasons_are_sealed_in_the_home(
        platform: EmbeddedPlatform, model: Model, wait: Wait) -> None:
    space = platform.admin.create_space(ALICE, "Team")
    agent, _ = platform.admin.create_agent(ALICE, space.space_id, "Helper", {
        "prompt": PROMPT, "model": {"model": "test-model"}})
    platform.admin.publish(ALICE, space.space_id, agent.agent_id)
    session = platform.sessions.create_session(ALICE, space.space_id, agent.agent_id,
                                               title=TITLE)
    run, _ = platform.sessions.ask(ALICE, session.session_id, "Q slow the-amber-question")
    wait(lambda: "Q slow the-amber-question" in model.started, what="the model call")
    view = platform.sessions.cancel(ALICE, session.session_id, run.run_id, REASON)
    assert view.status == "cancelled" and view.error is not None
    # what was written reads back through the platform ...
    assert platform.sessions.session(ALICE, session.session_id).title == TITLE
    assert REASON in str(platform.sessions.run(ALICE, session.session_id, run.run_id).error)
    stored = _raw(platform.home)
    for text in (PROMPT, TITLE, REASON, "the-orange-lighthouse", "the-velvet-harbour",
                 "the-copper-kettle", "the-amber-question"):
        assert text.encode() not in stored, text


def test_platform_items_written_in_clear_before_stay_readable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    old = PlatformStore(SqliteItemStore(home / "agentloom.sqlite3"))  # before sealing
    session = Session(session_id="ses_old", space_id="spc_1", agent_id="agt_1", version=1,
                      user_id="alice", title=TITLE, created_at=now())
    old.sessions.create(session)
    old.close()
    store = PlatformStore(embedded_items(home))
    try:
        found = store.sessions.get("ses_old")
        assert found is not None and found.value.title == TITLE
        store.sessions.create(session.model_copy(update={"session_id": "ses_new"}))
        again = store.sessions.get("ses_new")
        assert again is not None and again.value.title == TITLE
    finally:
        store.close()
    conn = sqlite3.connect(home / "agentloom.sqlite3")
    bodies = dict(conn.execute("SELECT pk, body FROM platform_items WHERE sk = 'session'"))
    conn.close()
    assert TITLE in bodies["session#ses_old"]  # untouched until it is written again
    assert TITLE not in bodies["session#ses_new"]


def test_a_key_record_joined_to_a_rolled_back_commit_is_written_again(
        tmp_path: Path) -> None:
    """The first sealed write of a process inside a checkpoint commit carries the data
    key's record in that transaction; when the transaction rolls back, the next write
    carries it again, so nothing sealed is ever stored without its key record."""
    path = tmp_path / "agentloom.sqlite3"
    sealed = SealedItemStore(SqliteItemStore(path), LocalKeyring(tmp_path / "key"))
    store = PlatformStore(sealed)
    session = Session(session_id="ses_1", space_id="spc_1", agent_id="agt_1", version=1,
                      user_id="alice", title=TITLE, created_at=now())
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        store.items.join_writes([put("session#ses_1", "session", session, ABSENT)], conn)
        assert conn.execute("SELECT count(*) FROM platform_items WHERE pk = ?",
                            (KEYS_PK,)).fetchone()[0] == 1
        conn.execute("ROLLBACK")  # the commit failed: its key record went with it
        conn.execute("BEGIN IMMEDIATE")
        store.items.join_writes([put("session#ses_1", "session", session, ABSENT)], conn)
        conn.execute("COMMIT")
    finally:
        conn.close()
    reopened = PlatformStore(SealedItemStore(SqliteItemStore(path),
                                             LocalKeyring(tmp_path / "key")))
    try:
        found = reopened.sessions.get("ses_1")
        assert found is not None and found.value.title == TITLE
    finally:
        reopened.close()
        store.close()
    assert b"the-velvet-harbour" not in _raw(tmp_path)
