"""CharacterCompactionPolicy: 60,000-character trigger, ~16,000 kept, same safety rules."""

from __future__ import annotations

import copy

import pytest
from unit.context.context_fixtures import Summarizer, assistant_calls, context, conversation, tool

from agentloom_runtime.context import (
    CharacterCompactionPolicy,
    CompactionFailureMemory,
    protocol_violations,
)
from agentloom_runtime.context._protocol import from_ranges
from agentloom_runtime.contracts import ModelRequest
from agentloom_runtime.errors import ConfigError, ModelStatusError


def chars(messages: list[dict[str, object]]) -> int:
    return CharacterCompactionPolicy()._measure().total(messages, [])


def test_defaults_and_config() -> None:
    p = CharacterCompactionPolicy()
    assert p.module_id == "character-handoff/v1"
    assert p.checkpoint_config()["trigger_chars"] == 60_000
    assert p.checkpoint_config()["keep_chars"] == 16_000
    assert p.validate_request(ModelRequest(messages=[])) is None  # it knows no model window
    for bad in ({"trigger_chars": 0}, {"keep_chars": 55_000}, {"max_compaction_calls": 17},
                {"summary_chars": True}, {"retry_growth_ratio": 0}):
        with pytest.raises(ConfigError):
            CharacterCompactionPolicy(**bad)


def test_trigger_at_sixty_thousand_characters() -> None:
    p = CharacterCompactionPolicy()
    small, big = conversation(40), conversation(110)
    assert chars(small) < 60_000 <= chars(big)
    assert p.should_compact(context(small)) is False
    assert p.should_compact(context(big)) == "characters"
    assert p.should_compact(context(small, counters={"user_turns": 999})) is False


async def test_keeps_about_sixteen_thousand_characters_of_recent_groups() -> None:
    view = conversation(110)
    ctx = context(view)
    original = copy.deepcopy(view)
    result = await CharacterCompactionPolicy().compact(ctx, Summarizer())
    assert result is not None
    assert view == original
    assert protocol_violations(result.messages) == []
    index = result.metrics["summary_index"]
    tail = list(result.messages[index + 1:])
    assert 12_000 < chars(tail) <= 16_000
    assert tail == view[len(view) - len(tail):]
    assert result.metrics["estimate_after"] < 60_000
    covered = from_ranges(result.metrics["source_indexes"])
    assert covered == list(range(2, 2 + len(covered)))


async def test_never_splits_a_call_from_its_results() -> None:
    view = [*conversation(110), assistant_calls("a", "b"), tool("a", "x" * 9_000),
            tool("b", "y" * 9_000)]
    result = await CharacterCompactionPolicy().compact(context(view), Summarizer())
    assert result is not None
    assert protocol_violations(result.messages, allow_pending_tail=False) == []
    ids = [m.get("tool_call_id") for m in result.messages if m.get("role") == "tool"]
    assert ids.count("a") == ids.count("b")


async def test_failures_leave_the_view_and_back_off() -> None:
    memory = CompactionFailureMemory()
    fake = Summarizer(ModelStatusError("no", status=500))
    ctx = context(conversation(110))
    p = CharacterCompactionPolicy()
    assert await p.compact(ctx, fake, memory=memory) is None
    assert memory.failures == 1
    calls = len(fake.requests)
    assert await p.compact(ctx, fake, memory=memory) is None
    assert len(fake.requests) == calls and memory.last_outcome == "deferred"
