"""Compaction never wedges a run (issue 9): a ``context.compact.after`` rewrite that
fails validation is refused like any bad result (the view stays, the failure memory
records it, the run goes on), and the host validates every result itself — smaller,
protocol-valid, no longer triggering — whatever the policy says. A policy that implements
only ``compact`` (all the contract asks) runs with the base's defaults (issue 17)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from support.engine import (
    COMPACTING,
    MAILED,
    SideEffects,
    build_engine,
    drive,
    mailing,
    make_snapshot,
)

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.context import CompactionFailureMemory, CompactionPolicyBase, Decision
from agentloom_runtime.contracts import (
    CompactionResult,
    ContextInput,
    Message,
    ModelCall,
)
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.hooks import Continue, HookDefinition, HookRegistry, PatchOutput
from agentloom_runtime.testing import FunctionModel

EXPECTED = MAILED


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, topic: str, data: Any) -> None:
        self.seen.append((topic, dict(data)))

    def topics(self) -> list[str]:
        return [t for t, _ in self.seen]


async def step_all(engine: Any, store: InMemoryCheckpointStore, run_id: str,
                   events: Events) -> list[dict[str, Any]]:
    """Drive to the end; for every step that refused a compaction, what it left behind."""
    refusals = []
    for _ in range(300):
        snaps = len(store.read(run_id, "snap:main"))
        before = len(events.seen)
        result = await engine.step()
        refused = [d for t, d in events.seen[before:] if t == "context.compaction_refused"]
        if refused:
            loaded = store.load_head(run_id)
            assert loaded is not None
            refusals.append({"reason": refused[0]["reason"], "kind": result.kind,
                             "snapshot_added": len(store.read(run_id, "snap:main")) > snaps,
                             "memory": loaded.body["frames"]["main"]["compaction_memory"]})
        if result.next == "done":
            return refusals
    raise AssertionError("the run did not end")


async def test_a_compact_after_rewrite_that_fails_validation_is_refused_and_the_run_goes_on(
        ) -> None:
    """The first summary is rewritten into one larger than the view it replaces; the host
    refuses it (before: TypeError from record_failure), keeps the view, remembers the
    failure, and later compactions go through."""
    rewrites: list[int] = []

    async def bloat(ctx: Any, payload: dict[str, Any]) -> Any:
        if rewrites:
            return Continue()
        rewrites.append(len(payload["summary"]))
        return PatchOutput({"summary": "padding " * 4_000})

    registry = HookRegistry([HookDefinition("bloat", "1", bloat, replay_safe=True)])
    snapshot = make_snapshot(
        **COMPACTING,
        hooks=[{"hook_id": "bloat", "version": "1", "point": "context.compact.after"}])
    store, effects, events = InMemoryCheckpointStore(), SideEffects(), Events()
    engine = build_engine(store=store, snapshot=snapshot, model=FunctionModel(mailing),
                          tools=effects.tools(), compaction="default", hook_registry=registry,
                          emit=events)
    run_id = await engine.start("mail everyone " + "with care " * 40)
    refusals = await step_all(engine, store, run_id, events)
    assert engine.status == "completed", engine.error
    assert rewrites, "the hook rewrote a summary"
    first = refusals[0]
    assert "not smaller" in first["reason"] or "still triggers" in first["reason"]
    assert not first["snapshot_added"], "the view was left as it was"
    assert first["memory"]["failures"] == 1 and first["memory"]["last_reason"] == first["reason"]
    assert store.read(run_id, "snap:main"), "a later compaction committed"
    assert effects.calls == EXPECTED


class Policy(CompactionPolicyBase):
    """A policy that says yes to its own bad results (validate_compaction_result is the
    base's: nothing to object to). Compacts once the view has 9 messages."""

    module_id = "bad-policy/v1"

    def __init__(self, fault: str) -> None:
        self.fault = fault
        self.attempts = 0

    def should_compact(self, context: ContextInput) -> Decision:
        return "budget" if len(context.messages) >= 9 else False

    async def compact(self, context: ContextInput, call: ModelCall, *,
                      memory: CompactionFailureMemory | None = None
                      ) -> CompactionResult | None:
        self.attempts += 1
        messages = list(context.messages)
        head, body = messages[:2], messages[2:]
        summary: Message = {"role": "user", "content": "[summary] mailed"}
        if self.fault == "not_smaller":
            new = [*messages, {"role": "user", "content": "[summary] " + "x" * 50}]
        elif self.fault == "breaks_protocol":
            orphan = next(m for m in body if m.get("role") == "tool")
            new = [*head, summary, orphan]  # a tool result whose call is gone
        else:  # still_triggers: smaller and valid, but still 9 messages or more
            new = [*head, summary, *body[-6:]]
            assert len(messages) > len(new) >= 9
        return CompactionResult(messages=new, summary="[summary] mailed")


@pytest.mark.parametrize(("fault", "reason"), [
    ("not_smaller", "not smaller"),
    ("breaks_protocol", "breaks the chat protocol"),
    ("still_triggers", "still triggers"),
])
async def test_the_host_refuses_a_bad_compaction_result_whatever_the_policy_says(
        fault: str, reason: str) -> None:
    store, effects, events = InMemoryCheckpointStore(), SideEffects(), Events()
    policy = Policy(fault)
    engine = build_engine(store=store, model=FunctionModel(mailing), tools=effects.tools(),
                          compaction=policy, emit=events)
    run_id = await engine.start("mail everyone")
    refusals = await step_all(engine, store, run_id, events)
    assert engine.status == "completed", engine.error
    assert policy.attempts >= 1 and refusals
    assert all(reason in r["reason"] for r in refusals), refusals
    assert all(r["kind"] == "action" for r in refusals), "the same step went on to the action"
    assert store.read(run_id, "snap:main") == [], "no refused view was ever committed"
    assert not engine.main_view().compacted
    assert refusals[0]["memory"]["failures"] == 1
    assert effects.calls == EXPECTED
    assert "context.compacted" not in events.topics()


class OnlyCompact:
    """Only what the contract asks of a compaction policy: ``compact`` (and a module's
    ``module_id`` / ``checkpoint_config``), no base class. Once the view has 9 messages,
    everything between the task and the last call group becomes one summary."""

    module_id = "only-compact/v1"

    def __init__(self) -> None:
        self.compacted = 0
        self.closed = 0

    def checkpoint_config(self) -> dict[str, Any]:
        return {}

    async def compact(self, context: ContextInput, call: ModelCall, *,
                      memory: Any = None) -> CompactionResult | None:
        messages = list(context.messages)
        if len(messages) < 9:
            return None
        self.compacted += 1
        mailed = sorted(set(re.findall(r"user\d+@example\.com", str(messages))))
        summary: Message = {"role": "user", "content": f"[summary] mailed {mailed}"}
        return CompactionResult(messages=[*messages[:2], summary, *messages[-2:]],
                                summary=summary["content"])

    async def aclose(self) -> None:
        self.closed += 1


async def test_a_policy_that_implements_only_compact_runs_with_the_base_defaults() -> None:
    """Before: ``step()`` raised AttributeError (``should_compact``) on the first step."""
    store, effects, policy = InMemoryCheckpointStore(), SideEffects(), OnlyCompact()
    engine = build_engine(store=store, model=FunctionModel(mailing), tools=effects.tools(),
                          compaction=policy)
    run_id = await engine.start("mail everyone")
    assert (await drive(engine)).status == "completed", engine.error
    assert effects.calls == EXPECTED
    assert policy.compacted and store.read(run_id, "snap:main"), "its views were committed"
    await engine.close()
    assert policy.closed == 1, "the host's own object is closed, once"


def test_a_bare_policy_that_defines_an_optional_method_is_refused() -> None:
    """A hard limit written on a policy outside the base would never be called: the
    engine refuses it rather than drop it silently."""

    class Limited(OnlyCompact):
        def validate_request(self, request: Any) -> None:
            return None

    with pytest.raises(ConfigError, match="CompactionPolicyBase"):
        build_engine(compaction=Limited())
