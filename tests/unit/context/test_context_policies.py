"""The compaction-policy base (capabilities with defaults, no reflection), NoCompaction,
the failure memory's defaults, and incremental sizes of growing views."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from unit.context.context_fixtures import Summarizer, call_group, context, conversation

from agentloom_runtime.context import (
    BudgetCompactionPolicy,
    CharacterCompactionPolicy,
    CompactionFailureMemory,
    CompactionPolicyBase,
    NoCompaction,
    Utf8BytesEstimator,
)
from agentloom_runtime.context._sizes import LINEAGES, RunningSizes
from agentloom_runtime.contracts import (
    CompactionPolicy,
    CompactionResult,
    ContextInput,
    Message,
    ModelCall,
    ModelRequest,
)
from agentloom_runtime.errors import BudgetExceeded


class OnlyCompact(CompactionPolicyBase):
    """A policy that implements nothing but ``compact``."""

    module_id = "only-compact/v1"

    async def compact(self, context: ContextInput, call: ModelCall, *,
                      memory: CompactionFailureMemory | None = None
                      ) -> CompactionResult | None:
        return CompactionResult(messages=list(context.messages[:1]))


async def test_a_policy_implementing_only_compact_gets_every_default() -> None:
    policy = OnlyCompact()
    ctx = context(conversation(2))
    assert policy.should_compact(ctx) is None  # not decided up front: compact decides
    assert policy.estimate(ctx.messages, ()) is None
    assert policy.validate_request(ModelRequest(messages=list(ctx.messages))) is None
    assert policy.validate_compaction_result(ctx.messages, ctx.messages[:1], ()) is None
    assert policy.checkpoint_config() == {}
    result = await policy.compact(ctx, Summarizer(), memory=CompactionFailureMemory())
    assert result is not None and len(result.messages) == 1
    port: CompactionPolicy = policy  # the host's protocol
    assert port.module_id == "only-compact/v1"


async def test_no_compaction_never_compacts() -> None:
    policy = NoCompaction()
    ctx = context(conversation(30))
    assert policy.module_id == "no-compaction/v1" and policy.checkpoint_config() == {}
    assert policy.should_compact(ctx) is False
    port: CompactionPolicy = policy  # NoCompaction.compact is typed -> None
    assert await port.compact(ctx, Summarizer(), memory=CompactionFailureMemory()) is None
    assert policy.validate_request(ModelRequest(messages=list(ctx.messages))) is None


def test_the_shipped_policies_are_policy_bases_with_their_own_capabilities() -> None:
    budget = BudgetCompactionPolicy(context_window=10_000, max_output_tokens=1_000,
                                    safety_margin_tokens=0, estimator=Utf8BytesEstimator())
    character = CharacterCompactionPolicy()
    ctx = context(conversation(3))
    for policy in (budget, character):
        assert isinstance(policy, CompactionPolicyBase)
        size = policy.estimate(ctx.messages, ctx.tools)
        assert isinstance(size, int) and size > 0
    assert budget.estimate(ctx.messages, ()) == Utf8BytesEstimator().estimate(
        ctx.messages, ())
    assert isinstance(budget.validate_request(ModelRequest(messages=list(ctx.messages))), int)
    with pytest.raises(BudgetExceeded):
        budget.validate_request(ModelRequest(messages=list(conversation(40))))
    assert character.validate_request(ModelRequest(messages=list(ctx.messages))) is None


def test_record_failure_needs_only_a_reason() -> None:
    memory = CompactionFailureMemory()
    memory.record_failure("the summary was refused")
    assert (memory.failures, memory.last_reason, memory.last_outcome) == (
        1, "the summary was refused", "failed")
    assert memory.allows(0, 0)  # nothing to wait for was recorded
    memory.record_failure(reason="again", estimate=1_000, model_steps=4)  # default gaps
    assert memory.retry_at_estimate == 1_000 + 200 and memory.retry_at_steps == 4 + 4
    assert not memory.allows(1_100, 5) and memory.allows(1_200, 5) and memory.allows(0, 8)
    memory.record_failure("steps only", model_steps=10)
    assert memory.retry_at_estimate is None and memory.retry_at_steps == 10 + 8
    assert not memory.allows(10**9, 17) and memory.allows(0, 18)
    assert CompactionFailureMemory.from_dict(memory.to_dict()) == memory


# ---------------------------------------------------------------- incremental sizes


class CountingCosts:
    def __init__(self) -> None:
        self.measured = 0

    def __call__(self, messages: Sequence[Message]) -> list[int]:
        self.measured += len(messages)
        return [len(str(m.get("content"))) + 1 for m in messages]


def full(messages: Sequence[Message]) -> int:
    return sum(len(str(m.get("content"))) + 1 for m in messages)


def test_a_growing_view_is_measured_only_on_its_new_messages() -> None:
    costs = CountingCosts()
    sizes = RunningSizes(costs, lambda tools: 7 * len(tools))
    view = conversation(50)
    assert sizes.messages("v", tuple(view))[0] == full(view)
    measured = costs.measured
    for turn in range(20):
        view = [*view, *call_group(100 + turn, 2)]  # a new list each step, like the host
        assert sizes.messages("v", tuple(view))[0] == full(view)
    assert costs.measured - measured == 20 * 3  # only what was appended
    request = [*view, {"role": "user", "content": "material"}]  # per-request extras
    assert sizes.messages("r", request)[0] == full(request)
    grown = [*view, {"role": "assistant", "content": "next"}, {"role": "user", "content": "x"}]
    assert sizes.messages("r", grown)[0] == full(grown)  # the extra replaced, not counted
    assert sizes.tools("r", [{"t": 1}, {"t": 2}]) == 14


def test_running_sizes_equal_a_full_measure_whatever_the_host_passes() -> None:
    rng = random.Random(7)
    costs = CountingCosts()
    sizes = RunningSizes(costs, lambda tools: 0)
    view: list[dict[str, Any]] = conversation(5)
    for step in range(300):
        action = rng.random()
        if action < 0.5:
            view = [*view, {"role": "user", "content": "n" * rng.randrange(50)}]
        elif action < 0.7 and len(view) > 3:
            view = view[:rng.randrange(1, len(view))]  # a replaced tail
        elif action < 0.8:
            view = [dict(m) for m in view]  # rebuilt from a checkpoint: equal, not same
        elif action < 0.9:
            view = conversation(rng.randrange(1, 4))  # compacted: a new base
        else:
            i = rng.randrange(len(view))  # a message replaced in the middle
            view = [*view[:i], {"role": "user", "content": f"edit {step}"}, *view[i + 1:]]
        total, measured = sizes.messages("main", tuple(view))
        assert total == full(view) and sum(measured) == total and len(measured) == len(view)


def test_lineages_are_bounded_and_known_sequences_are_recognised() -> None:
    sizes = RunningSizes(CountingCosts(), lambda tools: 0)
    first = tuple(conversation(2))
    sizes.messages(0, first)
    assert sizes.known(first) == full(first) and sizes.known(tuple(first)) == full(first)
    assert sizes.known(list(first)) is None  # another object: measured normally
    for key in range(1, LINEAGES + 1):
        sizes.messages(key, first[:1])
    assert sizes.known(first) is None  # the oldest lineage was dropped


def test_interleaved_views_under_one_key_each_stay_incremental() -> None:
    """A policy shared by two runs sees two "main" views: neither evicts the other."""
    costs = CountingCosts()
    sizes = RunningSizes(costs, lambda tools: 0)
    a = [{"role": "system", "content": "same prompt"}, *conversation(30)[1:]]
    b = [{"role": "system", "content": "same prompt"},
         *[{**m, "content": f"other {m.get('content')}"} for m in conversation(30)[1:]]]
    sizes.messages("main", tuple(a))
    sizes.messages("main", tuple(b))
    measured = costs.measured
    for turn in range(10):
        a = [*a, {"role": "user", "content": f"a{turn}"}]
        b = [*b, {"role": "user", "content": f"b{turn}"}]
        assert sizes.total("main", a) == full(a)
        assert sizes.total("main", b) == full(b)
    assert costs.measured - measured == 20


def test_policy_sizes_stay_exact_along_a_growing_view() -> None:
    estimator = Utf8BytesEstimator()
    policy = BudgetCompactionPolicy(context_window=10**9, max_output_tokens=1_000,
                                    safety_margin_tokens=0, estimator=estimator)
    view = conversation(3)
    tools = [{"type": "function", "function": {"name": "read"}}]
    for turn in range(30):
        view = [*view, *call_group(50 + turn, 1)]
        ctx = context(view, tools=[dict(t) for t in tools])
        assert policy.should_compact(ctx) is False
        stripped = [{k: v for k, v in m.items() if not k.startswith("_")} for m in view]
        request = ModelRequest(messages=stripped, tools=[dict(t) for t in tools])
        assert policy.validate_request(request) == estimator.estimate(stripped, tools)
        assert policy.estimate(ctx.messages, ctx.tools) == estimator.estimate(view, tools)
