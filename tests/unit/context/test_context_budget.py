"""BudgetCompactionPolicy: validation, triggers, compaction, hard limit, failures."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from unit.context.context_fixtures import (
    SYSTEM,
    TASK,
    Summarizer,
    assistant_calls,
    call_group,
    context,
    conversation,
    tool,
)

from agentloom_runtime.context import (
    BudgetCompactionPolicy,
    CompactionFailureMemory,
    Utf8BytesEstimator,
    protocol_violations,
    with_summary,
)
from agentloom_runtime.context._protocol import from_ranges
from agentloom_runtime.contracts import ModelRequest
from agentloom_runtime.errors import (
    BudgetExceeded,
    ConfigError,
    ModelOutcomeUnknown,
    ModelStatusError,
    ModelTransportError,
)


def policy(**overrides: Any) -> BudgetCompactionPolicy:
    settings: dict[str, Any] = {"context_window": 12_000, "max_output_tokens": 1_000,
                                "safety_margin_tokens": 1_000,
                                "estimator": Utf8BytesEstimator()}
    return BudgetCompactionPolicy(**{**settings, **overrides})


# ---------------------------------------------------------------- configuration


def test_the_seed_example_budget() -> None:
    p = policy(context_window=32_768, max_output_tokens=4_096, safety_margin_tokens=1_024)
    assert p.effective_budget == 27_648
    assert math.floor(p.trigger_tokens) == 22_118
    assert p.target_tokens == pytest.approx(16_588.8)
    config = p.checkpoint_config()
    assert config["estimator"] == {"module_id": "utf8-bytes-with-framing/v1",
                                   "config": Utf8BytesEstimator().checkpoint_config()}
    assert json.loads(json.dumps(config)) == config
    assert (config["context_ratio"], config["target_ratio"], config["user_turns"],
            config["model_steps"], config["max_compaction_calls"]) == (0.8, 0.6, None, None, 4)


@pytest.mark.parametrize("bad", [
    {"context_ratio": 0.6, "target_ratio": 0.6}, {"context_ratio": 1.01},
    {"target_ratio": 0}, {"target_ratio": -0.1}, {"context_ratio": True},
    {"context_ratio": float("nan")}, {"target_ratio": "0.5"},
    {"user_turns": 0}, {"user_turns": -1}, {"user_turns": 2.0}, {"user_turns": True},
    {"model_steps": 0}, {"max_compaction_calls": 0}, {"max_compaction_calls": 17},
    {"max_output_tokens": 11_000}, {"context_window": 2_000},
    {"safety_margin_tokens": -1}, {"context_window": 0}, {"estimator": object()},
])
def test_invalid_settings_are_config_errors(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        policy(**bad)


def test_limits_that_are_allowed() -> None:
    p = policy(context_ratio=1, target_ratio=0.01, user_turns=1, model_steps=1,
               max_compaction_calls=16)
    assert p.context_ratio == 1.0 and p.max_compaction_calls == 16


def test_from_settings_reads_the_published_policy_and_the_connection() -> None:
    p = BudgetCompactionPolicy.from_settings(
        {"context_ratio": 0.7, "target_ratio": 0.5, "user_turns": 3, "model_steps": None,
         "max_compaction_calls": 2},
        {"provider": "openai", "model": "gpt-4o", "context_window": 128_000,
         "max_output_tokens": 4_096, "safety_margin_tokens": 1_024})
    assert p.estimator.module_id == "openai-bpe/v1"
    assert (p.effective_budget, p.user_turns, p.max_compaction_calls) == (122_880, 3, 2)
    with pytest.raises(ConfigError, match="unknown"):
        BudgetCompactionPolicy.from_settings({"ratio": 1}, {"context_window": 10})


# ---------------------------------------------------------------- triggers


def test_triggers_budget_or_turns_or_steps() -> None:
    small = conversation(1)
    big = conversation(14)
    p = policy(user_turns=3, model_steps=10)
    assert p.should_compact(context(small)) is False
    assert p.should_compact(context(big)) == "budget"
    assert p.should_compact(context(small, counters={"user_turns": 3})) == "user_turns"
    assert p.should_compact(context(small, counters={
        "user_turns": 5, "baseline_user_turns": 3})) is False
    assert p.should_compact(context(small, counters={"model_steps": 10})) == "model_steps"
    assert p.should_compact(context(small, counters={
        "model_steps": 19, "baseline_model_steps": 10})) is False
    assert policy().should_compact(context(small, counters={
        "user_turns": 99, "model_steps": 99})) is False  # disabled by default


def test_the_budget_trigger_is_at_or_above_the_ratio() -> None:
    p = policy()
    view = conversation(9)
    size = p.estimate(view, [])
    at = policy(context_window=math.ceil(size / 0.8) + 2_000)
    assert at.trigger_tokens <= size or at.should_compact(context(view)) is False
    exact = BudgetCompactionPolicy(context_window=size * 5 + 2_000, max_output_tokens=1_000,
                                   safety_margin_tokens=1_000, estimator=Utf8BytesEstimator(),
                                   context_ratio=0.2, target_ratio=0.1)
    assert exact.trigger_tokens == size
    assert exact.should_compact(context(view)) == "budget"


def test_tools_count_toward_the_budget() -> None:
    schema = {"type": "function", "function": {"name": "t", "description": "d" * 9_000}}
    p = policy()
    view = conversation(1)
    assert p.should_compact(context(view)) is False
    assert p.should_compact(context(view, tools=[schema])) == "budget"


# ---------------------------------------------------------------- hard limit


def test_validate_request_stops_requests_over_the_effective_budget() -> None:
    p = policy()
    ok = ModelRequest(messages=conversation(3), purpose="verification")
    assert p.validate_request(ok) == p.estimate(ok.messages, [])
    too_big = ModelRequest(messages=conversation(14), purpose="compaction")
    with pytest.raises(BudgetExceeded) as info:
        p.validate_request(too_big)
    assert info.value.details["budget"] == 10_000
    assert info.value.details["purpose"] == "compaction"


# ---------------------------------------------------------------- compaction


async def test_compaction_keeps_system_task_plan_and_recent_groups() -> None:
    view = conversation(14)
    plan = [{"title": "collect numbers", "status": "done"},
            {"title": "write report", "status": "in_progress"}]
    ctx = context(view, counters={"user_turns": 2, "model_steps": 30}, plan=plan)
    original = copy.deepcopy(ctx.messages)
    fake = Summarizer()
    p = policy()
    result = await p.compact(ctx, fake)
    assert result is not None
    assert ctx.messages == original  # nothing mutated
    messages = list(result.messages)
    assert messages[0] is view[0] and messages[1] is view[1]  # system, task
    summary = messages[result.metrics["summary_index"]]
    assert summary["role"] == "user" and summary["_summary"] is True
    assert "Summary: did things." in summary["content"]
    assert "[in_progress] write report" in summary["content"]
    assert result.summary == "Summary: did things."
    assert protocol_violations(messages) == []
    m = result.metrics
    assert m["estimate_after"] < m["estimate_before"]
    assert m["estimate_after"] < p.trigger_tokens and m["target_reached"] is True
    assert m["trigger"] == "budget" and m["calls"] == len(fake.requests) >= 1
    assert m["baselines"] == {"baseline_user_turns": 2, "baseline_model_steps": 30}
    covered = from_ranges(m["source_indexes"])
    assert covered == list(range(2, 2 + len(covered)))  # the oldest history after the task
    assert from_ranges(m["source_seqs"]) == [view[i]["_seq"] for i in covered]
    assert summary["_covers"] == m["source_seqs"]
    kept = [m for m in messages if not m.get("_summary")]
    assert kept == [msg for i, msg in enumerate(view) if i not in covered]
    for request in fake.requests:
        assert request.purpose == "compaction" and request.tools == ()
        assert all(not k.startswith("_") for msg in request.messages for k in msg)
        p.validate_request(request)


async def test_summary_provenance_chains_through_earlier_summaries() -> None:
    p = policy()
    first = await p.compact(context(conversation(14)), Summarizer())
    assert first is not None
    grown = [*first.messages, *conversation(14)[2:]]
    grown = [m if m.get("_summary") or m.get("role") == "system" else
             {**m, "_seq": 100 + i} for i, m in enumerate(grown)]
    second = await p.compact(context(grown), Summarizer("Second summary."))
    assert second is not None
    seqs = from_ranges(second.metrics["source_seqs"])
    assert set(from_ranges(first.metrics["source_seqs"])) <= set(seqs)


async def test_an_oversized_group_is_summarised_in_ordered_pieces() -> None:
    text = "".join(f"<line {i:05d}> " for i in range(3_000))  # ~39,000 characters
    view = [SYSTEM, {"role": "user", "content": TASK}, assistant_calls("big"),
            tool("big", text), *conversation(2, seqs=False)[2:]]
    p = policy(context_window=40_000, max_compaction_calls=8)
    fake = Summarizer()
    result = await p.compact(context(view), fake)
    assert result is not None
    parts = [m for m in fake.materials if "oversized message group" in m]
    assert len(parts) >= 2
    assert all(f"[part {i}/{len(parts)} " in part for i, part in enumerate(parts, 1))
    fragments = [part.split("follow in order]\n", 1)[1].split("\n\nWrite the ")[0]
                 for part in parts]
    assert text in "".join(fragments)  # every character, in order, nothing dropped
    assert protocol_violations(result.messages) == []
    assert not any(m.get("tool_call_id") == "big" for m in result.messages)


async def test_an_oversized_group_that_needs_too_many_calls_stays_verbatim() -> None:
    text = "word " * 12_000  # 60,000 characters: more pieces than one call allows
    view = [SYSTEM, {"role": "user", "content": TASK}, assistant_calls("big"),
            tool("big", text), *conversation(6, seqs=False)[2:]]
    p = policy(context_window=75_000, max_compaction_calls=1)
    assert p.trigger_tokens <= p.estimate(view, []) <= p.effective_budget
    fake = Summarizer()
    result = await p.compact(context(view), fake)
    assert fake.requests == []  # the oldest unit does not fit: nothing is half-summarised
    assert result is None


async def test_over_the_hard_budget_an_oversized_group_is_summarised_from_its_head() -> None:
    """The same group in a view over the hard budget: staying verbatim would leave a
    request that is never sent (issue 17), so it is summarised from the fragments the
    calls allow, with a note of what was left out; the source records keep it whole."""
    text = "word " * 12_000
    view = [SYSTEM, {"role": "user", "content": TASK}, assistant_calls("big"),
            tool("big", text), *conversation(6, seqs=False)[2:]]
    p = policy(context_window=40_000, max_compaction_calls=1)
    assert p.estimate(view, []) > p.effective_budget
    fake = Summarizer()
    result = await p.compact(context(view), fake)
    assert result is not None and len(fake.requests) == 1
    [material] = fake.materials
    assert "characters, is left out" in material and "[part 1/1 " in material
    assert p.estimate(result.messages, []) < p.trigger_tokens
    assert not any(m.get("tool_call_id") == "big" for m in result.messages)
    assert protocol_violations(result.messages) == []


async def test_over_the_hard_budget_a_smaller_view_is_progress_even_if_still_over() -> None:
    """Seven groups of 5,000 characters and one summary call per preparation: no single
    preparation can bring the view within the budget, so each commits what it folded and
    the next goes on from there (before: skipped every time, a request never sent)."""
    view = [SYSTEM, {"role": "user", "content": TASK}]
    for k in range(7):
        view += [assistant_calls(f"g{k}"), tool(f"g{k}", f"result {k} " + "r" * 5_000)]
    p = policy(context_window=16_000, max_compaction_calls=1)
    sizes = [p.estimate(view, [])]
    while sizes[-1] > p.effective_budget:
        result = await p.compact(context(view), Summarizer())
        assert result is not None, "a preparation over the hard budget makes progress"
        view = list(result.messages)
        sizes.append(p.estimate(view, []))
        assert sizes[-1] < sizes[-2] and protocol_violations(view) == []
    assert len(sizes) > 2, "it took more than one preparation"
    assert any(m.get("content") == TASK for m in view)


async def test_a_pending_group_at_the_end_is_never_summarised() -> None:
    view = [*conversation(14), assistant_calls("p1", "p2"), tool("p1")]
    ctx = context(view)
    result = await policy().compact(ctx, Summarizer())
    assert result is not None
    assert list(result.messages[-2:]) == view[-2:]
    assert protocol_violations(result.messages) == []


async def test_turn_trigger_folds_older_history_without_budget_pressure() -> None:
    view = conversation(6)
    p = policy(context_window=200_000, user_turns=2)
    ctx = context(view, counters={"user_turns": 4, "baseline_user_turns": 1})
    result = await p.compact(ctx, Summarizer("Short."))
    assert result is not None
    assert result.metrics["trigger"] == "user_turns"
    assert result.metrics["baselines"]["baseline_user_turns"] == 4
    assert len(result.messages) < len(view)


async def test_skips_without_a_call_when_nothing_is_compressible() -> None:
    fake = Summarizer()
    memory = CompactionFailureMemory()
    # a trigger fired by turns, but the view is only system + task
    ctx = context([SYSTEM, {"role": "user", "content": TASK}], counters={"user_turns": 9})
    assert await policy(user_turns=1).compact(ctx, fake, memory=memory) is None
    assert memory.last_outcome == "skipped" and memory.failures == 0
    # no trigger at all
    assert await policy().compact(context(conversation(1)), fake, memory=memory) is None
    assert fake.requests == []


async def test_skips_when_pinned_content_alone_is_over_the_trigger() -> None:
    task = "t" * 9_000
    view = [SYSTEM, *conversation(3, seqs=False)[2:], {"role": "user", "content": task}]
    ctx = context(view)
    ctx = type(ctx)(task=task, plan=[], messages=view, instance="main", tools=[],
                    counters={})
    memory = CompactionFailureMemory()
    fake = Summarizer()
    assert await policy().compact(ctx, fake, memory=memory) is None
    assert fake.requests == [] and memory.last_outcome == "skipped"
    assert "no room" in (memory.last_reason or "")


@pytest.mark.parametrize("reply", [
    ModelStatusError("boom", status=500), ModelTransportError("down"), "", "   ",
    "x" * 40_000,  # a "summary" larger than what it replaces
])
async def test_failed_summaries_change_nothing(reply: str | BaseException) -> None:
    view = conversation(14)
    ctx = context(view)
    original = copy.deepcopy(view)
    memory = CompactionFailureMemory()
    assert await policy().compact(ctx, Summarizer(reply), memory=memory) is None
    assert view == original
    assert memory.failures == 1 and memory.last_outcome == "failed"


@pytest.mark.parametrize("error", [ModelOutcomeUnknown("sent"), BudgetExceeded("calls")])
async def test_hard_errors_propagate(error: BaseException) -> None:
    with pytest.raises(type(error)):
        await policy().compact(context(conversation(14)), Summarizer(error))


async def test_failure_memory_backs_off_and_survives_a_round_trip() -> None:
    p = policy(context_window=60_000, context_ratio=0.5, target_ratio=0.3)
    view = conversation(40)
    size = p.estimate(view, [])
    assert p.trigger_tokens <= size <= p.effective_budget
    memory = CompactionFailureMemory()
    fake = Summarizer(ModelStatusError("x", status=503))
    ctx = context(view, counters={"model_steps": 10})
    assert await p.compact(ctx, fake, memory=memory) is None
    assert memory.failures == 1 and memory.retry_at_steps == 12
    assert memory.retry_at_estimate == math.ceil(size * 1.1)
    calls = len(fake.requests)

    restored = CompactionFailureMemory.from_dict(json.loads(json.dumps(memory.to_dict())))
    assert restored == memory
    assert await p.compact(ctx, fake, memory=restored) is None
    assert len(fake.requests) == calls and restored.last_outcome == "deferred"

    # one more step is not enough; two are: a second failure doubles the wait
    fake.replies.append(ModelStatusError("x", status=503))
    later = context(view, counters={"model_steps": 11})
    assert await p.compact(later, fake, memory=restored) is None
    assert len(fake.requests) == calls
    later = context(view, counters={"model_steps": 12})
    assert await p.compact(later, fake, memory=restored) is None
    assert restored.failures == 2 and restored.retry_at_steps == 12 + 4
    assert restored.retry_at_estimate == math.ceil(size * 1.2)

    # growth reaches the threshold before the steps do; this time the summary works
    grown = [*view, *conversation(12)[2:]]
    assert restored.retry_at_estimate <= p.estimate(grown, []) <= p.effective_budget
    result = await p.compact(context(grown, counters={"model_steps": 13}), fake,
                             memory=restored)
    assert result is not None
    # (read through to_dict: mypy keeps the attribute narrowed to "deferred" above)
    assert restored.failures == 0 and restored.to_dict()["last_outcome"] == "committed"
    assert CompactionFailureMemory.from_dict(restored.to_dict()) == restored


async def test_the_backoff_never_blocks_a_view_over_the_hard_budget() -> None:
    p = policy()
    view = conversation(14)
    assert p.estimate(view, []) > p.effective_budget
    memory = CompactionFailureMemory(failures=3, retry_at_estimate=10**9,
                                     retry_at_steps=10**9)
    assert await p.compact(context(view), Summarizer(), memory=memory) is not None


def test_failure_memory_rejects_unknown_data() -> None:
    assert CompactionFailureMemory.from_dict(None) == CompactionFailureMemory()
    for bad in ({"format": 2}, {"format": 1, "failures": -1},
                {"format": 1, "retry_at_steps": "3"}, {"format": 1, "last_outcome": "won"}):
        with pytest.raises(ConfigError):
            CompactionFailureMemory.from_dict(bad)


# ---------------------------------------------------------------- results after hooks


async def test_with_summary_rerenders_a_hook_rewritten_summary() -> None:
    p = policy()
    ctx = context(conversation(14), plan=[{"title": "a", "status": "pending"}])
    result = await p.compact(ctx, Summarizer())
    assert result is not None
    edited = with_summary(result, "Redacted summary.", ctx.plan)
    index = result.metrics["summary_index"]
    assert edited.summary == "Redacted summary."
    assert "Redacted summary." in edited.messages[index]["content"]
    assert "[pending] a" in edited.messages[index]["content"]
    assert edited.messages[index]["_covers"] == result.messages[index]["_covers"]
    assert p.validate_compaction_result(ctx.messages, edited.messages, ctx.tools) is None
    bloated = with_summary(result, "y" * 40_000)
    reason = p.validate_compaction_result(ctx.messages, bloated.messages, ctx.tools)
    assert reason is not None and "not" in reason


def test_validate_compaction_result_rejects_broken_protocol() -> None:
    p = policy()
    original = conversation(14)
    orphan = [SYSTEM, tool("nobody")]
    assert "protocol" in (p.validate_compaction_result(original, orphan, []) or "")
    split = [SYSTEM, *call_group(1, 2)[:2], {"role": "user", "content": "hi"},
             call_group(1, 2)[2]]
    assert "protocol" in (p.validate_compaction_result(original, split, []) or "")
    assert p.validate_compaction_result(original, [SYSTEM], []) is None


async def test_pinned_messages_stay_and_requests_are_deterministic() -> None:
    view = conversation(14)
    view[5] = {**view[5], "_pin": True}
    first, second = Summarizer(), Summarizer()
    a = await policy().compact(context(view), first)
    b = await policy().compact(context(view), second)
    assert a is not None and b is not None
    assert view[5] in a.messages  # a pinned message is never summarised
    assert 5 not in from_ranges(a.metrics["source_indexes"])
    # a replay after a crash sends exactly the same requests
    assert first.requests == second.requests
    assert a.messages == b.messages and a.metrics == b.metrics
