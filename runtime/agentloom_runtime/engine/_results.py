"""Large tool results by reference (docs/contract.md#context).

A tool result longer than the model-visible cap is kept whole in its source record (the
store spills it to a blob when large); the view shows its head plus a reference
``<run>/<instance>#<seq>``, and ``read_result`` lets the model page through the rest.
A reference inherited through the session history (an earlier run of the same session)
resolves too; a reference to another session's run never does.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from agentloom_runtime.errors import ToolError
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

if TYPE_CHECKING:
    from ._context import StepContext

PAGE = 16_000
_REF = re.compile(r"^(?:(?P<run>[A-Za-z0-9._-]{1,128})/)?(?P<inst>[a-z0-9-]+)#(?P<seq>[0-9]+)$")


class ResultNotFound(ToolError):
    code = "result_not_found"


class ResultReader:
    """Reads back the full text of an earlier tool result of this run's instance, or of
    a run of the same session (history)."""

    def __init__(self, ctx: StepContext, instance: str) -> None:
        self._ctx = ctx
        self._instance = instance

    def read(self, ref: str, offset: int, limit: int) -> dict[str, Any]:
        match = _REF.match(ref)
        if match is None:
            raise ResultNotFound(f"no result {ref!r}")
        run = match["run"] or self._ctx.run_id
        instance, seq = match["inst"], int(match["seq"])
        if run == self._ctx.run_id:
            if instance != self._instance:
                raise ResultNotFound(f"no result {ref!r} in this instance")
            entries = self._ctx.journal.read(f"src:{instance}", seq - 1, 1)
        else:
            entries = self._read_session_run(run, instance, seq, ref)
        if not entries or entries[0].seq != seq or entries[0].body.get("kind") != "tool_result":
            raise ResultNotFound(f"no result {ref!r}")
        text = str(entries[0].body["message"].get("content") or "")
        end = min(len(text), offset + limit)
        return {"ref": ref, "offset": offset, "total": len(text), "text": text[offset:end],
                "next_offset": end if end < len(text) else None}

    def _read_session_run(self, run: str, instance: str, seq: int, ref: str) -> list[Any]:
        store = self._ctx.journal.store
        session = self._ctx.head["labels"].get("session")
        other = store.load_head(run)
        if session is None or other is None or instance != "main" \
                or other.body.get("labels", {}).get("session") != session:
            raise ResultNotFound(f"no result {ref!r} in this session")
        return store.read(run, f"src:{instance}", seq - 1, 1)


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
            "ref": {"type": "string", "pattern": _REF.pattern},
            "offset": {"type": "integer", "minimum": 0},
            "limit": {"type": "integer", "minimum": 1, "maximum": PAGE}},
            "required": ["ref"], "additionalProperties": False},
        handler=_read_result, implementation_id="read-result/v2", read_only=True,
        resume_inflight=True, before_plan=True)
