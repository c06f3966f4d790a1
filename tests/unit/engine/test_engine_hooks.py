"""Hooks wired into the engine's durable operations (docs/contract.md#hooks)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.engine import (
    Crash,
    CrashingStore,
    SideEffects,
    build_engine,
    drive,
    make_snapshot,
    records,
    saved_head,
)

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.engine import read_run
from agentloom_runtime.errors import ResumeMismatch
from agentloom_runtime.hooks import (
    Continue,
    HookDefinition,
    HookRegistry,
    HookScope,
    PatchInput,
    PatchOutput,
    Reject,
)
from agentloom_runtime.testing import FunctionModel, KeyedScriptModel, ScriptedModel

SUBS = [{"id": "counter", "name": "Counter", "duty": "count words",
         "tools": ["count_words"]}]


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self.scopes: list[HookScope] = []
        self.results: dict[str, Any] = {}
        self.fail: set[str] = set()

    def handler(self, point: str):
        async def hook(ctx, payload):
            self.seen.append((point, payload))
            self.scopes.append(ctx.scope)
            if point in self.fail:
                self.fail.discard(point)
                raise Crash(f"process died inside the {point} hook")
            result = self.results.get(point, Continue())
            return result(payload) if callable(result) else result
        return hook


POINTS = ["model.chat.before", "model.chat.after", "tool.before", "tool.after",
          "context.prepare.before", "context.prepare.after", "run.before", "run.after",
          "subagent.before", "subagent.after", "operation.error", "operation.finally"]


def hooked(recorder: Recorder, *, points: list[str] = POINTS, replay_safe: bool = True,
           subagents: list[Any] = SUBS) -> dict[str, Any]:
    """``build_engine`` keywords: a snapshot binding one ``recorder`` hook per point (the
    sub-agent templates ``subagents``) and the trusted registry that holds them."""
    registry = HookRegistry()
    hooks = []
    for i, point in enumerate(points):
        registry.register(HookDefinition(f"h{i}", "1", recorder.handler(point),
                                         replay_safe=replay_safe))
        match = {"purposes": ["action", "completion"]} if point.startswith("model.chat") else {}
        hooks.append({"hook_id": f"h{i}", "version": "1", "point": point, "match": match})
    return {"snapshot": make_snapshot(hooks=hooks, subagents=subagents),
            "hook_registry": registry}


MAIL_OPS = [ScriptedModel.call("send_mail", {"to": "ops@example.com"}, id="m1"),
            ScriptedModel.answer("done")]


def main_script() -> list[Any]:
    """Delegate to the counter, mail ops, answer."""
    return [ScriptedModel.call("delegate_task", {"subagent_id": "counter", "task": "a b c"},
                               id="d1"),
            ScriptedModel.call("send_mail", {"to": "ops@example.com"}, id="m1"),
            ScriptedModel.answer("done")]


def child_model() -> FunctionModel:
    """The main instance follows the keyed script; a child counts, then answers."""
    main = KeyedScriptModel(main_script())

    async def reply(request: ModelRequest) -> ModelResponse:
        if request.instance != "main" and request.purpose == "action":
            step = sum(1 for m in request.messages if m.get("role") == "assistant")
            return [ScriptedModel.call("count_words", {"text": "a b c"}, id="k1"),
                    ScriptedModel.answer("3 words")][step]
        return await main.invoke(request)

    return FunctionModel(reply)


async def test_every_point_runs_with_a_valid_payload() -> None:
    recorder, effects = Recorder(), SideEffects()
    engine = build_engine(store=InMemoryCheckpointStore(), model=child_model(),
                          tools=effects.tools(), **hooked(recorder))
    await engine.start("delegate, then mail")
    result = await drive(engine)
    assert result.status == "completed", engine.error
    seen = {p for p, _ in recorder.seen}
    assert seen >= set(POINTS) - {"operation.error"}
    assert effects.calls == ["ops@example.com"]


async def test_every_point_names_its_session_and_operation_in_the_scope() -> None:
    """``HookScope.session_id`` / ``operation_id`` used to be always None."""
    recorder = Recorder()
    store = InMemoryCheckpointStore()
    engine = build_engine(store=store, model=child_model(), tools=SideEffects().tools(),
                          **hooked(recorder))
    run_id = await engine.start("delegate, then mail", labels={"session": "s-1"})
    assert (await drive(engine)).status == "completed", engine.error
    assert {s.session_id for s in recorder.scopes} == {"s-1"}
    ops = {r["call"]["op_id"] for inst in ("main", "sub-1")
           for r in records(store, run_id, "assistant", instance=inst)}
    ops |= {e.body["op_id"] for e in store.read(run_id, "ops") if "op_id" in e.body}
    calls = {r["request_id"] for inst in ("main", "sub-1")
             for r in records(store, run_id, "tool_result", instance=inst)}
    for scope, (point, payload) in zip(recorder.scopes, recorder.seen, strict=True):
        operation = scope.operation_id
        if point.startswith(("model.chat", "context.prepare")):
            assert operation in ops, (point, operation)
        elif point.startswith(("tool.", "subagent.")):
            assert operation is not None and operation[2:] in calls, (point, operation)
        elif point.startswith("run."):
            assert operation == f"run:{run_id}"
        else:
            assert operation == payload["operation_id"], point


async def test_tool_before_patch_is_revalidated_and_reject_is_a_result() -> None:
    recorder, effects = Recorder(), SideEffects()
    recorder.results["tool.before"] = PatchInput({"arguments": {"to": "audit@example.com"}})
    engine = build_engine(store=InMemoryCheckpointStore(), model=KeyedScriptModel(MAIL_OPS),
                          tools=effects.tools(),
                          **hooked(recorder, points=["tool.before"], subagents=[]))
    await engine.start("mail")
    assert (await drive(engine)).status == "completed"
    assert effects.calls == ["audit@example.com"]

    recorder, effects = Recorder(), SideEffects()
    recorder.results["tool.before"] = Reject("mail is disabled")
    store = InMemoryCheckpointStore()
    engine = build_engine(store=store, model=KeyedScriptModel(MAIL_OPS), tools=effects.tools(),
                          **hooked(recorder, points=["tool.before"], subagents=[]))
    run_id = await engine.start("mail")
    assert (await drive(engine)).status == "completed"
    assert effects.calls == []
    result = records(store, run_id, "tool_result")
    assert result[0]["status"] == "rejected" and "mail is disabled" in result[0]["message"][
        "content"]


async def test_chat_after_changes_the_view_not_the_source() -> None:
    recorder = Recorder()
    recorder.results["model.chat.after"] = lambda p: (
        PatchOutput({"content": "[redacted]"}) if p["purpose"] == "action" else Continue())
    store = InMemoryCheckpointStore()
    engine = build_engine(store=store,
                          model=KeyedScriptModel([ScriptedModel.answer("secret answer")]),
                          tools=SideEffects().tools(),
                          **hooked(recorder, points=["model.chat.after"], subagents=[]))
    run_id = await engine.start("q")
    assert (await drive(engine)).status == "completed"
    src = [r["message"]["content"] for r in records(store, run_id, "assistant")]
    assert src == ["secret answer"]
    outcome = engine.outcome()
    assert outcome is not None and outcome.answer == "[redacted]"


async def test_run_before_reject_blocks_the_run() -> None:
    recorder = Recorder()
    recorder.results["run.before"] = Reject("outside office hours")
    engine = build_engine(store=InMemoryCheckpointStore(),
                          model=KeyedScriptModel([ScriptedModel.answer("x")]),
                          tools=SideEffects().tools(),
                          **hooked(recorder, points=["run.before"], subagents=[]))
    await engine.start("q")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("blocked", "hook_rejected")


async def test_subagent_before_reject_is_a_failure_result() -> None:
    recorder = Recorder()
    recorder.results["subagent.before"] = Reject("no delegation today")
    store = InMemoryCheckpointStore()
    engine = build_engine(store=store, model=child_model(), tools=SideEffects().tools(),
                          **hooked(recorder, points=["subagent.before"]))
    run_id = await engine.start("q")
    assert (await drive(engine)).status == "completed"
    summary = read_run(store, run_id)
    assert summary is not None and summary.instances == ("main",), "no child was created"


async def test_annotations_from_run_after_are_kept() -> None:
    recorder = Recorder()
    recorder.results["run.after"] = PatchOutput({"annotations": {"reviewed": True}})
    engine = build_engine(store=InMemoryCheckpointStore(),
                          model=KeyedScriptModel([ScriptedModel.answer("x")]),
                          tools=SideEffects().tools(),
                          **hooked(recorder, points=["run.after"], subagents=[]))
    await engine.start("q")
    assert (await drive(engine)).status == "completed"
    outcome = engine.outcome()
    assert outcome is not None and outcome.annotations == {"reviewed": True}


@pytest.mark.parametrize("point", ["tool.after", "model.chat.after", "run.after"])
async def test_crash_in_an_after_hook_resumes_from_the_saved_raw_result(point: str) -> None:
    recorder, effects, inner = Recorder(), SideEffects(), InMemoryCheckpointStore()
    recorder.fail.add(point)
    model = KeyedScriptModel([ScriptedModel.call("send_mail", {"to": "ops@example.com"},
                                                 id="m1"), ScriptedModel.answer("done")])
    engine = build_engine(store=inner, model=model, tools=effects.tools(),
                          **hooked(recorder, points=[point], subagents=[]))
    with pytest.raises(Crash):
        await engine.start("mail", run_id="r")
        await drive(engine)
    resumed = build_engine(store=inner, model=model, tools=effects.tools(), run_id="r",
                           **hooked(recorder, points=[point], subagents=[]))
    await resumed.begin_execution()
    assert (await drive(resumed)).status == "completed"
    assert effects.calls == ["ops@example.com"], "the tool ran exactly once"
    if point == "model.chat.after":
        # the answered model call whose after-hook crashed was not sent again
        assert model.calls.count("action") == 2, model.calls


async def test_unfinished_hook_that_is_not_replay_safe_needs_confirmation() -> None:
    recorder, effects, inner = Recorder(), SideEffects(), InMemoryCheckpointStore()
    recorder.fail.add("tool.before")
    model = KeyedScriptModel([ScriptedModel.call("send_mail", {"to": "ops@example.com"},
                                                 id="m1"), ScriptedModel.answer("done")])
    engine = build_engine(store=inner, model=model, tools=effects.tools(),
                          **hooked(recorder, points=["tool.before"], subagents=[],
                                   replay_safe=False))
    with pytest.raises(Crash):
        await engine.start("mail", run_id="r")
        await drive(engine)
    resumed = build_engine(store=inner, model=model, tools=effects.tools(), run_id="r",
                           **hooked(recorder, points=["tool.before"], subagents=[],
                                    replay_safe=False))
    await resumed.begin_execution()
    result = await drive(resumed)
    assert result.error_code == "hook_replay_requires_confirmation"
    confirmed = build_engine(store=inner, model=model, tools=effects.tools(), run_id="r",
                             **hooked(recorder, points=["tool.before"], subagents=[],
                                      replay_safe=False))
    await confirmed.begin_execution(confirm_hooks=True)
    assert (await drive(confirmed)).status == "completed"
    assert effects.calls == ["ops@example.com"]


async def test_resume_cannot_add_hooks() -> None:
    recorder, inner = Recorder(), InMemoryCheckpointStore()
    engine = build_engine(store=inner, model=KeyedScriptModel(main_script()),
                          tools=SideEffects().tools(),
                          **hooked(recorder, points=["tool.before"], subagents=[]))
    run_id = await engine.start("q")
    with pytest.raises(ResumeMismatch, match="hooks"):
        build_engine(store=inner, model=KeyedScriptModel(main_script()),
                     tools=SideEffects().tools(), run_id=run_id,
                     **hooked(recorder, points=["tool.before", "tool.after"], subagents=[]))


async def test_only_hooks_that_must_not_replay_cost_commits() -> None:
    counts = []
    for points, replay_safe in (([], True), (["run.before"], True), (["run.before"], False)):
        store = CrashingStore(InMemoryCheckpointStore())
        engine = build_engine(store=store, model=KeyedScriptModel([ScriptedModel.answer("x")]),
                              tools=SideEffects().tools(),
                              **hooked(Recorder(), points=points, subagents=[],
                                       replay_safe=replay_safe))
        await engine.start("q")
        await drive(engine)
        counts.append(store.commits)
    assert counts[1] == counts[0], "a replay-safe hook rides on the next commit"
    assert counts[2] == counts[0] + 2, "announced before it runs, cursor saved after"


def counting(runs: list[str], name: str) -> Any:
    async def hook(ctx: Any, payload: dict[str, Any]) -> Continue:
        runs.append(name)
        return Continue()
    return hook


def cursor_hooks(runs: list[str]) -> dict[str, Any]:
    """``build_engine`` keywords: three non-replay-safe tool.before hooks (each appends
    its name to ``runs``) around one send_mail."""
    registry = HookRegistry([HookDefinition(f"g{i}", "1", counting(runs, f"g{i}"))
                             for i in range(3)])
    snapshot = make_snapshot(hooks=[{"hook_id": f"g{i}", "version": "1",
                                     "point": "tool.before"} for i in range(3)])
    return {"snapshot": snapshot, "hook_registry": registry,
            "model": KeyedScriptModel([
                ScriptedModel.call("send_mail", {"to": "a@example.com"}, id="m1"),
                ScriptedModel.answer("done")])}


async def cursor_reference_commits() -> int:
    store = CrashingStore(InMemoryCheckpointStore())
    engine = build_engine(store=store, tools=SideEffects().tools(), **cursor_hooks([]))
    await engine.start("mail")
    assert (await drive(engine)).status == "completed"
    return store.commits


CURSOR_COMMITS = asyncio.run(cursor_reference_commits())


@pytest.mark.parametrize("crash_after", range(1, CURSOR_COMMITS))
async def test_crash_at_each_hook_cursor_never_reruns_completed_hooks(crash_after: int) -> None:
    """Crash after every commit of the reference run (those around the three hooks
    included). Completed hooks never run again; the one announced as running needs
    confirmation."""
    runs: list[str] = []
    effects, inner = SideEffects(), InMemoryCheckpointStore()
    with pytest.raises(Crash):
        engine = build_engine(store=CrashingStore(inner, crash_after), tools=effects.tools(),
                              **cursor_hooks(runs))
        await engine.start("mail", run_id="r")
        await drive(engine)
    saved = saved_head(inner, "r").get("hook") or {}
    running = saved.get("running")
    resumed = build_engine(store=inner, tools=effects.tools(), run_id="r",
                           **cursor_hooks(runs))
    # a crash right after a model request was sent leaves its outcome unknown: the
    # scripted model answers alike, so it is sent again (the hooks are the point here)
    await resumed.begin_execution(confirm_hooks=True, retry_unknown_models=True)
    result = await drive(resumed)
    if result.error_code == "tool_outcome_unknown":  # the crash hit the tool itself
        assert runs == ["g0", "g1", "g2"] and effects.calls == []
        return
    assert result.status == "completed", (result.error_code, resumed.error)
    assert effects.calls == ["a@example.com"]
    # completed hooks ran exactly once; only the one announced as running when the
    # process died may have run twice (with confirmation)
    for i in range(3):
        assert runs.count(f"g{i}") == (runs.count(f"g{i}") if i == running else 1), runs
    assert runs.count(f"g{running}") <= 2 if running is not None else len(runs) == 3
