"""The hook path keeps its contract (issue 9, docs/contract.md#hooks): ``tool.after`` annotations
are kept, ``tool.after`` runs for delegation results, a re-run ``resume_inflight`` tool
is told it is ``uncertain``, one stage budget covers all bindings of a call, and the
payloads are validated against the point contract."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from support.engine import COUNT_SCHEMA, Crash, SideEffects, build_engine, drive, make_snapshot

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import ModelRequest
from agentloom_runtime.hooks import (
    Continue,
    HookBinding,
    HookDefinition,
    HookManager,
    HookPointRegistry,
    HookRegistry,
    PatchInput,
    PatchOutput,
)
from agentloom_runtime.testing import FunctionModel, ScriptedModel
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

TO = "ops@example.com"


def manager(handlers: list[tuple[str, Any]], *, stage_timeout: float = 10.0,
            points: HookPointRegistry | None = None,
            match: dict[str, Any] | None = None) -> HookManager:
    """A HookManager with one replay-safe binding per (point, handler), in order."""
    registry = HookRegistry([HookDefinition(f"h{i}", "1", handler, replay_safe=True)
                             for i, (_, handler) in enumerate(handlers)])
    bindings = [HookBinding(f"h{i}", "1", point, order=i, match=match or {})
                for i, (point, _) in enumerate(handlers)]
    return HookManager(registry, bindings, stage_timeout=stage_timeout, points=points)


def mail_once(request: ModelRequest) -> Any:
    if request.purpose == "verification":
        return ScriptedModel.verdict("complete")
    if not any(m.get("role") == "tool" for m in request.messages):
        return ScriptedModel.call("send_mail", {"to": TO}, id="m1")
    return ScriptedModel.answer("mailed")


def tool_results(store: InMemoryCheckpointStore, run_id: str) -> list[dict[str, Any]]:
    return [e.body for e in store.read(run_id, "src:main") if e.body["kind"] == "tool_result"]


async def test_tool_after_annotations_are_kept_in_the_source_record() -> None:
    async def annotate(ctx: Any, payload: dict[str, Any]) -> Any:
        return PatchOutput({"annotations": {"audited": True, "by": "audit-hook"}})

    store, effects = InMemoryCheckpointStore(), SideEffects()
    engine = build_engine(store=store, model=FunctionModel(mail_once), tools=effects.tools(),
                          hooks=manager([("tool.after", annotate)]))
    run_id = await engine.start("mail ops")
    assert (await drive(engine)).status == "completed"
    [record] = tool_results(store, run_id)
    assert record["annotations"] == {"audited": True, "by": "audit-hook"}
    assert effects.calls == [TO]


SUBS = [{"id": "counter", "name": "Counter", "duty": "count words", "tools": ["count_words"]}]


def delegating(request: ModelRequest) -> Any:
    if request.purpose == "verification":
        return ScriptedModel.verdict("complete")
    tools = [m for m in request.messages if m.get("role") == "tool"]
    if request.instance != "main":
        if not tools:
            return ScriptedModel.call("count_words", {"text": "a b c"}, id="k1")
        return ScriptedModel.answer("3 words")
    if not tools:
        return ScriptedModel.call("delegate_task", {"subagent_id": "counter", "task": "a b c"},
                                  id="d1")
    return ScriptedModel.answer("the child said: " + str(tools[-1]["content"]))


async def test_tool_after_runs_for_a_delegation_result_and_may_rewrite_it() -> None:
    seen: list[dict[str, Any]] = []

    async def after(ctx: Any, payload: dict[str, Any]) -> Any:
        value = json.loads(payload["value"])  # the model-visible text of the result
        seen.append({"name": payload["name"], "instance": payload["instance"],
                     "value": value})
        if payload["name"] == "delegate_task":
            return PatchOutput({"value": {**value, "answer": "[checked] 3 words"},
                                "annotations": {"delegation_checked": True}})
        return Continue()

    store, model = InMemoryCheckpointStore(), FunctionModel(delegating)
    engine = build_engine(store=store, snapshot=make_snapshot(subagents=SUBS), model=model,
                          tools=SideEffects().tools(), hooks=manager([("tool.after", after)]))
    run_id = await engine.start("count the words of 'a b c' by delegating")
    assert (await drive(engine)).status == "completed", engine.error
    delegated = [s for s in seen if s["name"] == "delegate_task"]
    assert len(delegated) == 1, "tool.after ran once for the delegation result"
    assert delegated[0]["instance"] == "main"
    assert delegated[0]["value"]["answer"] == "3 words"
    assert delegated[0]["value"]["status"] == "completed"
    assert any(s["name"] == "count_words" and s["instance"] == "sub-1" for s in seen)
    [record] = [r for r in tool_results(store, run_id) if r["name"] == "delegate_task"]
    assert record["annotations"] == {"delegation_checked": True}
    last_main = [r for r in model.requests if r.instance == "main" and r.purpose == "action"][-1]
    tool = [m for m in last_main.messages if m.get("role") == "tool"][-1]
    assert json.loads(tool["content"])["answer"] == "[checked] 3 words", \
        "the parent model sees the hook-processed delegation result"


async def test_a_rerun_resume_inflight_tool_is_told_it_is_uncertain() -> None:
    """The process dies while a ``resume_inflight`` handler runs: the resume runs it
    again (that is what the flag allows) and tells it an earlier attempt may have run."""
    flags: list[bool] = []
    die = [True]

    async def lookup(context: ToolContext, arguments: dict[str, Any]) -> Any:
        flags.append(context.uncertain)
        if die.pop() if die else False:
            raise Crash("the process died inside the handler")
        return {"count": len(arguments["text"].split())}

    tool = ToolDefinition(name="count_words", description="count words",
                          parameters=COUNT_SCHEMA, handler=lookup,
                          implementation_id="count-words/v1", resume_inflight=True,
                          read_only=True)

    def counting(request: ModelRequest) -> Any:
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        if not any(m.get("role") == "tool" for m in request.messages):
            return ScriptedModel.call("count_words", {"text": "a b c"}, id="k1")
        return ScriptedModel.answer("3")

    store = InMemoryCheckpointStore()
    engine = build_engine(store=store, model=FunctionModel(counting), tools=[tool])
    with pytest.raises(Crash):
        await engine.start("count", run_id="r")
        await drive(engine)
    resumed = build_engine(store=store, model=FunctionModel(counting), tools=[tool], run_id="r")
    await resumed.begin_execution()
    assert (await drive(resumed)).status == "completed"
    assert flags == [False, True], "the second attempt knows the first may have run"


async def test_one_stage_budget_is_shared_by_the_bindings_of_a_call() -> None:
    """Two tool.before hooks of 0.3 s each under a 0.5 s stage budget: each alone fits,
    together they do not (a fresh budget per binding would let both run)."""
    ran: list[str] = []

    def slow(name: str) -> Any:
        async def hook(ctx: Any, payload: dict[str, Any]) -> Any:
            ran.append(name)
            await asyncio.sleep(0.3)
            return Continue()
        return hook

    effects = SideEffects()
    engine = build_engine(model=FunctionModel(mail_once), tools=effects.tools(),
                          hooks=manager([("tool.before", slow("a")), ("tool.before", slow("b"))],
                                        stage_timeout=0.5))
    await engine.start("mail ops")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("blocked", "hook_timeout")
    assert ran == ["a", "b"] and effects.calls == [], "the call never ran"

    effects = SideEffects()
    engine = build_engine(model=FunctionModel(mail_once), tools=effects.tools(),
                          hooks=manager([("tool.before", slow("a"))], stage_timeout=0.5))
    await engine.start("mail ops")
    assert (await drive(engine)).status == "completed"
    assert effects.calls == [TO]


async def test_the_engines_payload_is_validated_against_the_point_contract() -> None:
    """A host whose tool.before contract allows no arguments: the payload the engine
    builds for send_mail breaks it, so the stage refuses before any hook runs."""
    ran: list[str] = []

    async def hook(ctx: Any, payload: dict[str, Any]) -> Any:
        ran.append("hook")
        return Continue()

    builtin = HookPointRegistry.builtin(2)
    strict = dataclasses.replace(builtin.get("tool.before"), schema={
        **builtin.get("tool.before").schema,
        "properties": {**builtin.get("tool.before").schema["properties"],
                       "arguments": {"type": "object", "maxProperties": 0}}})
    points = HookPointRegistry(2, [strict if p.name == "tool.before" else p for p in builtin])
    effects = SideEffects()
    engine = build_engine(model=FunctionModel(mail_once), tools=effects.tools(),
                          hooks=manager([("tool.before", hook)], points=points))
    await engine.start("mail ops")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("blocked", "hook_contract_violation")
    assert "payload at tool.before is invalid" in (engine.error or {})["message"]
    assert ran == [] and effects.calls == []


async def test_a_patch_outside_the_point_contract_is_refused_and_nothing_runs() -> None:
    async def rename(ctx: Any, payload: dict[str, Any]) -> Any:
        return PatchInput({"name": "count_words"})  # a read-only field

    effects = SideEffects()
    engine = build_engine(model=FunctionModel(mail_once), tools=effects.tools(),
                          hooks=manager([("tool.before", rename)]))
    await engine.start("mail ops")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("blocked", "hook_contract_violation")
    assert "may not write ['name']" in (engine.error or {})["message"]
    assert effects.calls == []
