"""Large tool results by reference (beyond seed 002 §12: "通用大结果引用与回读").

A tool result longer than the model-visible cap is kept whole in its source record (a
blob when large); the view shows its head plus a reference, and ``read_result`` lets the
model page through the rest. Nothing the tool returned is lost to the cap.
"""

from __future__ import annotations

import json
from typing import Any

from agentloom_runtime.errors import ToolError
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

from .journal import Journal

PAGE = 16_000


class ResultNotFound(ToolError):
    code = "result_not_found"


def render(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def reference_marker(ref: str, shown: int, total: int) -> str:
    return (f"\n…[truncated: showing {shown} of {total} characters. The full result is "
            f"kept: call read_result with ref \"{ref}\" and offset {shown} to read on]")


def cap_with_reference(text: str, limit: int, ref: str) -> str:
    if len(text) <= limit:
        return text
    keep = limit - len(reference_marker(ref, limit, len(text)))
    return text[:keep] + reference_marker(ref, keep, len(text))


class ResultReader:
    """Reads back the full raw result of an earlier tool call of the same instance."""

    def __init__(self, journal: Journal, instance: str) -> None:
        self._journal = journal
        self._instance = instance

    def read(self, ref: str, offset: int, limit: int) -> dict[str, Any]:
        instance, _, seq_text = ref.partition("#")
        if instance != self._instance or not seq_text.isdigit():
            raise ResultNotFound(f"no result {ref!r} in this instance")
        entries = self._journal.read(f"src:{instance}", int(seq_text) - 1, 1)
        if not entries or entries[0].seq != int(seq_text) or \
                entries[0].body.get("kind") != "tool_result" or "raw" not in entries[0].body:
            raise ResultNotFound(f"no result {ref!r} in this instance")
        raw = self._journal.load_value(entries[0].body["raw"])
        text = render(raw.get("value") if raw.get("ok") else raw.get("error"))
        end = min(len(text), offset + limit)
        return {"ref": ref, "offset": offset, "total": len(text), "text": text[offset:end],
                "next_offset": end if end < len(text) else None}


async def _read_result(context: ToolContext, arguments: dict[str, Any]) -> Any:
    reader: ResultReader = context.services["results"]
    return reader.read(arguments["ref"], arguments.get("offset", 0),
                       arguments.get("limit", PAGE))


def read_result_tool() -> ToolDefinition:
    return ToolDefinition(
        name="read_result",
        description="Read more of an earlier tool result that was truncated. Give the ref "
                    "from the truncation note and the offset to continue from.",
        parameters={"type": "object", "properties": {
            "ref": {"type": "string", "pattern": "^[a-z0-9-]+#[0-9]+$"},
            "offset": {"type": "integer", "minimum": 0},
            "limit": {"type": "integer", "minimum": 1, "maximum": PAGE}},
            "required": ["ref"], "additionalProperties": False},
        handler=_read_result, implementation_id="read-result/v1", read_only=True,
        resume_inflight=True, before_plan=True)
