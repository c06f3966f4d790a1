"""Sign-in to the console on ``agentloom serve``: a one-time login link.

``serve login --user NAME`` (or ``serve --login NAME``) issues a *link code*, a bearer
token labelled ``console login link`` that lives 10 minutes, and prints
``http://127.0.0.1:PORT/#login=CODE``: the code rides in the fragment, which a browser
never sends, and the console strips it from the address bar before it does anything
else. The console trades it once for a *console token* (``POST /console/session``, 12
hours, label ``console``): the code is revoked in the same step, so a second use of the
link is 401 ``login_link_invalid``. The console keeps its token in ``sessionStorage``
(the tab's life, never ``localStorage``) and revokes it on sign-out
(``DELETE /console/session``). Both routes belong to ``serve`` alone: on AWS the console
signs in through Cognito.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from agentloom.platform.domain import now
from agentloom.platform.errors import Unauthorized
from agentloom.platform.identity import BearerTokens

LINK_LABEL = "console login link"
LINK_TTL_S = 600.0
SESSION_LABEL = "console"
SESSION_TTL_S = 12 * 3600.0
SESSION_PATH = "/console/session"


def login_link(tokens: BearerTokens, base_url: str, user_id: str) -> str:
    _, code = tokens.issue(user_id, label=LINK_LABEL, ttl_seconds=LINK_TTL_S)
    return f"{base_url}/#login={code}"


class ConsoleLogins:
    """The exchange of link codes for console tokens, one at a time (a code is used
    once even when two tabs race with it)."""

    def __init__(self, tokens: BearerTokens) -> None:
        self.tokens = tokens
        self._lock = threading.Lock()

    def exchange(self, body: Mapping[str, Any]) -> dict[str, Any]:
        code = body.get("code")
        with self._lock:
            token = self.tokens.store.tokens.by_secret(code) if isinstance(code, str) \
                and len(code) <= 200 else None
            if token is None or token.label != LINK_LABEL or token.revoked or \
                    token.expires_at is None or token.expires_at <= now():
                raise Unauthorized(
                    "this login link was used already or has expired: print a new one "
                    "with 'bin/agentloom serve login --user NAME'",
                    code="login_link_invalid")
            self.tokens.revoke(token.user_id, token.token_id)
        session, secret = self.tokens.issue(token.user_id, label=SESSION_LABEL,
                                            ttl_seconds=SESSION_TTL_S)
        return {"token": secret, "user_id": token.user_id, "expires_at": session.expires_at}

    def sign_out(self, headers: Mapping[str, str]) -> None:
        """Revoke the console token the request carries (any other token is left alone:
        a pasted CLI token is the user's to revoke)."""
        who = self.tokens.authenticate(headers, {})
        secret = headers.get("authorization", "").partition(" ")[2].strip()
        token = self.tokens.store.tokens.by_secret(secret)
        if token is not None and token.label == SESSION_LABEL:
            self.tokens.revoke(who.user_id, token.token_id)
