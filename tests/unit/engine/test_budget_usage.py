"""Usage and budget (issue 10): provider usage summed in the head over every purpose and
sub-agent; a per-run token or cost budget that blocks with ``budget_exceeded`` (way out
``raise_budget``); a resume with a raised budget completes, one without stays blocked
with the same message; the raise is a durable record; a crash at any commit neither
loses nor double-counts usage."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from support.engine import (
    COMPACTING,
    SMALL_OUTPUT,
    Crash,
    CrashingStore,
    SideEffects,
    build_engine,
    drive,
    estimated,
    mailing,
    make_snapshot,
    saved_head,
)

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.context.estimators import Utf8BytesEstimator
from agentloom_runtime.contracts import ModelRequest, ModelResponse, Verdict
from agentloom_runtime.engine import read_run
from agentloom_runtime.engine._resolve import RaiseBudget
from agentloom_runtime.errors import ConfigError, SnapshotError
from agentloom_runtime.snapshot import DEFAULT_RUN_TOKENS, AgentSnapshot, parse_snapshot
from agentloom_runtime.testing import FunctionModel, ScriptedModel

SUBS = [{"id": "counter", "name": "Counter", "duty": "count words", "tools": ["count_words"]},
        {"id": "mailer", "name": "Mailer", "duty": "send mail", "tools": ["send_mail"]}]


def by_instance(request: ModelRequest) -> ModelResponse:
    """Main delegates to both children; each uses its tool once and answers."""
    if request.purpose == "verification":
        return ScriptedModel.verdict("complete")
    step = sum(1 for m in request.messages if m.get("role") == "assistant")
    names = {t["function"]["name"] for t in request.tools}
    if request.instance == "main":
        return [ScriptedModel.call("delegate_task", {"subagent_id": "counter",
                                                     "task": "count: a b c"}, id="d1"),
                ScriptedModel.call("delegate_task", {"subagent_id": "mailer",
                                                     "task": "mail ops"}, id="d2"),
                ScriptedModel.answer("both children finished")][step]
    if "count_words" in names:
        return [ScriptedModel.call("count_words", {"text": "a b c"}, id="k1"),
                ScriptedModel.answer("3 words")][step]
    return [ScriptedModel.call("send_mail", {"to": "ops@example.com"}, id="m1"),
            ScriptedModel.answer("mailed")][step]


TOKENS = {"action": (100, 10), "compaction": (50, 5), "verification": (20, 2)}
PRICED = {"model": "m", "input_price_per_million": 2.0, "output_price_per_million": 8.0,
          "max_output_tokens": SMALL_OUTPUT}


def metered(fn: Callable[[ModelRequest], ModelResponse]) -> FunctionModel:
    """``fn``'s replies, each carrying the provider usage of its purpose (``TOKENS``)."""
    def reply(request: ModelRequest) -> ModelResponse:
        given, produced = TOKENS[request.purpose]
        return dataclasses.replace(fn(request), usage={
            "prompt_tokens": given, "completion_tokens": produced,
            "total_tokens": given + produced})

    return FunctionModel(reply)


def calls(model: FunctionModel) -> list[tuple[str, str]]:
    """(purpose, instance) of every call the model answered."""
    return [(r.purpose, r.instance) for r in model.requests]


def expected(model: FunctionModel) -> tuple[int, int]:
    return (sum(TOKENS[p][0] for p, _ in calls(model)),
            sum(TOKENS[p][1] for p, _ in calls(model)))


def priced(**limits: Any) -> AgentSnapshot:
    """Both sub-agents, the priced connection, ``limits``."""
    return make_snapshot(subagents=SUBS, model=PRICED, limits=limits)


async def test_usage_is_summed_over_actions_reviews_compaction() -> None:
    model = metered(mailing)
    store, effects = InMemoryCheckpointStore(), SideEffects()
    engine = build_engine(store=store, snapshot=make_snapshot(**COMPACTING), model=model,
                          tools=effects.tools(), compaction="default")
    run_id = await engine.start("mail everyone " + "with care " * 40)
    assert (await drive(engine)).status == "completed", engine.error
    purposes = {p for p, _ in calls(model)}
    assert purposes == {"action", "compaction", "verification"}
    usage = engine.usage()
    given, produced = expected(model)
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (
        len(calls(model)), given, produced)
    assert usage.total_tokens == given + produced
    assert usage.cost is None  # no prices
    assert usage.max_tokens == DEFAULT_RUN_TOKENS  # the version sets none: the default cap
    assert saved_head(store, run_id)["usage"]["calls"] == len(calls(model))


