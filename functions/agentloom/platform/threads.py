"""A protocol client's thread as a session: clients of AG-UI (and the like) name their
conversations themselves (``threadId``, often a UUID the client made up), so the
platform keeps one session per user, agent and thread id — the same thread id from
another user or for another agent is another session. The mapping is the
``thread#{agent}#{sha256}`` entry the session's creation writes in its transaction
(``store.sessions``), so two first requests for one thread make one session; deleting
the session deletes the entry, and the thread's next request starts a new session."""

from __future__ import annotations

from agentloom.platform.domain import Session
from agentloom.platform.errors import Conflict, Invalid, NotFound
from agentloom.platform.identity import Principal
from agentloom.platform.sessions import SessionService
from agentloom.platform.store import WriteConflict
from agentloom.platform.store.tenancy import secret_hash

MAX_THREAD_ID = 200


def thread_session(svc: SessionService, who: Principal, space_id: str, agent_id: str,
                   thread_id: str, *, title: str = "") -> Session:
    """``who``'s session for ``thread_id`` with the agent: found, or created (the
    agent's latest published version)."""
    thread = _thread_key(agent_id, thread_id)
    for _ in range(3):
        found = _found(svc, who, space_id, agent_id, thread)
        if found is not None:
            return found
        try:
            return svc.create_session(who, space_id, agent_id, title=title, thread=thread)
        except WriteConflict:  # a concurrent first request made it: read it
            continue
    raise Conflict("this thread's session kept changing; try again", code="thread_busy")


def find_thread(svc: SessionService, who: Principal, space_id: str, agent_id: str,
                thread_id: str) -> Session:
    """``who``'s session for ``thread_id`` with the agent (404 ``thread_not_found``)."""
    found = _found(svc, who, space_id, agent_id, _thread_key(agent_id, thread_id))
    if found is None:
        raise NotFound(f"thread {thread_id} not found", code="thread_not_found")
    return found


def _thread_key(agent_id: str, thread_id: str) -> str:
    if not thread_id or len(thread_id) > MAX_THREAD_ID or not thread_id.isprintable():
        raise Invalid(f"threadId: 1-{MAX_THREAD_ID} printable characters",
                      code="invalid_field",
                      details={"fields": [{"field": "threadId", "message": "1-200 printable "
                                           "characters"}]})
    return secret_hash(f"{agent_id}\n{thread_id}")


def _found(svc: SessionService, who: Principal, space_id: str, agent_id: str,
           thread: str) -> Session | None:
    session_id = svc.store.sessions.of_thread(who.user_id, agent_id, thread)
    if session_id is None:
        return None
    try:
        session = svc.session(who, session_id)
    except NotFound:  # deleted since the entry was read
        return None
    if session.space_id != space_id:
        raise NotFound(f"agent {agent_id} not found", code="agent_not_found")
    return session
