"""Every call the CLI makes on the platform store of its state directory, in one place:
the CLI's sessions, a session's runs, one run, and a new session. (The store is the one
``LocalApp.tracker`` holds; its sessions are those of the CLI's user, ``LOCAL_USER``.)
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentloom.platform.domain import Run, Session
    from agentloom.platform.store import PlatformStore


def _user() -> str:
    from agentloom.local.app import LOCAL_USER

    return LOCAL_USER


def sessions(store: PlatformStore) -> list[Session]:
    """The CLI's sessions, oldest first (in every space its agent files name)."""
    found = []
    for ref in store.items.query_raw(f"user#{_user()}", "session#"):
        item = store.sessions.get(str(json.loads(ref.text)["session_id"]))
        if item is not None:
            found.append(item.value)
    return sorted(found, key=lambda s: (s.created_at, s.session_id))


def session(store: PlatformStore, session_id: str) -> Session | None:
    item = store.sessions.get(session_id)
    return None if item is None else item.value


def runs(store: PlatformStore, session_id: str) -> list[Run]:
    """The session's runs in the order they were asked."""
    return sorted(store.runs.of_session(session_id), key=lambda r: (r.created_at, r.run_id))


def run(store: PlatformStore, run_id: str) -> Run | None:
    item = store.runs.find(run_id)
    return None if item is None else item.value


def create_session(store: PlatformStore, session_id: str, *, space_id: str, agent_id: str,
                   version: int, title: str) -> Session:
    """A new session of the CLI's user; ``WriteConflict`` when the id is taken."""
    from agentloom.platform.domain import Session, now

    made = Session(session_id=session_id, space_id=space_id, agent_id=agent_id,
                   version=version, user_id=_user(), title=title, created_at=now())
    store.sessions.create(made)
    return made
