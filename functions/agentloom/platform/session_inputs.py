"""What the session service checks of a caller's input before it reads or writes
anything: the size of a question or supplement, an Idempotency-Key's form, an instance
filter, an events page's cursor."""

from __future__ import annotations

import re

from agentloom.platform.errors import Invalid, TooLarge

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
