"""Who may do what, and what they may send: the one place every service asks.

Roles rank ``member`` < ``admin`` < ``owner``. A space and everything in it is visible
to its members only: to anyone else it does not exist (404, the same answer as for an
id that was never issued). A member whose role is too low gets 403. Session content
(runs, messages, events, run detail) belongs to the session's creator alone, even when
the agent is shared in the space: to other members a session is 404 too. Operators
(admins and owners) see the space's run index (status, no content) and may cancel runs.

And what a caller may send, checked before anything is read or written: the size of a
question or supplement, an Idempotency-Key's form, an instance filter, an events page's
cursor.
"""

from __future__ import annotations

import re

from agentloom.platform.domain import RANK, Member, Role, Session
from agentloom.platform.errors import Forbidden, Invalid, NotFound, TooLarge
from agentloom.platform.identity import Principal
from agentloom.platform.store import PlatformStore

MAX_QUESTION_CHARS = 100_000
PAGE_CHARS = 4_000_000  # a page stops early past this much content (Lambda: 6 MB)
MAX_WAIT_S = 20.0  # API Gateway's integration timeout is 29 s
IDEMPOTENCY_TTL_S = 24 * 3600
IDEMPOTENCY_KEY = re.compile(r"[!-~]{1,200}")
INSTANCE_PATTERN = r"^(main|sub-[0-9]{1,3}|[A-Za-z0-9][A-Za-z0-9_.-]{0,63})$"
INSTANCE = re.compile(INSTANCE_PATTERN)


def check_event_cursor(after: int, wait: float, limit: int) -> None:
    """An events page's arguments, each refused by its own name."""
    bad = [{"field": field, "message": message} for field, ok, message in (
        ("after", after >= 0, "an event's seq (an integer >= 0)"),
        ("wait", 0 <= wait <= MAX_WAIT_S, f"seconds, 0 to {MAX_WAIT_S:g}"),
        ("limit", 1 <= limit <= 500, "1 to 500")) if not ok]
    if bad:
        raise Invalid(f"{bad[0]['field']}: {bad[0]['message']}", code="invalid_field",
                      details={"fields": bad})


def check_text(value: str, what: str, limit: int) -> str:
    if not value.strip():
        raise Invalid(f"{what} is empty", code="invalid_field",
                      details={"fields": [{"field": what, "message": "empty"}]})
    if len(value) > limit:
        raise TooLarge(f"the {what} has {len(value):,} characters; the limit is {limit:,}. "
                       "Put large material in a workspace file and ask about it instead.",
                       code="input_too_large")
    return value

_ID = re.compile(r"[a-z]{3}_[0-9a-f]{20}")


def check_id(value: str, prefix: str, what: str) -> str:
    """An id this platform issued, or 404 (a malformed id names nothing)."""
    if not (_ID.fullmatch(value) and value.startswith(prefix + "_")):
        raise NotFound(f"{what} {value[:80]!r} not found", code=f"{what}_not_found")
    return value


def member_of(store: PlatformStore, who: Principal, space_id: str,
              role: Role = "member") -> Member:
    check_id(space_id, "spc", "space")
    member = store.spaces.member(space_id, who.user_id)
    if member is None:
        raise NotFound(f"space {space_id} not found", code="space_not_found")
    if RANK[member.role] < RANK[role]:
        raise Forbidden(f"this needs the {role} role in space {space_id}; you are "
                        f"{member.role}", code="role_required", details={"role": role})
    return member


def own_session(store: PlatformStore, who: Principal, session_id: str) -> Session:
    """The caller's own session in a space they still belong to; 404 otherwise."""
    check_id(session_id, "ses", "session")
    found = store.sessions.get(session_id)
    if found is None or found.value.user_id != who.user_id \
            or store.spaces.member(found.value.space_id, who.user_id) is None:
        raise NotFound(f"session {session_id} not found", code="session_not_found")
    return found.value
