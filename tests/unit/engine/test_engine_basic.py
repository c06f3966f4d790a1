from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from support.engine import SideEffects, build_engine, command_host, drive, make_snapshot, saved_head

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import ModelRequest, ModelResponse, StepResult
from agentloom_runtime.engine import Engine
from agentloom_runtime.events import ENGINE_TOPICS
from agentloom_runtime.hooks import Continue, HookDefinition, HookRegistry
from agentloom_runtime.testing import FunctionModel, KeyedScriptModel, ScriptedModel
from agentloom_runtime.workspace import file_tools


async def run_to_end(engine: Engine, limit: int = 50) -> list[StepResult]:
    results = []
    for _ in range(limit):
        result = await engine.step()
        results.append(result)
        if result.next == "done":
            return results
    raise AssertionError("run did not finish")


async def test_representative_run(effects: SideEffects) -> None:
    model = ScriptedModel([
        ScriptedModel.call("count_words", {"text": "a b c"}),
        ScriptedModel.call("send_mail", {"to": "ops@example.com"}),
        ScriptedModel.answer("3 words; mail sent."),
        ScriptedModel.verdict("complete", "done"),
    ])
    store = InMemoryCheckpointStore()
    engine = build_engine(store=store, model=model, tools=effects.tools())
    run_id = await engine.start("count and mail")
    results = await run_to_end(engine)
    model.assert_consumed()
    assert [r.kind for r in results] == ["action", "tool", "action", "tool", "action",
                                         "verification"]
    assert results[-1].status == "completed"
    assert effects.calls == ["ops@example.com"]
    outcome = engine.outcome()
    assert outcome is not None and outcome.answer == "3 words; mail sent."
    assert saved_head(store, run_id)["total_calls"] == 4
    await engine.close()


async def test_every_emitted_topic_is_in_the_catalogue(tmp_path: Path) -> None:
    """A run with a delegation, a command and hooks (one failing observer, so a hook
    diagnostic is emitted): every topic the engine emits is one of ``ENGINE_TOPICS``."""
    emitted: list[str] = []

    def emit(topic: str, data: Mapping[str, Any]) -> None:
        emitted.append(topic)

    async def watch(ctx: Any, payload: dict[str, Any]) -> Continue:
        return Continue()

    async def broken(ctx: Any, payload: dict[str, Any]) -> Continue:
        raise RuntimeError("the observer failed")

    registry = HookRegistry([HookDefinition("watch", "1", watch, replay_safe=True),
                             HookDefinition("broken", "1", broken, observation=True)])
    hooks = [{"hook_id": "watch", "version": "1", "point": point}
             for point in ("run.before", "tool.before", "subagent.before", "run.after")]
    hooks.append({"hook_id": "broken", "version": "1", "point": "tool.after"})
    snapshot = make_snapshot(hooks=hooks, subagents=[
        {"id": "counter", "name": "Counter", "duty": "count words", "tools": ["count_words"]}])
    main = KeyedScriptModel([
        ScriptedModel.call("delegate_task", {"subagent_id": "counter", "task": "a b c"},
                           id="d1"),
        ScriptedModel.call("workspace_command", {"command": "make test"}, id="k1"),
        ScriptedModel.answer("counted, and the tests pass")])

    async def reply(request: ModelRequest) -> ModelResponse:
        if request.instance != "main" and request.purpose == "action":
            step = sum(1 for m in request.messages if m.get("role") == "assistant")
            return [ScriptedModel.call("count_words", {"text": "a b c"}, id="c1"),
                    ScriptedModel.answer("3 words")][step]
        return await main.invoke(request)

    runner, host = command_host(tmp_path / "ws")
    engine = build_engine(snapshot=snapshot, model=FunctionModel(reply), emit=emit,
                          tools=[*SideEffects().tools(), *file_tools()],
                          hook_registry=registry, **host)
    await engine.start("count the words, then run the tests")
    assert (await drive(engine, runner=runner)).status == "completed", engine.error
    assert runner.ran == ["make test"]
    assert set(emitted) - ENGINE_TOPICS == set(), "topics outside the catalogue"
    assert {"run.started", "model.started", "model.completed", "tool.started",
            "tool.completed", "subagent.started", "review.decided", "hook.diagnostic",
            "run.finished"} <= set(emitted), "the run exercised what it is meant to"
