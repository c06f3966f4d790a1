"""Bad input: malformed model responses, duplicate call ids, invalid arguments, unknown
tools. Each gives the typed error or the failure result the seed describes; nothing
stored is lost."""

from __future__ import annotations

import asyncio
import json

import pytest
from support.engine import SideEffects, drive, make_snapshot

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.context import NoCompaction
from agentloom_runtime.contracts import ModelResponse, ToolCall
from agentloom_runtime.engine import create_engine
from agentloom_runtime.errors import CheckpointConflict, ModelResponseError, ResumeMismatch
from agentloom_runtime.testing import ScriptedModel
from agentloom_runtime.testing.keyed import KeyedScriptModel


class RawGateway:
    """A gateway that returns whatever it is given, unvalidated."""

    module_id = "raw/v1"

    def __init__(self, *responses: object) -> None:
        self.responses = list(responses)

    def checkpoint_config(self) -> dict:
        return {}

    async def invoke(self, request):
        item = self.responses.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item


def engine_with(model, store=None, effects=None):
    effects = effects or SideEffects()
    return create_engine(make_snapshot(), save=store or InMemoryCheckpointStore(),
                         model_gateway=model, tools=effects.tools(),
                         compaction_policy=NoCompaction())




async def test_malformed_response_blocks_and_keeps_records() -> None:
    store = InMemoryCheckpointStore()
    model = RawGateway(ModelResponseError("choices[0].message is missing"))
    engine = engine_with(model, store)
    run_id = await engine.start("hello")
    before = store.read(run_id, "src:main")
    result = await engine.step()
    assert (result.status, result.error_code) == ("blocked", "model_response_invalid")
    assert store.read(run_id, "src:main") == before
    head = store.load_head(run_id).body
    assert head["op"] is None, "no response exists, so nothing is of unknown outcome"
    # resume: the call is simply made again
    engine2 = create_engine(make_snapshot(), save=store, checkpoint=run_id,
                            model_gateway=RawGateway(ScriptedModel.answer("hi"),
                                                     ScriptedModel.verdict("complete")),
                            tools=SideEffects().tools(), compaction_policy=NoCompaction())
    await engine2.begin_execution()
    assert (await drive(engine2)).status == "completed"


async def test_resume_with_another_model_is_refused() -> None:
    store = InMemoryCheckpointStore()
    engine = engine_with(RawGateway(), store)
    run_id = await engine.start("hello")
    with pytest.raises(ResumeMismatch, match="model"):
        create_engine(make_snapshot(), save=store, checkpoint=run_id,
                      model_gateway=ScriptedModel(), tools=SideEffects().tools(),
                      compaction_policy=NoCompaction())
    with pytest.raises(ResumeMismatch, match="tools"):
        create_engine(make_snapshot(), save=store, checkpoint=run_id,
                      model_gateway=RawGateway(), tools=SideEffects().tools()[:1],
                      compaction_policy=NoCompaction())


async def test_duplicate_call_ids_are_rewritten_in_the_view() -> None:
    dup = ModelResponse(tool_calls=(ToolCall("x", "count_words", '{"text": "a"}'),
                                    ToolCall("x", "count_words", '{"text": "b"}')))
    store = InMemoryCheckpointStore()
    engine = engine_with(RawGateway(dup), store=store)
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
    raw = [e.body for e in store.read(run_id, "src:main") if e.body["kind"] == "assistant"]
    assert [c["id"] for c in raw[0]["message"]["tool_calls"]] == ["x", "x"], "fact kept"


@pytest.mark.parametrize(("name", "arguments", "code"), [
    ("count_words", '{"text": 3}', "tool_arguments_invalid"),
    ("count_words", "{not json", "tool_arguments_invalid"),
    ("count_words", "[1, 2]", "tool_arguments_invalid"),
    ("no_such_tool", "{}", "tool_not_found"),
])
async def test_bad_tool_calls_become_failure_results(name, arguments, code) -> None:
    store = InMemoryCheckpointStore()
    # an unvalidating gateway, so the runtime's own checks are what is tested
    model = RawGateway(
        ModelResponse(tool_calls=(ToolCall("c1", name, arguments),)),
        ScriptedModel.answer("I could not do it."),
        ScriptedModel.verdict("complete"),
    )
    seen = []
    invoke = model.invoke

    async def recording(request):
        seen.append(request)
        return await invoke(request)

    model.invoke = recording
    engine = engine_with(model, store)
    run_id = await engine.start("hello")
    assert (await drive(engine)).status == "completed"
    results = [e.body for e in store.read(run_id, "src:main") if e.body["kind"] == "tool_result"]
    assert results[0]["status"] == "error"
    assert json.loads(results[0]["message"]["content"])["error"]["code"] == code
    # the model saw the failure in its next request
    assert any(m.get("role") == "tool" and code in m["content"]
               for m in seen[1].messages)


async def test_concurrent_steps_exactly_one_commits() -> None:
    store = InMemoryCheckpointStore()

    class Slow(KeyedScriptModel):
        async def invoke(self, request):
            await asyncio.sleep(0.01)
            return await super().invoke(request)

    first = engine_with(Slow([ScriptedModel.answer("a")]), store)
    run_id = await first.start("hello")
    version = store.load_head(run_id).version
    a = create_engine(make_snapshot(), save=store, checkpoint=run_id,
                      model_gateway=Slow([ScriptedModel.answer("a")]),
                      tools=SideEffects().tools(), compaction_policy=NoCompaction())
    b = create_engine(make_snapshot(), save=store, checkpoint=run_id,
                      model_gateway=Slow([ScriptedModel.answer("a")]),
                      tools=SideEffects().tools(), compaction_policy=NoCompaction())
    results = await asyncio.gather(a.step(), b.step(), return_exceptions=True)
    conflicts = [r for r in results if isinstance(r, CheckpointConflict)]
    steps = [r for r in results if not isinstance(r, BaseException)]
    assert len(conflicts) == 1 and len(steps) == 1
    assert store.load_head(run_id).version == version + 2  # sent + result, once


async def test_stale_engine_refuses_to_step_again() -> None:
    store = InMemoryCheckpointStore()
    engine = engine_with(KeyedScriptModel([ScriptedModel.answer("a")]), store)
    run_id = await engine.start("hello")
    other = create_engine(make_snapshot(), save=store, checkpoint=run_id,
                          model_gateway=KeyedScriptModel([ScriptedModel.answer("a")]),
                          tools=SideEffects().tools(), compaction_policy=NoCompaction())
    await other.step()
    with pytest.raises(CheckpointConflict):
        await engine.step()
    with pytest.raises(CheckpointConflict):
        await engine.step()
