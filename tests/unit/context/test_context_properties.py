"""Property-based tests over random views, budgets and session histories."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from unit.context.context_fixtures import SYSTEM, TASK

from agentloom_runtime.context import (
    BudgetCompactionPolicy,
    CharacterCompactionPolicy,
    CompactionFailureMemory,
    Utf8BytesEstimator,
    protocol_violations,
)
from agentloom_runtime.context._protocol import from_ranges
from agentloom_runtime.context.history import (
    build_run_history,
    can_save_view,
    make_view,
    project_history,
    session_counters,
)
from agentloom_runtime.contracts import ContextInput, ModelRequest, ModelResponse
from agentloom_runtime.errors import ModelStatusError

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def views(draw: st.DrawFn) -> list[dict[str, Any]]:
    """system, then random units (questions, answers, supplements, call groups) with the
    task somewhere, optionally a pending group at the end."""
    units = draw(st.integers(0, 30))
    task_at = draw(st.integers(0, units))
    sizes = st.integers(0, 2_500)
    out: list[dict[str, Any]] = [SYSTEM]
    for u in range(units + 1):
        if u == task_at:
            out.append({"role": "user", "content": TASK})
        if u == units:
            break
        kind = draw(st.sampled_from(["user", "assistant", "group", "group"]))
        if kind == "group":
            n = draw(st.integers(1, 3))
            ids = [f"u{u}_{i}" for i in range(n)]
            out.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for i in ids]})
            out += [{"role": "tool", "tool_call_id": i, "content": "r" * draw(sizes)}
                    for i in ids]
        else:
            out.append({"role": kind, "content": kind[0] * draw(sizes)})
    if draw(st.booleans()):
        out.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": "p0", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "p1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
        if draw(st.booleans()):
            out.append({"role": "tool", "tool_call_id": "p0", "content": "half"})
    return [m if m is SYSTEM else {**m, "_seq": i} for i, m in enumerate(out)]


@st.composite
def budgets(draw: st.DrawFn) -> BudgetCompactionPolicy:
    context_ratio = draw(st.floats(0.3, 1.0))
    target_ratio = draw(st.floats(0.05, context_ratio - 0.01))
    return BudgetCompactionPolicy(
        context_window=draw(st.integers(3_000, 40_000)), max_output_tokens=500,
        safety_margin_tokens=draw(st.integers(0, 500)), estimator=Utf8BytesEstimator(),
        context_ratio=context_ratio, target_ratio=target_ratio,
        user_turns=draw(st.none() | st.integers(1, 4)),
        model_steps=draw(st.none() | st.integers(1, 4)),
        max_compaction_calls=draw(st.integers(1, 6)))


def replies() -> st.SearchStrategy[str | BaseException]:
    """Mostly usable summaries; sometimes empty, oversized or a failed call."""
    usable = st.integers(1, 400).map(lambda n: "Summary " + "s" * n)
    return st.one_of(usable, usable, usable, st.text(max_size=5),
                     st.integers(0, 6_000).map(lambda n: "s" * n),
                     st.just(ModelStatusError("x", status=500)))


def check_result(policy: Any, ctx: ContextInput, result: Any) -> None:
    messages = list(result.messages)
    assert protocol_violations(messages) == []
    before = policy.estimate(ctx.messages, ctx.tools) if hasattr(policy, "estimate") \
        else policy._measure().total(ctx.messages, ctx.tools)
    after = result.metrics["estimate_after"]
    hard = result.metrics.get("effective_budget")
    assert after < before and (after < result.metrics["trigger_threshold"] or (
        hard is not None and before > hard))  # over the hard budget: any progress
    assert result.metrics["estimate_before"] == before
    covered = set(from_ranges(result.metrics["source_indexes"]))
    index = result.metrics["summary_index"]
    kept = messages[:index] + messages[index + 1:]
    original = [m for i, m in enumerate(ctx.messages) if i not in covered]
    assert len(kept) == len(original) and all(a is b for a, b in zip(kept, original, strict=True))
    assert 0 not in covered  # the system instruction
    task = max(i for i, m in enumerate(ctx.messages) if m.get("content") == TASK)
    assert task not in covered
    assert result.metrics["baselines"] == {
        "baseline_user_turns": ctx.counters.get("user_turns", 0),
        "baseline_model_steps": ctx.counters.get("model_steps", 0)}


@SETTINGS
@given(view=views(), policy=budgets(), reply=replies(),
       counters=st.fixed_dictionaries({"user_turns": st.integers(0, 6),
                                       "model_steps": st.integers(0, 6)}))
def test_budget_compaction_invariants(view: list[dict[str, Any]], policy: BudgetCompactionPolicy,
                                      reply: str | BaseException,
                                      counters: dict[str, int]) -> None:
    ctx = ContextInput(task=TASK, plan=[{"title": "p", "status": "pending"}], messages=view,
                       instance="main", tools=[], counters=counters)
    snapshot = copy.deepcopy((view, counters))
    requests: list[ModelRequest] = []

    async def call(request: ModelRequest) -> ModelResponse:
        requests.append(request)
        if isinstance(reply, BaseException):
            raise reply
        return ModelResponse(content=reply)

    memory = CompactionFailureMemory()
    result = asyncio.run(policy.compact(ctx, call, memory=memory))
    event(f"budget: {memory.last_outcome}")
    assert (view, counters) == snapshot  # inputs never mutated
    assert len(requests) <= policy.max_compaction_calls
    for request in requests:
        assert policy.validate_request(request) <= policy.effective_budget
    if result is None:
        assert memory.last_outcome in ("skipped", "failed", "deferred")
        assert (memory.failures == 1) == (memory.last_outcome == "failed")
        if policy.should_compact(ctx) is False:
            assert requests == []
        return
    assert memory.last_outcome == "committed" and memory.failures == 0
    assert result.metrics["trigger"] == policy.should_compact(ctx)
    check_result(policy, ctx, result)
    assert json.loads(json.dumps(result.metrics)) == result.metrics


@SETTINGS
@given(view=views(), reply=replies())
def test_character_compaction_invariants(view: list[dict[str, Any]],
                                         reply: str | BaseException) -> None:
    policy = CharacterCompactionPolicy(trigger_chars=6_000, keep_chars=1_600,
                                       summary_chars=600, piece_chars=3_000)
    ctx = ContextInput(task=TASK, plan=[], messages=view, instance="main", tools=[],
                       counters={})
    snapshot = copy.deepcopy(view)

    async def call(request: ModelRequest) -> ModelResponse:
        if isinstance(reply, BaseException):
            raise reply
        return ModelResponse(content=reply)

    result = asyncio.run(policy.compact(ctx, call))
    event(f"characters: {'committed' if result else 'none'}")
    assert view == snapshot
    if result is not None:
        check_result(policy, ctx, result)


# ---------------------------------------------------------------- session histories


@st.composite
def sessions(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Interleaved records of up to three runs and a child instance."""
    records: list[dict[str, Any]] = []
    open_calls: dict[str, list[str]] = {}
    for seq in range(1, draw(st.integers(0, 40)) + 1):
        run = draw(st.sampled_from(["A", "B", "C"]))
        instance = draw(st.sampled_from(["main", "main", "main", "sub-1"]))
        action = draw(st.sampled_from(["user", "supplement", "answer", "call", "result",
                                       "result", "stray"]))
        message: dict[str, Any]
        kind = action
        if action in ("user", "supplement"):
            message = {"role": "user", "content": f"{action} {seq}"}
        elif action == "answer":
            kind, message = "assistant", {"role": "assistant", "content": f"answer {seq}"}
        elif action == "call":
            ids = [f"{run}{seq}_{i}" for i in range(draw(st.integers(1, 3)))]
            open_calls[run] = list(ids)
            kind, message = "assistant", {"role": "assistant", "content": None, "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for i in ids]}
        elif action == "result" and open_calls.get(run):
            kind = "tool_result"
            message = {"role": "tool", "tool_call_id": open_calls[run].pop(0), "content": "ok"}
        else:
            kind, message = "tool_result", {"role": "tool", "tool_call_id": "zz", "content": "?"}
        records.append({"seq": seq, "run_id": run, "instance": instance, "kind": kind,
                        "message": message})
    return records


@SETTINGS
@given(records=sessions())
def test_projection_is_always_protocol_valid(records: list[dict[str, Any]]) -> None:
    snapshot = copy.deepcopy(records)
    out = project_history(records)
    assert records == snapshot  # no source record is ever rewritten
    assert protocol_violations(out, allow_pending_tail=False) == []
    calls = sum(len(m.get("tool_calls") or ()) for m in out)
    assert calls == sum(1 for m in out if m["role"] == "tool")
    for message in out:
        for call in message.get("tool_calls") or ():
            assert call["id"].startswith("h")
    main = [r for r in records if r["instance"] == "main"]
    users = [m for m in out if m["role"] == "user" and not m["content"].startswith("[")]
    assert len(users) == sum(1 for r in main if r["message"]["role"] == "user")


@SETTINGS
@given(records=sessions(), cut=st.integers(0, 40), run=st.sampled_from(["A", "B", "C"]))
def test_views_and_counters(records: list[dict[str, Any]], cut: int, run: str) -> None:
    head = [r for r in records if r["seq"] <= cut]
    inherited = build_run_history([r for r in head if r["run_id"] != run])
    check = can_save_view(head, run_id=run, inherited_seqs=inherited.inherited_seqs,
                          pending_tools=False, queued_inputs=False)
    views = []
    event(f"view saved: {check.allowed}")
    if check.allowed:
        counts = session_counters(head, None)
        views.append(make_view(check, run_id=run, counters=counts,
                               messages=project_history(head)))
        # a saved view claims exactly the observed main prefix
        main_seqs = [r["seq"] for r in head if r["instance"] == "main"]
        assert from_ranges(check.observed_seqs) == main_seqs
    history = build_run_history(records, views)
    assert protocol_violations(history.messages, allow_pending_tail=False) == []
    counters = history.counters
    main = [r for r in records if r["instance"] == "main"]
    assert counters["user_turns"] == sum(1 for r in main if r["kind"] == "user")
    assert counters["model_steps"] == sum(1 for r in main if r["kind"] == "assistant")
    assert 0 <= counters["baseline_user_turns"] <= counters["user_turns"]
    assert 0 <= counters["baseline_model_steps"] <= counters["model_steps"]
