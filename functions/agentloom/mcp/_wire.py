"""``Wire``: what the HTTP layer of one MCP session saw — without the SDK or httpx2,
so ``service`` can hold one before the SDK is loaded (``_http`` fills it in)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

SESSION_HEADER = "mcp-session-id"


@dataclass
class Wire:
    """``limit``: bytes one response (or one server-sent event) may carry. The rest is
    what the SDK may report only as a closed stream or a generic error."""

    limit: int
    over: int | None = None  # bytes seen when a response passed ``limit``
    refused: int | None = None  # 401 or 403: the credential was refused
    session_lost: bool = False  # a POST with a session id answered 404

    def saw(self, method: str, headers: Mapping[str, str], status: int) -> None:
        if status in (401, 403):
            self.refused = status
        if status == 404 and method == "POST" and SESSION_HEADER in headers:
            self.session_lost = True  # the server forgot the session: it did not run it
