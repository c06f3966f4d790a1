"""Verdicts on model calls outside the main action loop: a sub-agent's call treated as
failed returns a failure to its parent (the run goes on); a completion review's call
sent again completes the run."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from support.engine import Crash, CrashWhen, SideEffects, build_engine, drive, make_snapshot

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import ModelRequest, Verdict
from agentloom_runtime.testing import FunctionModel, ScriptedModel

RUN = "r"
SUBS = [{"id": "counter", "name": "Counter", "duty": "count words", "tools": ["count_words"]}]
SNAPSHOT = make_snapshot(subagents=SUBS)


def sent(purpose: str, instance: str) -> Callable[[dict[str, Any]], bool]:
    def when(head: dict[str, Any]) -> bool:
        op = head.get("op")
        return bool(op and op["kind"] == "model" and op["phase"] == "sent"
                    and op["purpose"] == purpose and op["instance"] == instance)
    return when


def delegating(request: ModelRequest) -> Any:
    if request.purpose == "verification":
        return ScriptedModel.verdict("complete")
    tools = [m for m in request.messages if m.get("role") == "tool"]
    if request.instance != "main":
        return ScriptedModel.call("count_words", {"text": "a b c"}, id="k1") if not tools \
            else ScriptedModel.answer("3 words")
    if not tools:
        return ScriptedModel.call("delegate_task", {"subagent_id": "counter", "task": "a b c"},
                                  id="d1")
    return ScriptedModel.answer("the child reported: " + str(tools[-1]["content"])[:300])


async def blocked_at(when: Callable[[dict[str, Any]], bool]) -> InMemoryCheckpointStore:
    inner = InMemoryCheckpointStore()
    engine = build_engine(store=CrashWhen(inner, when), snapshot=SNAPSHOT,
                          model=FunctionModel(delegating), tools=SideEffects().tools())
    with pytest.raises(Crash):
        await engine.start("count the words by delegating", run_id=RUN)
        await drive(engine)
    resumed = build_engine(store=inner, snapshot=SNAPSHOT, model=FunctionModel(delegating),
                           tools=SideEffects().tools(), run_id=RUN)
    await resumed.begin_execution()
    assert (await drive(resumed)).error_code == "model_outcome_unknown"
    return inner


async def test_a_sub_agent_call_treated_as_failed_returns_a_failure_to_its_parent() -> None:
    inner = await blocked_at(sent("action", "sub-1"))
    model = FunctionModel(delegating)
    engine = build_engine(store=inner, snapshot=SNAPSHOT, model=model, tools=SideEffects().tools(),
                          run_id=RUN)
    unknown = engine.unknown()
    assert unknown is not None and unknown.instance == "sub-1"
    await engine.resolve(Verdict("treat_as_failed", by="ops", note="provider outage"))
    assert engine.status == "running", "only the sub-agent failed"
    assert (await drive(engine)).status == "completed", engine.error
    main = [r for r in model.requests if r.instance == "main" and r.purpose == "action"]
    result = json.loads([m for m in main[-1].messages if m.get("role") == "tool"][-1]["content"])
    assert result["status"] == "failed" and "provider outage" in result["reason"]
    record = next(e.body for e in inner.read(RUN, "src:main")
                  if e.body["kind"] == "tool_result" and e.body["name"] == "delegate_task")
    assert record["status"] == "error"


async def test_a_review_call_sent_again_completes_the_run() -> None:
    inner = await blocked_at(sent("verification", "main"))
    model = FunctionModel(delegating)
    engine = build_engine(store=inner, snapshot=SNAPSHOT, model=model, tools=SideEffects().tools(),
                          run_id=RUN)
    unknown = engine.unknown()
    assert unknown is not None and unknown.purpose == "verification"
    await engine.resolve(Verdict("send_again", by="ops"))
    assert (await drive(engine)).status == "completed", engine.error
    assert [r.purpose for r in model.requests] == ["verification"], "only the review again"
