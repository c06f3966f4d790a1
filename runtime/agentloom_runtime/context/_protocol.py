"""Chat-protocol helpers shared by the policies and the history projection.

A view is a list of OpenAI chat messages. Keys starting with ``_`` (``_seq``, ``_pin``,
``_summary``, ``_covers``) are runtime annotations: they are kept in checkpoints and
never sent to a model (``strip_private``).

The protocol rules every view obeys:
- a ``tool`` message answers a call of the assistant message that opened its group;
- nothing else (no user, no system, no other assistant message) sits between an
  assistant message with ``tool_calls`` and the results of those calls;
- only the last group of a view may still wait for results (pending tools).

Capped copies of oversized values for what a model is shown (docs/contract.md#context):
a source record keeps every value whole; what a model is shown of a value longer than
``VIEW_CHARS`` is its head and a note saying how much was cut and where the whole value
is kept (``capped``). One rule, used in two places: the model view
(``manager.JournalContextManager``: assistant content and tool-call arguments, tool
messages; the instance's own question and supplements are shown whole) and the history
a new question inherits (``history.project_history``: every message, so no earlier value
wedges the session's next question). Capped arguments stay valid JSON (the longest
strings inside are cut); ``capped`` is idempotent, so a view restored from a checkpoint
equals the one built step by step.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any, Literal, NamedTuple

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

PRIVATE_PREFIX = "_"

UnitKind = Literal["head", "pinned", "group", "pending", "single", "orphan"]


def strip_private(message: Message) -> Message:
    """The message without ``_``-prefixed keys (the same object when it has none)."""
    for key in message:
        if key.startswith(PRIVATE_PREFIX):
            return {k: v for k, v in message.items() if not k.startswith(PRIVATE_PREFIX)}
    return message


def public_messages(messages: Sequence[Message]) -> list[Message]:
    """What may be sent to a model: every message without its runtime annotations."""
    return [strip_private(m) for m in messages]


def call_ids(message: Message) -> list[str]:
    """The tool-call ids an assistant message opens (empty for any other message)."""
    if message.get("role") != "assistant":
        return []
    return [str(c.get("id")) for c in message.get("tool_calls") or () if isinstance(c, dict)]


def protocol_violations(messages: Sequence[Message], *,
                        allow_pending_tail: bool = True) -> list[str]:
    """Every breach of the chat protocol in ``messages`` (empty when the view is valid)."""
    problems: list[str] = []
    open_ids: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id in open_ids:
                open_ids.discard(str(call_id))
            else:
                problems.append(f"#{index}: tool message {call_id!r} answers no open call")
            continue
        if open_ids:
            problems.append(f"#{index}: {role} message inside an unanswered call group")
            open_ids = set()
        if message.get("tool_calls"):
            ids = call_ids(message)
            if len(set(ids)) != len(ids):
                problems.append(f"#{index}: duplicate tool-call ids")
            open_ids = set(ids)
    if open_ids and not allow_pending_tail:
        problems.append("the last call group has unanswered calls")
    return problems


class Unit(NamedTuple):
    """A run of messages that is kept or summarised as a whole: ``[start, end)``. (A
    named tuple: a view of 5,000 messages has thousands of units, built on every
    compaction attempt; a frozen dataclass costs three times as much to build.)"""

    start: int
    end: int
    kind: UnitKind


def split_units(messages: Sequence[Message], pinned: frozenset[int]) -> list[Unit]:
    """Cut a view into units: the leading system messages (``head``), pinned messages,
    complete call groups, the trailing incomplete group (``pending``), single messages,
    and ``orphan`` units (a stray tool message or an interrupted group) that may be
    summarised but never kept verbatim."""
    units: list[Unit] = []
    add = units.append
    n = len(messages)
    i = 0
    while i < n and messages[i].get("role") == "system":
        i += 1
    if i:
        add(Unit(0, i, "head"))
    while i < n:
        message = messages[i]
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            ids = call_ids(message)
            if ids:
                waiting = set(ids)  # inlined _group_end: this loop runs per message
                end = i + 1
                while end < n and waiting and messages[end].get("role") == "tool":
                    call_id = messages[end].get("tool_call_id")
                    if call_id not in waiting:
                        break
                    waiting.discard(str(call_id))
                    end += 1
                add(Unit(i, end, "pending" if waiting and end == n
                         else "orphan" if waiting else "group"))
                i = end
                continue
        if role == "tool":
            add(Unit(i, i + 1, "orphan"))
        else:
            add(Unit(i, i + 1, "pinned" if i in pinned else "single"))
        i += 1
    return units


def content_text(content: Any) -> str:
    """The text of a message ``content`` (a string, a list of parts, or None)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            else:
                parts.append(dumps(part))
        return "\n".join(parts)
    return dumps(content)


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
# The C encoder ``JSONEncoder.encode`` builds on every call, built once with the same
# options but without the circular-reference markers (a dict shared between threads must
# not look circular). None where the C accelerator is missing.
_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
_FAST_ENCODE: Any = (None if _MAKE_ENCODER is None else _MAKE_ENCODER(
    None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False,
    True))


def dumps(value: Any) -> str:
    """Compact JSON text: ``json.dumps(value, ensure_ascii=False, separators=(",", ":"),
    default=str)``, without building an encoder per call. A value the shared C encoder
    fails on (a circular structure, a failing ``default``) is encoded again by the
    checked encoder, which raises its own error."""
    if _FAST_ENCODE is not None:
        try:
            return "".join(_FAST_ENCODE(value, 0))
        except Exception:  # the checked encoder below raises the real error
            pass
    return _ENCODER.encode(value)


def to_ranges(values: Sequence[int]) -> list[list[int]]:
    """``[1, 2, 3, 7, 9, 10]`` → ``[[1, 3], [7, 7], [9, 10]]`` (sorted, deduplicated)."""
    ranges: list[list[int]] = []
    for value in sorted(set(values)):
        if ranges and ranges[-1][1] == value - 1:
            ranges[-1][1] = value
        else:
            ranges.append([value, value])
    return ranges


def from_ranges(ranges: Sequence[Sequence[int]]) -> list[int]:
    out: list[int] = []
    for low, high in ranges:
        out.extend(range(int(low), int(high) + 1))
    return out


def chunk_text(text: str, size: int) -> list[str]:
    """Cut ``text`` into ordered pieces of at most ``size`` characters (``size`` ≥ 1),
    preferring to cut after a space near the limit. ``"".join(pieces) == text``."""
    if len(text) <= size:
        return [text]
    out = []
    start = 0
    while len(text) - start > size:
        cut = start + size
        space = text.rfind(" ", max(start + 1, cut - 1_000), cut)
        cut = space + 1 if space > start else cut
        out.append(text[start:cut])
        start = cut
    out.append(text[start:])
    return out


def merge_ranges(ranges: Sequence[Sequence[int]]) -> list[list[int]]:
    """Union of inclusive integer ranges, sorted and coalesced."""
    out: list[list[int]] = []
    for low, high in sorted((int(r[0]), int(r[1])) for r in ranges):
        if out and low <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], high)
        else:
            out.append([low, high])
    return out
