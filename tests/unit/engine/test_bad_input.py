"""Bad input: malformed model responses, duplicate call ids, invalid arguments, unknown
tools. Each gives the typed error or failure result of docs/contract.md#loop-order; nothing
stored is lost."""

from __future__ import annotations

import asyncio
import json

import pytest
from support.engine import SideEffects, build_engine, drive, records, saved_head

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import ModelRequest, ModelResponse, ToolCall
from agentloom_runtime.engine import read_run
from agentloom_runtime.errors import CheckpointConflict, ModelResponseError, ResumeMismatch
from agentloom_runtime.testing import FunctionModel, ScriptedModel
from agentloom_runtime.testing.keyed import KeyedScriptModel


async def test_malformed_response_blocks_and_keeps_records() -> None:
    store = InMemoryCheckpointStore()
    model = ScriptedModel([ModelResponseError("choices[0].message is missing")])
    engine = build_engine(store=store, model=model, tools=SideEffects().tools())
    run_id = await engine.start("hello")
    before = store.read(run_id, "src:main")
    result = await engine.step()
    assert (result.status, result.error_code) == ("blocked", "model_response_invalid")
    assert store.read(run_id, "src:main") == before
    assert saved_head(store, run_id)["op"] is None, \
        "no response exists, so nothing is of unknown outcome"
    # resume: the call is simply made again
    engine2 = build_engine(store=store, run_id=run_id, tools=SideEffects().tools(),
                           model=ScriptedModel([ScriptedModel.answer("hi"),
                                                ScriptedModel.verdict("complete")]))
    await engine2.begin_execution()
    assert (await drive(engine2)).status == "completed"


async def test_resume_with_another_model_is_refused() -> None:
    store = InMemoryCheckpointStore()
    engine = build_engine(store=store, model=ScriptedModel(), tools=SideEffects().tools())
    run_id = await engine.start("hello")
    with pytest.raises(ResumeMismatch, match="model"):
        build_engine(store=store, run_id=run_id, tools=SideEffects().tools(),
                     model=KeyedScriptModel([ScriptedModel.answer("another model")]))
    with pytest.raises(ResumeMismatch, match="tools"):
        build_engine(store=store, run_id=run_id, model=ScriptedModel(),
                     tools=SideEffects().tools()[:1])


async def test_duplicate_call_ids_are_rewritten_in_the_view() -> None:
    dup = ModelResponse(tool_calls=(ToolCall("x", "count_words", '{"text": "a"}'),
                                    ToolCall("x", "count_words", '{"text": "b"}')))
    store = InMemoryCheckpointStore()
    # unvalidated: the gateway refuses a message that repeats an id; the engine's own
    # rewrite is what is tested
    engine = build_engine(store=store, model=ScriptedModel([dup], validate=False),
                          tools=SideEffects().tools())
    run_id = await engine.start("hello")
    result = await engine.step()
    assert (result.status, result.kind) == ("running", "action")
    await engine.step()
    await engine.step()
    view = [e.body for e in store.read(run_id, "view:main")]
    sent = next(v["message"] for v in view if "message" in v and
                v["message"].get("tool_calls"))
    ids = [c["id"] for c in sent["tool_calls"]]
    assert ids[0] == "x" and ids[1] != "x", "the repeated id is rewritten for the model"
    answers = [v["message"]["tool_call_id"] for v in view if "message" in v
               and v["message"].get("role") == "tool"]
    assert answers == ids
    raw = records(store, run_id, "assistant")
    assert [c["id"] for c in raw[0]["message"]["tool_calls"]] == ["x", "x"], "fact kept"


@pytest.mark.parametrize(("name", "arguments", "code"), [
    ("count_words", '{"text": 3}', "tool_arguments_invalid"),
    ("count_words", "{not json", "tool_arguments_invalid"),
    ("count_words", "[1, 2]", "tool_arguments_invalid"),
    ("no_such_tool", "{}", "tool_not_found"),
])
async def test_bad_tool_calls_become_failure_results(name: str, arguments: str,
                                                     code: str) -> None:
    store = InMemoryCheckpointStore()
    # an unvalidating gateway, so the runtime's own checks are what is tested
    model = ScriptedModel([
        ModelResponse(tool_calls=(ToolCall("c1", name, arguments),)),
        ScriptedModel.answer("I could not do it."),
        ScriptedModel.verdict("complete"),
    ], validate=False)
    engine = build_engine(store=store, model=model, tools=SideEffects().tools())
    run_id = await engine.start("hello")
    assert (await drive(engine)).status == "completed"
    results = records(store, run_id, "tool_result")
    assert results[0]["status"] == "error"
    assert json.loads(results[0]["message"]["content"])["error"]["code"] == code
    # the model saw the failure in its next request
    assert any(m.get("role") == "tool" and code in m["content"]
               for m in model.requests[1].messages)


async def test_concurrent_steps_exactly_one_commits() -> None:
    store = InMemoryCheckpointStore()

    keyed = KeyedScriptModel([ScriptedModel.answer("a")])

    async def slowly(request: ModelRequest) -> ModelResponse:  # both steps are in flight
        await asyncio.sleep(0.01)
        return await keyed.invoke(request)

    run_id = await build_engine(store=store, model=FunctionModel(slowly),
                                tools=SideEffects().tools()).start("hello")
    version = read_version(store, run_id)
    a, b = (build_engine(store=store, run_id=run_id, model=FunctionModel(slowly),
                         tools=SideEffects().tools()) for _ in range(2))
    results = await asyncio.gather(a.step(), b.step(), return_exceptions=True)
    conflicts = [r for r in results if isinstance(r, CheckpointConflict)]
    steps = [r for r in results if not isinstance(r, BaseException)]
    assert len(conflicts) == 1 and len(steps) == 1
    assert read_version(store, run_id) == version + 2  # sent + result, once


async def test_stale_engine_refuses_to_step_again() -> None:
    store = InMemoryCheckpointStore()
    engine = build_engine(store=store, model=KeyedScriptModel([ScriptedModel.answer("a")]),
                          tools=SideEffects().tools())
    run_id = await engine.start("hello")
    other = build_engine(store=store, run_id=run_id, tools=SideEffects().tools(),
                         model=KeyedScriptModel([ScriptedModel.answer("a")]))
    await other.step()
    with pytest.raises(CheckpointConflict):
        await engine.step()
    with pytest.raises(CheckpointConflict):
        await engine.step()


def read_version(store: InMemoryCheckpointStore, run_id: str) -> int:
    summary = read_run(store, run_id)
    assert summary is not None
    return summary.version