async def test_usage_and_cost_include_sub_agents_and_each_record_carries_its_cost() -> None:
    model, store = metered(by_instance), InMemoryCheckpointStore()
    engine = build_engine(store=store, snapshot=priced(), model=model, tools=SideEffects().tools())
    run_id = await engine.start("count then mail")
    assert (await drive(engine)).status == "completed"
    assert {i for _, i in calls(model)} == {"main", "sub-1", "sub-2"}
    given, produced = expected(model)
    usage = engine.usage()
    assert (usage.input_tokens, usage.output_tokens) == (given, produced)
    assert usage.cost == pytest.approx((given * 2.0 + produced * 8.0) / 1e6)
    child = [e.body for e in store.read(run_id, "src:sub-1") if e.body["kind"] == "assistant"]
    assert child[0]["call"]["cost"] == pytest.approx((100 * 2.0 + 10 * 8.0) / 1e6)


async def reference_calls(snapshot: AgentSnapshot,
                          fn: Callable[[ModelRequest], ModelResponse]) -> list[int]:
    """The tokens of each model call of the run without a cap (to set caps from)."""
    model = estimated(fn)
    engine = build_engine(snapshot=snapshot, model=model, tools=SideEffects().tools())
    await engine.start("count then mail")
    assert (await drive(engine)).status == "completed"
    return [call_tokens(model, i) for i in range(len(model.requests))]


UNUSED_OUTPUT = SMALL_OUTPUT - 10  # of a call's output limit, what ``estimated`` leaves


def call_tokens(model: FunctionModel, index: int) -> int:
    request = model.requests[index]
    return Utf8BytesEstimator().estimate(request.messages, request.tools) + 10


async def test_a_token_budget_blocks_and_a_raised_budget_completes() -> None:
    per_call = await reference_calls(priced(), by_instance)
    # three calls fit (each is checked with its whole output limit); the fourth could
    # cross the cap
    cap = sum(per_call[:3]) + UNUSED_OUTPUT
    model, store, effects = estimated(by_instance), InMemoryCheckpointStore(), \
        SideEffects()
    engine = build_engine(store=store, snapshot=priced(max_tokens=cap), model=model,
                          tools=effects.tools())
    run_id = await engine.start("count then mail")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("blocked", "budget_exceeded")
    assert engine.way_out() == "raise_budget"
    assert engine.error is not None
    message = engine.error["message"]
    used = sum(per_call[:3])
    assert f"tokens: {used:,} used of {cap:,}" in message and "raised budget" in message
    assert "was not sent" in message and "a version with higher limits" in message
    assert "agentloom" not in message  # hosts name the commands (way_out: raise_budget)
    assert engine.usage().total_tokens == used <= cap  # three calls, never past the cap
    assert read_run(store, run_id).way_out == "raise_budget"  # type: ignore[union-attr]

    # A resume without a raise stays blocked, with the same clear message, and no call.
    made = len(calls(model))
    await engine.begin_execution()
    again = await drive(engine)
    assert (again.status, again.error_code) == ("blocked", "budget_exceeded")
    assert engine.error is not None and engine.error["message"] == message
    assert len(calls(model)) == made

    # A raise that does not raise is refused and changes nothing.
    with pytest.raises(ConfigError, match="must exceed"):
        await engine.begin_execution(raise_budget=RaiseBudget(by="ops", max_tokens=cap - 1))
    with pytest.raises(ConfigError, match="no max_cost budget"):
        await engine.begin_execution(raise_budget=RaiseBudget(by="ops", max_cost=1.0))

    # A fresh attachment (another process) resumes with a raised budget and completes.
    other = build_engine(store=store, snapshot=priced(max_tokens=cap), model=model,
                         tools=effects.tools(), run_id=run_id)
    await other.begin_execution(raise_budget=RaiseBudget(by="ops@example.com",
                                                         max_tokens=1_000_000, note="ok"))
    assert (await drive(other)).status == "completed"
    assert other.usage().max_tokens == 1_000_000
    assert effects.calls == ["ops@example.com"]
    raised = [e.body for e in store.read(run_id, "budgets")]
    assert len(raised) == 1
    assert raised[0]["by"] == "ops@example.com" and raised[0]["after"]["max_tokens"] == 1_000_000
    assert raised[0]["before"]["max_tokens"] == cap and raised[0]["used"]["tokens"] == used


async def test_a_cost_budget_blocks_naming_cost_and_a_raise_completes() -> None:
    per_call = await reference_calls(priced(), by_instance)
    # two calls fit the cost budget (input at 2 per million, 10 output tokens at 8; the
    # second checked with its whole output limit)
    cost_of_two = ((sum(per_call[:2]) - 20) * 2.0 + 20 * 8.0) / 1e6
    model, store = estimated(by_instance), InMemoryCheckpointStore()
    cap = cost_of_two + UNUSED_OUTPUT * 8.0 / 1e6 + 1e-9
    engine = build_engine(store=store, snapshot=priced(max_cost=cap),
                          model=model, tools=SideEffects().tools())
    await engine.start("count then mail")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("blocked", "budget_exceeded")
    assert engine.error is not None and "cost: " in engine.error["message"]
    assert "tokens:" not in engine.error["message"]
    assert len(calls(model)) == 2
    assert engine.usage().cost == pytest.approx(cost_of_two)
    await engine.begin_execution(raise_budget=RaiseBudget(by="ops", max_cost=1.0))
    assert (await drive(engine)).status == "completed"


