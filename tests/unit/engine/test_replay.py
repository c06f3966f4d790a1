"""Replay (agentloom_runtime.replay): a recorded run replayed on a throwaway store
reproduces its records text for text without running a tool; another configuration
diverges at the first step whose model request differs, with a diff."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import pytest
from support.engine import (
    MAILS,
    NO_COMPACTION,
    SUBS,
    Crash,
    CrashWhen,
    SideEffects,
    build_engine,
    by_instance,
    drive,
    estimated,
    mailing,
    make_snapshot,
    representative_engine,
)

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.checkpoint.store import LogEntry
from agentloom_runtime.replay import Recording, evaluate, replay_run, stored_records
from agentloom_runtime.testing import FunctionModel


async def test_the_representative_run_replays_to_the_same_records(
        effects: SideEffects) -> None:
    store = InMemoryCheckpointStore()
    engine = representative_engine(store, effects)
    run_id = await engine.start("count and mail")
    await drive(engine)
    await engine.close()
    mailed = list(effects.calls)
    recording = Recording.read(store, run_id)
    assert recording.start_recorded and all(c.digest for c in recording.calls)

    report = await replay_run(recording, make_snapshot(mode="plan"), tools=effects.tools(),
                              compaction_policy=NO_COMPACTION)

    assert report.identical, report.to_dict()
    assert report.ended == "stopped" and report.status == "completed"
    assert report.records.recorded == report.records.replayed > 10
    assert effects.calls == mailed  # the mail was not sent again
    assert report.model_calls == len(recording.calls)


async def test_a_changed_prompt_diverges_at_step_1(effects: SideEffects) -> None:
    store = InMemoryCheckpointStore()
    engine = representative_engine(store, effects)
    run_id = await engine.start("count and mail")
    await drive(engine)
    await engine.close()
    recording = Recording.read(store, run_id)
    own = make_snapshot(mode="plan")
    other = make_snapshot(mode="plan", prompt="You are another agent.")

    baseline, judged = await evaluate(recording, own, other, own_tools=effects.tools(),
                                      other_tools=effects.tools(),
                                      own_compaction=NO_COMPACTION,
                                      other_compaction=NO_COMPACTION)

    assert baseline.identical
    assert not judged.identical and judged.diverged_at is not None
    at = judged.diverged_at
    assert (at.step, at.model_call, at.kind) == (1, 1, "request")
    assert set(at.diff) == {"system"}
    assert "-You are a test agent." in at.diff["system"]
    assert "+You are another agent." in at.diff["system"]


async def test_a_compaction_policy_diverges_where_it_first_compacts() -> None:
    """The mailing run on a policy that never compacts, replayed with one that compacts
    after 5 model steps: identical up to the step where its first summary call is made."""
    effects = SideEffects()
    store = InMemoryCheckpointStore()
    policy = {"context_ratio": 0.8, "target_ratio": 0.6}
    plain = make_snapshot(context_policy=policy)
    engine = build_engine(store=store, snapshot=plain, model=estimated(mailing),
                          tools=effects.tools(), compaction="default")
    run_id = await engine.start("mail everyone")
    await drive(engine)
    await engine.close()
    assert len(effects.calls) == MAILS
    recording = Recording.read(store, run_id)
    compacting = make_snapshot(context_policy={**policy, "model_steps": 5})

    baseline, judged = await evaluate(recording, plain, compacting,
                                      own_tools=effects.tools(), other_tools=effects.tools())

    assert baseline.identical
    at = judged.diverged_at
    assert at is not None and at.kind == "request", judged.to_dict()
    assert at.model_call == 6 and at.step == 11  # 5 actions and their 5 mails, then
    assert at.purpose == "compaction" and at.diff["purpose"] == "action -> compaction"
    assert len(effects.calls) == MAILS
    # the records up to that step are the recorded ones
    assert judged.records.first_difference is not None
    assert stored_records(store, run_id) == recording.records


class _WithoutStart:
    """The store as a run recorded before its meta record kept the start counters."""

    def __init__(self, inner: InMemoryCheckpointStore) -> None:
        self.inner = inner

    def load_head(self, run_id: str) -> Any:
        return self.inner.load_head(run_id)

    def read(self, run_id: str, stream: str, after: int = 0,
             limit: int | None = None) -> list[LogEntry]:
        entries = self.inner.read(run_id, stream, after, limit)
        if stream != "meta":
            return entries
        return [dataclasses.replace(e, body={k: v for k, v in e.body.items() if k != "start"})
                for e in entries]


async def test_a_run_recorded_without_its_start_counters_replays_from_its_head(
        effects: SideEffects) -> None:
    store = InMemoryCheckpointStore()
    engine = representative_engine(store, effects)
    history = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"}]
    run_id = await engine.start("count and mail", history=history,
                                counters={"user_turns": 3, "model_steps": 7},
                                history_watermark=12)
    await drive(engine)
    await engine.close()

    recording = Recording.read(cast(Any, _WithoutStart(store)), run_id)

    assert not recording.start_recorded and recording.history == history
    assert (recording.counters, recording.history_watermark) == (
        {"user_turns": 3, "baseline_user_turns": 0, "model_steps": 7,
         "baseline_model_steps": 0}, 12)
    report = await replay_run(recording, make_snapshot(mode="plan"), tools=effects.tools(),
                              compaction_policy=NO_COMPACTION)
    assert report.identical, report.to_dict()


async def test_a_run_that_delegates_replays_its_children_too() -> None:
    effects = SideEffects()
    store = InMemoryCheckpointStore()
    engine = build_engine(store=store, snapshot=make_snapshot(subagents=SUBS),
                          model=FunctionModel(by_instance),
                          tools=effects.tools())
    run_id = await engine.start("count then mail")
    await drive(engine)
    await engine.close()
    recording = Recording.read(store, run_id)
    assert {c.instance for c in recording.calls} == {"main", "sub-1", "sub-2"}

    report = await replay_run(recording, make_snapshot(subagents=SUBS),
                              tools=effects.tools(), compaction_policy=NO_COMPACTION)

    assert report.identical, report.to_dict()
    assert effects.calls == ["ops@example.com"]  # mailed once, by the recorded run


@pytest.mark.parametrize("stop", ["tool", "model"])
async def test_a_blocked_run_replays_to_where_it_stopped(effects: SideEffects,
                                                         stop: str) -> None:
    """A crash with a mail (or a model call) in flight, then a resume: the run is blocked
    on the unknown outcome. Its replay reaches that call and ends there, with the same
    records, and sends nothing."""
    inner = InMemoryCheckpointStore()

    def in_flight(head: dict[str, Any]) -> bool:
        op = head["op"]
        return op is not None and op["kind"] == stop and (
            (stop == "model" and head["total_calls"] == 3) or op.get("name") == "send_mail")

    engine = representative_engine(CrashWhen(inner, in_flight), effects)
    run_id = await engine.start("count and mail")
    with pytest.raises(Crash):
        await drive(engine)
    resumed = representative_engine(inner, effects, run_id=run_id)
    await resumed.begin_execution()
    assert (await drive(resumed)).status == "blocked"
    await resumed.close()
    assert effects.calls == []

    report = await replay_run(Recording.read(inner, run_id), make_snapshot(mode="plan"),
                              tools=effects.tools(), compaction_policy=NO_COMPACTION)

    assert report.identical and report.ended == "recording_end", report.to_dict()
    assert effects.calls == []
