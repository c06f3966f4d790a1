"""What of an engine event may leave the process: an allow-list, never a deny-list.

Event payloads (``agentloom_runtime.events``) carry message text (``task``, ``content``,
``answer``), tool ``arguments`` and ``result``, and free-form ``message``/``reason``
strings that may quote either. Logs, span attributes and metrics only ever see the
identifiers and small enumerations named here; a new payload key stays private until
someone adds it on purpose.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SAFE_KEYS: frozenset[str] = frozenset({
    "run_id", "op_id", "operation_id", "request_id", "purpose", "instance", "name",
    "status", "code", "way_out", "execution", "verdict", "decision", "template",
    "hook_id", "version", "point", "kind", "error_type",
})
MAX_VALUE_CHARS = 120
# a log record's own attributes cannot be extra fields (logging raises KeyError)
RENAMED = {"name": "tool"}


def safe_fields(data: Mapping[str, Any]) -> dict[str, str | int | float | bool]:
    """The allow-listed scalar fields of ``data`` (strings capped; a tool's ``name`` as
    ``tool``); ``tool_calls`` (the names a model asked for) becomes their count."""
    out: dict[str, str | int | float | bool] = {}
    for key in SAFE_KEYS.intersection(data):
        value = data[key]
        shown = RENAMED.get(key, key)
        if isinstance(value, bool | int | float):
            out[shown] = value
        elif isinstance(value, str):
            out[shown] = value[:MAX_VALUE_CHARS]
    calls = data.get("tool_calls")
    if isinstance(calls, list | tuple):
        out["tool_calls"] = len(calls)
    return out
