"""A tool result over the 24,000-character cap is kept whole; the model pages through it."""

from __future__ import annotations

import json
import re
from typing import Any

from support.engine import build_engine, drive, make_snapshot, records

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.testing import ScriptedModel
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

BIG = "".join(f"line {i:06d}\n" for i in range(20_000))  # 240,000 characters


async def dump(context: ToolContext, arguments: dict[str, Any]) -> Any:
    return BIG


DUMP = ToolDefinition(name="dump", description="a huge output",
                      parameters={"type": "object", "additionalProperties": False},
                      handler=dump, implementation_id="dump/v1")


async def test_large_result_is_kept_and_readable_page_by_page() -> None:
    store = InMemoryCheckpointStore()
    pages: list[str] = []

    def reader(request: ModelRequest) -> ModelResponse:
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        last = request.messages[-1]
        if last.get("role") == "tool" and last["tool_call_id"] == "d":
            ref, offset = found(r'ref "([^"]+)"', last["content"]), \
                int(found(r"offset (\d+)", last["content"]))
            pages.append(last["content"])
            return ScriptedModel.call("read_result", {"ref": ref, "offset": offset}, id="r0")
        data = json.loads(last["content"])
        assert "text" in data, data
        pages.append(data["text"])
        if data["next_offset"] is None:
            return ScriptedModel.answer("read it all")
        return ScriptedModel.call("read_result", {"ref": data["ref"],
                                                  "offset": data["next_offset"]},
                                  id=f"r{len(pages)}")

    model = ScriptedModel([ScriptedModel.call("dump", {}, id="d")]
                          + [reader] * 40)
    engine = build_engine(store=store, snapshot=make_snapshot(limits={"max_model_calls": 60}),
                          model=model, tools=[DUMP])
    run_id = await engine.start("read the dump")
    assert (await drive(engine, 200)).status == "completed"
    assert len(pages) == 1 + 14  # the capped head, then 14 pages of at most 16,000
    first = pages[0]
    assert len(first) <= 24_000 and "read_result" in first
    head = first[:first.index("\n…[truncated")]
    assert head + "".join(pages[1:]) == BIG, "nothing the tool returned is lost"
    record = next(r for r in records(store, run_id) if r.get("name") == "dump")
    assert record["message"]["content"] == BIG, "the full text is stored once, in the record"
    view = [e.body for e in store.read(run_id, "view:main") if e.body.get("of") == record_seq(
        store, run_id)]
    assert len(view[0]["message"]["content"]) <= 24_000, "the view keeps only the capped copy"


def record_seq(store: InMemoryCheckpointStore, run_id: str) -> int:
    return next(e.seq for e in store.read(run_id, "src:main") if e.body.get("name") == "dump")


def found(pattern: str, text: str) -> str:
    match = re.search(pattern, text)
    assert match is not None, f"{pattern!r} not in {text[:200]!r}"
    return match.group(1)


async def test_read_result_refuses_other_instances_and_bad_refs() -> None:
    model = ScriptedModel([
        ScriptedModel.call("read_result", {"ref": "sub-1#2"}, id="a"),
        ScriptedModel.call("read_result", {"ref": "main#1"}, id="b"),
        ScriptedModel.answer("ok"), ScriptedModel.verdict("complete")])
    store = InMemoryCheckpointStore()
    engine = build_engine(store=store, model=model)
    run_id = await engine.start("q")
    await drive(engine, 20)
    results = records(store, run_id, "tool_result")
    assert all("result_not_found" in r["message"]["content"] for r in results)
