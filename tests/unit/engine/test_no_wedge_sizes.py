"""No size wedges a run (issue 9): a model answer, tool-call arguments or a tool result
of 100 KB, 1 MB or 4 MB is saved (the store spills it to blobs) and the run completes;
the head stays small. ``run_big`` is the scenario; tests/functional/test_no_wedge_stores
runs it on SQLite and DynamoDB."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.engine import build_engine, drive, make_snapshot

from agentloom_runtime.checkpoint import BaseCheckpointStore, InMemoryCheckpointStore
from agentloom_runtime.contracts import ModelRequest
from agentloom_runtime.engine import read_run
from agentloom_runtime.testing import FunctionModel, ScriptedModel
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

SIZES = {"100KB": 100_000, "1MB": 1_000_000, "4MB": 4_000_000}
# requests of several MB are estimated at millions of tokens: above the default cap
UNCAPPED = make_snapshot(limits={"max_tokens": 10**12})
KINDS = ("answer", "arguments", "result")
HEAD_BYTES = 2_048


def big_text(size: int) -> str:
    line = "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ é ü ✓\n"
    text = (line * (size // len(line.encode()) + 1)).encode()[:size]
    return text.decode("utf-8", "ignore")


def tools(received: list[str], result: str) -> list[ToolDefinition]:
    async def note(context: ToolContext, arguments: dict[str, Any]) -> Any:
        received.append(arguments["text"])
        return {"stored": len(arguments["text"])}

    async def dump(context: ToolContext, arguments: dict[str, Any]) -> Any:
        return result

    return [
        ToolDefinition(name="note", description="store a note",
                       parameters={"type": "object", "properties": {"text": {"type": "string"}},
                                   "required": ["text"], "additionalProperties": False},
                       handler=note, implementation_id="note/v1"),
        ToolDefinition(name="dump", description="a large output",
                       parameters={"type": "object", "additionalProperties": False},
                       handler=dump, implementation_id="dump/v1", read_only=True),
    ]


def model_for(kind: str, text: str) -> FunctionModel:
    def fn(request: ModelRequest) -> Any:
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        if kind == "answer":
            return ScriptedModel.answer(text)
        if any(m.get("role") == "tool" for m in request.messages):
            return ScriptedModel.answer("done")
        if kind == "arguments":
            return ScriptedModel.call("note", {"text": text}, id="n1")
        return ScriptedModel.call("dump", {}, id="d1")
    return FunctionModel(fn)


def head_bytes(store: BaseCheckpointStore, run_id: str) -> int:
    loaded = store.load_head(run_id)
    assert loaded is not None
    return len(json.dumps(loaded.body, separators=(",", ":")).encode())


async def run_big(store: BaseCheckpointStore, kind: str, size: int) -> str:
    """One run with ``size`` bytes of model answer / tool-call arguments / tool result;
    checks that it completed with nothing lost and a small head. Returns the run id."""
    text = big_text(size)
    received: list[str] = []
    model = model_for(kind, text)
    engine = build_engine(store=store, model=model, tools=tools(received, text),
                          snapshot=UNCAPPED)
    run_id = await engine.start(f"produce {size} bytes of {kind}")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("completed", None), engine.error
    outcome = engine.outcome()
    assert outcome is not None
    records = [e.body for e in store.read(run_id, "src:main")]
    if kind == "answer":
        assert outcome.answer == text, "the whole answer is kept"
    elif kind == "arguments":
        assert received == [text], "the tool got the whole arguments"
        call = next(r for r in records if r["kind"] == "assistant")["message"]["tool_calls"][0]
        assert json.loads(call["function"]["arguments"]) == {"text": text}
        sent = model.requests[1].messages
        assert any(m.get("tool_calls") for m in sent), "the call went back to the model"
    else:
        stored = next(r for r in records if r["kind"] == "tool_result")
        assert stored["message"]["content"] == text, "the whole result is stored once"
        shown = next(m for m in model.requests[1].messages if m.get("role") == "tool")
        assert len(shown["content"]) <= 24_000 and "read_result" in shown["content"]
    assert head_bytes(store, run_id) <= HEAD_BYTES
    summary = read_run(store, run_id)
    assert summary is not None and summary.status == "completed"
    return run_id


@pytest.mark.parametrize("size", list(SIZES.values()), ids=list(SIZES))
@pytest.mark.parametrize("kind", KINDS)
async def test_large_data_completes_in_memory_with_a_small_head(kind: str, size: int) -> None:
    await run_big(InMemoryCheckpointStore(), kind, size)


@pytest.mark.parametrize("size", list(SIZES.values()), ids=list(SIZES))
async def test_a_large_question_completes_with_a_small_head(size: int) -> None:
    store = InMemoryCheckpointStore()
    model = model_for("answer", "ok")
    engine = build_engine(store=store, model=model, snapshot=UNCAPPED)
    task = big_text(size)
    run_id = await engine.start(task)
    assert (await drive(engine)).status == "completed", engine.error
    assert model.requests[0].messages[-1]["content"] == task, "the model got all of it"
    assert head_bytes(store, run_id) <= HEAD_BYTES


async def test_a_long_review_reason_keeps_the_head_small() -> None:
    store = InMemoryCheckpointStore()

    def fn(request: ModelRequest) -> Any:
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete", "because " * 2_000)
        return ScriptedModel.answer("ok")

    engine = build_engine(store=store, model=FunctionModel(fn))
    run_id = await engine.start("a question")
    assert (await drive(engine)).status == "completed", engine.error
    assert head_bytes(store, run_id) <= HEAD_BYTES
