"""Invalid Unicode never wedges a run (issue 9): a lone surrogate such as
``"\\ud800.txt"`` from a gateway that does not sanitize (in content and tool-call
arguments, raw or JSON-escaped), from a tool's result or from a hook is made storable at
the boundary, or the call becomes a failure result the model sees. Event observers get
storable text; no save fails, so a resume has no failing save to repeat.
``run_surrogates`` also runs on the real stores (tests/functional/test_no_wedge_stores)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.engine import Crash, CrashingStore, build_engine, drive

from agentloom_runtime.checkpoint import BaseCheckpointStore, InMemoryCheckpointStore
from agentloom_runtime.contracts import ModelRequest, ModelResponse, ToolCall, Verdict
from agentloom_runtime.hooks import (
    HookBinding,
    HookDefinition,
    HookManager,
    HookRegistry,
    PatchOutput,
    Reject,
)
from agentloom_runtime.testing import FunctionModel, ScriptedModel
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

LONE = "\ud800"


def encodable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


def unsanitized(arguments: str) -> FunctionModel:
    """What a misbehaving provider sends, handed to the engine unsanitized and
    unvalidated: one call of ``touch`` with ``arguments``, then an answer; reviews
    complete."""
    def reply(request: ModelRequest) -> ModelResponse:
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        if not any(m.get("role") == "tool" for m in request.messages):
            return ModelResponse(content=f"creating {LONE}",
                                 reasoning_content=f"think {LONE}",
                                 tool_calls=(ToolCall(f"c{LONE}", "touch", arguments),))
        return ModelResponse(content=f"created {LONE}.txt")

    return FunctionModel(reply, validate=False)


class Observer:
    def __init__(self) -> None:
        self.bad: list[str] = []
        self.topics: list[str] = []

    def __call__(self, topic: str, data: Any) -> None:
        self.topics.append(topic)
        if not encodable(dict(data)):
            self.bad.append(topic)


class FailingSaves:
    """Counts commits the store refused."""

    def __init__(self, inner: BaseCheckpointStore) -> None:
        self.inner = inner
        self.failures: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def commit(self, commit: Any) -> int:
        try:
            return int(self.inner.commit(commit))
        except Exception as err:
            self.failures.append(type(err).__name__)
            raise


def touch_tool(created: list[str], echo: bool = True) -> ToolDefinition:
    async def touch(context: ToolContext, arguments: dict[str, Any]) -> Any:
        created.append(arguments["path"])
        return {"created": arguments["path"]} if echo else {"created": True}

    return ToolDefinition(name="touch", description="create a file",
                          parameters={"type": "object",
                                      "properties": {"path": {"type": "string"}},
                                      "required": ["path"], "additionalProperties": False},
                          handler=touch, implementation_id="touch/v1")


ARGUMENTS = {
    "raw": '{"path": "' + LONE + '.txt"}',  # a lone surrogate character in the text
    "escaped": '{"path": "\\ud800.txt"}',  # valid ASCII JSON that decodes to one
}


async def run_surrogates(store: BaseCheckpointStore, form: str = "raw") -> list[str]:
    """A run whose model sends lone surrogates everywhere; returns the created paths."""
    created: list[str] = []
    saves, observer = FailingSaves(store), Observer()
    engine = build_engine(store=saves,
                          model=unsanitized(ARGUMENTS[form]), tools=[touch_tool(created)],
                          emit=observer)
    run_id = await engine.start("create the file")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("completed", None), engine.error
    assert saves.failures == [], "no save failed"
    assert observer.bad == [], "every event observer got storable text"
    assert "tool.completed" in observer.topics
    for stream in ("src:main", "view:main", "ops"):
        assert all(encodable(e.body) for e in store.read(run_id, stream))
    outcome = engine.outcome()
    assert outcome is not None and outcome.answer == "created \ufffd.txt"
    results = [e.body for e in store.read(run_id, "src:main") if e.body["kind"] == "tool_result"]
    assert len(results) == 1
    if created:  # the call ran with storable arguments
        assert all(encodable(p) for p in created), created
        assert results[0]["status"] == "ok"
    else:  # or it became a failure result the model saw
        assert results[0]["status"] == "error"
    return created


@pytest.mark.parametrize("form", list(ARGUMENTS))
async def test_lone_surrogates_from_the_model_are_made_storable(form: str) -> None:
    created = await run_surrogates(InMemoryCheckpointStore(), form)
    assert created == [], created


@pytest.mark.parametrize("form", list(ARGUMENTS))
async def test_a_path_with_a_lone_surrogate_is_refused_not_made_a_replacement_character(
        form: str) -> None:
    """Issue 17: the call is refused with a clear failure (raw or escaped in the text);
    no `\ufffd.txt` is made up, and later requests show the failure, not the text."""
    created: list[str] = []
    model = unsanitized(ARGUMENTS[form])
    store = InMemoryCheckpointStore()
    engine = build_engine(store=store, model=model, tools=[touch_tool(created)])
    run_id = await engine.start("create the file")
    assert (await drive(engine)).status == "completed", engine.error
    assert created == []
    [result] = [e.body for e in store.read(run_id, "src:main")
                if e.body["kind"] == "tool_result"]
    assert result["status"] == "error"
    failure = json.loads(result["message"]["content"])["error"]
    assert failure["code"] == "tool_arguments_invalid"
    assert "lone surrogate" in failure["message"]
    later = next(r for r in model.requests if any(m.get("role") == "tool"
                                                  for m in r.messages))
    [call] = [c for m in later.messages for c in m.get("tool_calls") or ()]
    assert json.loads(call["function"]["arguments"]) == {"error": failure}


async def test_a_lone_surrogate_in_a_tool_result_is_made_storable() -> None:
    async def listing(context: ToolContext, arguments: dict[str, Any]) -> Any:
        return {"files": [f"{LONE}.txt", "ok.txt"], "note": f"odd name {LONE}"}

    tool = ToolDefinition(name="touch", description="list files",
                          parameters={"type": "object"}, handler=listing,
                          implementation_id="list/v1", read_only=True)
    store, observer = FailingSaves(InMemoryCheckpointStore()), Observer()
    engine = build_engine(store=store,
                          model=unsanitized("{}"), tools=[tool], emit=observer)
    run_id = await engine.start("list")
    assert (await drive(engine)).status == "completed", engine.error
    assert store.failures == [] and observer.bad == []
    [record] = [e.body for e in store.read(run_id, "src:main") if e.body["kind"] == "tool_result"]
    assert "\ufffd.txt" in record["message"]["content"]


@pytest.mark.parametrize("crash_after", range(1, 8))
async def test_a_resume_after_surrogates_never_meets_a_failing_save(crash_after: int) -> None:
    inner, created = InMemoryCheckpointStore(), list[str]()
    engine = build_engine(store=CrashingStore(inner, crash_after),
                          model=unsanitized(ARGUMENTS["raw"]),
                          tools=[touch_tool(created, echo=True)])
    try:
        await engine.start("create the file", run_id="r")
        await drive(engine)
    except Crash:
        pass
    saves = FailingSaves(inner)
    resumed = build_engine(store=saves,
                           model=unsanitized(ARGUMENTS["raw"]),
                           tools=[touch_tool(created, echo=True)], run_id="r")
    if resumed.status != "completed":
        await resumed.begin_execution(retry_unknown_models=True)
        result = await drive(resumed)
        if result.error_code == "tool_outcome_unknown":  # crashed inside the side effect
            await resumed.resolve(Verdict("did_not_run", by="test"))
            result = await drive(resumed)
        assert result.status == "completed", resumed.error
    assert saves.failures == [], "no failing save is repeated on resume"


HOOKED = [("tool.after", PatchOutput({"value": f"odd {LONE}"})),
          ("model.chat.after", PatchOutput({"content": f"odd {LONE}"})),
          ("tool.before", Reject(f"refused {LONE}"))]


@pytest.mark.parametrize(("point", "result"), HOOKED, ids=[p for p, _ in HOOKED])
async def test_lone_surrogates_from_a_hook_are_made_storable(point: str, result: Any) -> None:
    """Hook text crosses the same boundary: before, the save failed and every resume
    failed the same way (persistence_error forever)."""
    async def hook(ctx: Any, payload: dict[str, Any]) -> Any:
        return result

    registry = HookRegistry([HookDefinition("odd", "1", hook, replay_safe=True)])
    match = {"purposes": ["action"]} if point.startswith("model.") else {}
    hooks = HookManager(registry, [HookBinding("odd", "1", point, order=0, match=match)])
    created: list[str] = []
    store = FailingSaves(InMemoryCheckpointStore())
    engine = build_engine(store=store,
                          model=unsanitized('{"path": "a.txt"}'), tools=[touch_tool(created)],
                          hooks=hooks)
    run_id = await engine.start("create the file")
    result_ = await drive(engine)
    assert (result_.status, result_.error_code) == ("completed", None), engine.error
    assert store.failures == []
    assert all(encodable(e.body) for e in store.read(run_id, "src:main"))
    assert all(encodable(e.body) for e in store.read(run_id, "view:main"))
    assert created == ([] if point == "tool.before" else ["a.txt"])
