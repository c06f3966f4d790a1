"""JSON helpers used across the runtime: one place for the rules.

- ``canonical`` is the text we hash: sorted keys, no spaces, non-ASCII kept as is;
- ``digest`` is ``sha256:<hex>`` of that text (bindings, manifests, request identity);
- ``as_text`` is how a value is shown to a model or a person: strings as they are,
  anything else as compact JSON;
- ``storable`` makes text from a model or a tool safe to persist: lone surrogates
  (invalid Unicode a JSON decoder accepts) become U+FFFD.
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