def test_a_cost_budget_needs_prices() -> None:
    with pytest.raises(SnapshotError, match="max_cost needs the model connection's prices"):
        parse_snapshot({"agent_id": "a", "model": {"model": "m"},
                        "limits": {"max_cost": 1.0}})


def test_limits_without_a_budget_keep_the_old_bindings() -> None:
    from agentloom_runtime.engine import ExecutionLimits

    assert set(ExecutionLimits().to_dict()) == {"max_model_calls", "max_iterations",
                                                "max_children"}
    assert ExecutionLimits(max_tokens=5).to_dict()["max_tokens"] == 5


def recorded_tokens(store: InMemoryCheckpointStore, run_id: str) -> int:
    """Tokens of the calls whose responses the run kept (assistant records and the
    summaries' and reviews' ops entries)."""
    head = saved_head(store, run_id)
    total = 0
    for instance in head["frames"]:
        for entry in store.read(run_id, f"src:{instance}"):
            call = entry.body.get("call")
            if entry.body["kind"] == "assistant" and call and call.get("usage"):
                total += call["usage"]["total_tokens"]
    for entry in store.read(run_id, "ops"):
        if "raw_output" in entry.body and entry.body["purpose"] != "action":
            total += entry.body["usage"]["total_tokens"]
    return total


async def test_a_crash_at_any_commit_neither_loses_nor_double_counts_usage() -> None:
    reference = CrashingStore(InMemoryCheckpointStore())
    engine = build_engine(store=reference, snapshot=priced(), model=metered(by_instance),
                          tools=SideEffects().tools())
    await engine.start("count then mail")
    assert (await drive(engine)).status == "completed"
    for crash_after in range(2, reference.commits):
        inner = InMemoryCheckpointStore()
        store = CrashingStore(inner, crash_after=crash_after)
        model, effects = metered(by_instance), SideEffects()
        engine = build_engine(store=store, snapshot=priced(), model=model, tools=effects.tools())
        run_id = await engine.start("count then mail")
        with pytest.raises(Crash):
            await drive(engine)
        store.crash_after = None
        for _ in range(3):  # resume; an unknown send_mail is treated as ran
            engine = build_engine(store=store, snapshot=priced(), model=model,
                                  tools=effects.tools(), run_id=run_id)
            if engine.status == "completed":
                break
            unknown = engine.unknown()
            if unknown is not None and unknown.kind == "tool":
                await engine.resolve(Verdict(kind="ran", by="ops"))
            else:
                await engine.begin_execution(retry_unknown_models=True)
            await drive(engine)
        assert engine.status == "completed", (crash_after, engine.error)
        usage = engine.usage()
        assert usage.total_tokens == recorded_tokens(inner, run_id), crash_after


async def test_the_budget_also_stops_a_review_and_holds_across_attachments() -> None:
    """The action fits a budget its review could cross: the completion review is not
    sent; a plain resume in another attachment stays blocked; a raise sends it."""
    def fn(request: ModelRequest) -> ModelResponse:
        return ScriptedModel.verdict("complete") if request.purpose == "verification" \
            else ScriptedModel.answer("42")

    snapshot = make_snapshot(model={"model": "m", "max_output_tokens": SMALL_OUTPUT})
    reference = estimated(fn)
    engine = build_engine(snapshot=snapshot, model=reference)
    await engine.start("Q answer at once")
    assert (await drive(engine)).status == "completed"
    action = call_tokens(reference, 0)
    model, store = estimated(fn), InMemoryCheckpointStore()
    capped = make_snapshot(model={"model": "m", "max_output_tokens": SMALL_OUTPUT},
                           limits={"max_tokens": action + UNUSED_OUTPUT})
    engine = build_engine(store=store, snapshot=capped, model=model)
    run_id = await engine.start("Q answer at once")
    assert (await drive(engine)).error_code == "budget_exceeded"
    assert [p for p, _ in calls(model)] == ["action"]
    assert engine.error is not None and "next verification call" in engine.error["message"]
    again = build_engine(store=store, snapshot=capped, model=model, run_id=run_id)
    assert again.way_out() == "raise_budget" and again.usage().total_tokens == action
    await again.begin_execution()
    assert (await drive(again)).error_code == "budget_exceeded"
    await again.begin_execution(raise_budget=RaiseBudget(by="ops", max_tokens=100_000))
    assert (await drive(again)).status == "completed"
    assert [p for p, _ in calls(model)] == ["action", "verification"]
    assert again.usage().total_tokens == action + call_tokens(model, 1)
