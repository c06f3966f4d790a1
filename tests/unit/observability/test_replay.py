"""A crash after a model response was saved, then a resume: the replayed call's span is
marked and carries no usage, so traces and metrics count every token once."""

from __future__ import annotations

from collections import defaultdict

import pytest
from support.engine import Crash, SideEffects, build_engine

from agentloom.local.runs import drive
from agentloom.observability import Observer
from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.hooks import Continue, HookDefinition, HookRegistry
from agentloom_runtime.testing import KeyedScriptModel

from .conftest import QUESTION, Spans, attrs, snapshot, usage_script

RUN = "run_0190ab12cd34a1b2c3d4"


class Recorded:
    """A metrics sink that keeps every value (the test's view of what was flushed)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)

    def add(self, name: str, value: float) -> None:
        self.totals[name] += value

    def flush(self) -> None:
        return None


def crashing_once():
    armed = {"on": True}

    async def after(ctx, payload):
        if armed["on"]:
            armed["on"] = False
            raise Crash("the process died inside model.chat.after")
        return Continue()

    registry = HookRegistry()
    registry.register(HookDefinition("after", "1", after, replay_safe=True))
    hooks = [{"hook_id": "after", "version": "1", "point": "model.chat.after",
              "match": {"purposes": ["action"]}}]
    return registry, hooks


async def test_replayed_model_call_is_marked_and_counted_once(spans: Spans) -> None:
    registry, hooks = crashing_once()
    snap = snapshot(hooks=hooks)
    store, model = InMemoryCheckpointStore(), KeyedScriptModel(usage_script())
    effects = SideEffects()
    metrics: list[Recorded] = []

    def observed(**kw):
        sink = Recorded()
        metrics.append(sink)
        obs = Observer.for_run(run_id=RUN, session_id="ses_0190ab12cd34a1b2c3d4",
                               space_id="spc_0190ab12cd34a1b2c3d4", snapshot=snap,
                               tracer_provider=spans.provider, metrics=sink)
        engine = build_engine(store=store, model=model, tools=effects.tools(),
                              snapshot=snap, hook_registry=registry, emit=obs.emit, **kw)
        return obs, engine

    first, engine = observed()
    with first, pytest.raises(Crash):
        await engine.start(QUESTION, run_id=RUN)
        await drive(engine, observer=first)
    crashed = {s.context.span_id for s in spans.all()}

    second, resumed = observed(run_id=RUN)
    with second:
        await resumed.begin_execution()
        assert (await drive(resumed, observer=second)).status == "completed"

    after = [s for s in spans.all() if s.context.span_id not in crashed]
    chats = [s for s in after if s.name.startswith("chat ")]
    replayed = [c for c in chats if attrs(c).get("agentloom.replayed")]
    assert len(replayed) == 1, "the saved response is replayed, not sent again"
    assert "gen_ai.usage.input_tokens" not in attrs(replayed[0])
    (agent,) = [s for s in after if s.name.startswith("invoke_agent")]
    assert attrs(agent)["agentloom.resumed"] is True
    first_step = min((s for s in after if s.name == "agentloom.step"),
                     key=lambda s: s.start_time or 0)
    assert attrs(first_step)["agentloom.resumed"] is True
    assert attrs(first_step)["agentloom.replayed"] is True
    # the usage of every call is on exactly one span and in the metrics once
    usage = resumed.usage()
    every_chat = [s for s in spans.all() if s.name.startswith("chat ")]
    assert sum(attrs(s).get("gen_ai.usage.input_tokens", 0) for s in every_chat) == \
        usage.input_tokens
    assert sum(m.totals["ModelInputTokens"] for m in metrics) == usage.input_tokens
    assert sum(m.totals["ModelOutputTokens"] for m in metrics) == usage.output_tokens
    assert effects.calls == ["ops@example.com"]
