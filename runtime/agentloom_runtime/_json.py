"""JSON helpers used across the runtime: one place for the rules.

- ``canonical`` is the text we hash: sorted keys, no spaces, non-ASCII kept as is;
- ``digest`` is ``sha256:<hex>`` of that text (bindings, manifests, request identity);
- ``as_text`` is how a value is shown to a model or a person: strings as they are,
  anything else as compact JSON;
- ``storable`` makes text from a model or a tool safe to persist: lone surrogates
  (invalid Unicode a JSON decoder accepts) become U+FFFD;
- ``escaped_surrogates`` keeps them in a tool call's argument text as ``\\uXXXX``
  escapes instead (storable ASCII), so the tool runtime sees them and refuses the call
  (``has_surrogate``) rather than running it on a name with U+FFFD in it.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(value: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``value``."""
    return "sha256:" + hashlib.sha256(
        canonical(value).encode("utf-8", "surrogatepass")).hexdigest()


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def storable_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (cheap when there is none)."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def escaped_surrogates(text: str) -> str:
    """``text`` with every lone surrogate written as its JSON escape (``\\ud800``)."""
    if not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def has_surrogate(value: Any) -> bool:
    """Whether a decoded JSON value holds a lone surrogate in a string (keys included)."""
    if isinstance(value, str):
        return bool(_SURROGATE.search(value))
    if isinstance(value, dict):
        return any(has_surrogate(k) or has_surrogate(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(has_surrogate(v) for v in value)
    return False


def storable(value: Any) -> Any:
    """A JSON value whose strings (keys included) are all valid Unicode."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(k) if isinstance(k, str) else k: storable(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


def storable_message(message: Any) -> Any:
    """An assistant message (``ModelResponse.to_dict``) made storable: tool-call argument
    texts keep lone surrogates as escapes (``escaped_surrogates``), the rest as
    ``storable``."""
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(calls, list):
        return storable(message)
    kept = [{**c, "function": {**c["function"], "arguments": escaped_surrogates(
        c["function"]["arguments"])}} if isinstance(c, dict) and isinstance(
        c.get("function"), dict) and isinstance(c["function"].get("arguments"), str) else c
        for c in calls]
    return storable({**message, "tool_calls": kept})
