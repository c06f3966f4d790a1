"""A ``read_result`` reference inherited from an earlier run of the same session resolves
(it was ``result_not_found``); a reference into another session's run never does."""

from __future__ import annotations

import json
import re
from typing import Any

from support.engine import build_engine, drive

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import Message, ModelRequest
from agentloom_runtime.testing import FunctionModel, ScriptedModel
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

BIG = "".join(f"row {i:06d}\n" for i in range(4_000))  # 44,000 characters


async def dump(context: ToolContext, arguments: dict[str, Any]) -> Any:
    return BIG


DUMP = ToolDefinition(name="dump", description="a large output",
                      parameters={"type": "object", "additionalProperties": False},
                      handler=dump, implementation_id="dump/v1", read_only=True)


def first_run(request: ModelRequest) -> Any:
    if request.purpose == "verification":
        return ScriptedModel.verdict("complete")
    if not any(m.get("role") == "tool" for m in request.messages):
        return ScriptedModel.call("dump", {}, id="d1")
    return ScriptedModel.answer("dumped")


async def earlier_run(store: InMemoryCheckpointStore, session: str
                      ) -> tuple[str, list[Message]]:
    """A completed run of ``session`` whose dump result was capped; (ref, its view)."""
    engine = build_engine(store=store, model=FunctionModel(first_run), tools=[DUMP])
    await engine.start("dump the table", labels={"session": session})
    assert (await drive(engine)).status == "completed"
    view = engine.main_view().messages
    capped = next(m for m in view if m.get("role") == "tool")
    match = re.search(r'ref "([^"]+)"', str(capped["content"]))
    assert match, capped["content"][-400:]
    return match[1], view


def reader(ref: str, pages: list[dict[str, Any]]) -> Any:
    def fn(request: ModelRequest) -> Any:
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        last = request.messages[-1]
        if last.get("role") != "tool":
            return ScriptedModel.call("read_result", {"ref": ref, "offset": 100}, id="r1")
        pages.append(json.loads(last["content"]))
        return ScriptedModel.answer("read it")
    return fn


async def later_run(store: InMemoryCheckpointStore, ref: str, history: list[Message],
                    labels: dict[str, str]) -> dict[str, Any]:
    pages: list[dict[str, Any]] = []
    engine = build_engine(store=store, model=FunctionModel(reader(ref, pages)), tools=[DUMP])
    await engine.start("read more of the table", history=history, labels=labels)
    assert (await drive(engine)).status == "completed"
    [page] = pages
    return page


async def test_a_reference_inherited_by_a_later_run_of_the_session_resolves() -> None:
    store = InMemoryCheckpointStore()
    ref, history = await earlier_run(store, "s1")
    page = await later_run(store, ref, history, {"session": "s1"})
    assert "error" not in page, page
    assert page["ref"] == ref and page["offset"] == 100 and page["total"] == len(BIG)
    assert page["text"] == BIG[100:100 + len(page["text"])] and page["text"]


async def test_a_reference_into_another_sessions_run_does_not_resolve() -> None:
    store = InMemoryCheckpointStore()
    ref, history = await earlier_run(store, "s1")
    for labels in ({"session": "s2"}, {}):
        page = await later_run(store, ref, history, labels)
        assert page["error"]["code"] == "result_not_found", page
        assert "row 000" not in json.dumps(page)
