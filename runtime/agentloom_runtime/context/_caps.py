"""Capped copies of oversized values for what a model is shown (docs/contract.md#context).

A source record keeps every value whole; what a model is shown of a value longer than
``VIEW_CHARS`` is a capped copy: its head and a note saying how much was cut and where
the whole value is kept. One rule, used in two places:

- the model view (``manager.JournalContextManager``): an assistant message's content
  and tool-call arguments, a tool message's content (results are already capped with a
  ``read_result`` reference by the tool runtime; this catches what a hook left large).
  The instance's own inputs — its question and supplements — are shown whole;
- the history a new question inherits (``history.project_history``): every message,
  the earlier questions and supplements included, so no earlier value wedges the
  session's next question.

Capped arguments stay valid JSON: the longest strings inside them are cut, so the model
still sees the call's shape. ``capped`` is idempotent (a capped copy is within the cap),
so a view restored from a checkpoint equals the one that was built step by step.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from agentloom_runtime.contracts import Message

VIEW_CHARS = 24_000  # the same cap as a model-visible tool result (ToolRuntime)
VIEW_ROLES = ("assistant", "tool")  # in a run's own view, its inputs are shown whole
ALL_ROLES = ("assistant", "tool", "user", "system")
_MIN_PIECE = 64


def _note(cut: int, total: int, where: str) -> str:
    return (f"…[cut: {cut:,} of {total:,} characters are not shown here; the whole value "
            f"is kept in {where}]")


def cap_text(text: str, limit: int, where: str) -> str:
    """``text``, or its head plus a note, at most ``limit`` characters in all (when the
    note itself fits)."""
    if len(text) <= limit:
        return text
    note = _note(len(text), len(text), where)  # at least as long as the real one
    keep = max(0, limit - len(note))
    return text[:keep] + _note(len(text) - keep, len(text), where)


def _cut_strings(value: Any, piece: int, where: str) -> Any:
    if isinstance(value, str):
        return cap_text(value, piece, where) if len(value) > piece else value
    if isinstance(value, dict):
        return {k: _cut_strings(v, piece, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_strings(v, piece, where) for v in value]
    return value


def cap_value(value: Any, limit: int, where: str) -> Any:
    """A JSON value whose text is at most about ``limit`` characters: the strings inside
    are cut, halving their allowance until the whole fits (the shape stays)."""
    if len(json.dumps(value, ensure_ascii=False)) <= limit:
        return value
    piece = limit // 2
    while piece >= _MIN_PIECE:
        cut = _cut_strings(value, piece, where)
        if len(json.dumps(cut, ensure_ascii=False)) <= limit:
            return cut
        piece //= 2
    size = len(json.dumps(value, ensure_ascii=False))
    return {"_cut": _note(size, size, where)}


def cap_arguments(arguments: str, limit: int, where: str) -> str:
    """Tool-call arguments (JSON text) within ``limit`` characters, still JSON when they
    were (``cap_value``); text that is not JSON is cut as text."""
    if len(arguments) <= limit:
        return arguments
    try:
        value = json.loads(arguments)
    except ValueError:
        return cap_text(arguments, limit, where)
    return json.dumps(cap_value(value, limit, where), ensure_ascii=False)


def capped(message: Message, where: str, *, roles: Collection[str] = VIEW_ROLES,
           limit: int = VIEW_CHARS) -> Message:
    """``message`` itself when nothing in it is over ``limit``; else a copy with its
    content and tool-call arguments capped (only for messages of ``roles``)."""
    if message.get("role") not in roles:
        return message
    content = message.get("content")
    long_content = isinstance(content, str) and len(content) > limit
    calls = message.get("tool_calls") or ()
    long_calls = [i for i, c in enumerate(calls) if isinstance(c, dict) and len(
        str((c.get("function") or {}).get("arguments", ""))) > limit]
    if not long_content and not long_calls:
        return message
    copy = dict(message)
    if long_content:
        copy["content"] = cap_text(str(content), limit, where)
    if long_calls:
        copy["tool_calls"] = [
            {**c, "function": {**c["function"], "arguments": cap_arguments(
                str(c["function"].get("arguments", "")), limit, where)}}
            if i in long_calls else c for i, c in enumerate(calls)]
    return copy
