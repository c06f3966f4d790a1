"""Which session (A2A context) a message goes to, and the key that makes its retry start
no second run.

A message with a ``contextId`` goes to that session: the caller's own, with the same
agent (``SessionService.session``; anything else is not found). A first message (no
``contextId``) gets a new session, and its ``messageId`` is claimed for it: one item
``user#{user}`` / ``a2a#{agent}#{sha256 of the messageId}`` → ``{"session_id"}``,
written only if absent. A retry of that message finds the claim and goes to the same
session; of two concurrent first sends, the one whose claim lost takes the winner's
session (its own empty session is deleted). Either way the question is asked with the
Idempotency-Key ``a2a-{sha256 of the messageId}``, so the session's idempotency (24
hours) returns the run the first send started.
"""

from __future__ import annotations

import contextlib
import hashlib

from pydantic import BaseModel, ConfigDict

from agentloom.platform.domain import Session, now
from agentloom.platform.errors import NotFound
from agentloom.platform.identity import Principal
from agentloom.platform.sessions import SessionService
from agentloom.platform.store import ABSENT, WriteConflict, put


class ContextClaim(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format: int = 1
    session_id: str
    at: float


def digest(message_id: str) -> str:
    return hashlib.sha256(message_id.encode("utf-8", "surrogatepass")).hexdigest()


def idempotency_key(message_id: str) -> str:
    return f"a2a-{digest(message_id)}"


def own_context(sessions: SessionService, who: Principal, agent_id: str,
                context_id: str) -> Session:
    session = sessions.session(who, context_id)
    if session.agent_id != agent_id:
        raise NotFound(f"session {context_id} not found", code="session_not_found")
    return session


def first_context(sessions: SessionService, who: Principal, space_id: str, agent_id: str,
                  message_id: str) -> Session:
    """The session of a first message: the one its ``messageId`` claimed, or a new one."""
    items = sessions.store.items
    pk, sk = f"user#{who.user_id}", f"a2a#{agent_id}#{digest(message_id)}"
    for _ in range(3):
        found = items.get(pk, sk, ContextClaim)
        expect = ABSENT
        if found is not None:
            try:
                return own_context(sessions, who, agent_id, found.value.session_id)
            except NotFound:  # deleted since: claim the messageId anew
                expect = found.version
        session = sessions.create_session(who, space_id, agent_id, title=_title(message_id))
        try:
            items.transact([put(pk, sk, ContextClaim(session_id=session.session_id,
                                                     at=now()), expect)])
            return session
        except WriteConflict:  # a concurrent send of the same message won: use its session
            _discard(sessions, who, session)
    raise NotFound("the context of this message could not be settled; send it again",
                   code="context_not_settled")


def _discard(sessions: SessionService, who: Principal, session: Session) -> None:
    with contextlib.suppress(Exception):  # an empty session left behind is harmless
        sessions.teardown.delete(who, session.session_id)


def _title(message_id: str) -> str:
    shown = message_id if message_id.isprintable() else digest(message_id)
    return f"A2A {shown[:80]}"
