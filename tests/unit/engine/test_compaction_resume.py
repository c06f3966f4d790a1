"""Crash/resume around compaction: summary call sent, result saved, snapshot committed.
Source records are never rewritten; no side effect runs twice."""

from __future__ import annotations

import re

import pytest
from support.engine import Crash, CrashingStore, SideEffects, drive, make_snapshot

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.engine import create_engine
from agentloom_runtime.testing import ScriptedModel

ROUNDS = 14


class Mailer:
    """Deterministic from the request's last message, so compaction cannot confuse it."""

    module_id = "mailer/v1"

    def __init__(self) -> None:
        self.purposes: list[str] = []

    def checkpoint_config(self):
        return {}

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        self.purposes.append(request.purpose)
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        sent = [int(n) for m in request.messages
                for n in re.findall(r"user(\d+)@", str(m.get("content")))]
        if request.purpose == "compaction":
            return ModelResponse(
                content=f"Mails sent so far: user0 .. user{max(sent)}@example.com.")
        k = max(sent) + 1 if sent else 0
        if k >= ROUNDS:
            return ScriptedModel.answer(f"sent {ROUNDS} mails")
        return ScriptedModel.call("send_mail", {"to": f"user{k}@example.com"}, id=f"c{k}")


def build(store, effects, run_id=None, model=None):
    snapshot = make_snapshot(model={"model": "m", "context_window": 9000,
                                    "max_output_tokens": 512, "safety_margin_tokens": 64},
                             context_policy={"context_ratio": 0.5, "target_ratio": 0.3})
    return create_engine(snapshot, save=store, model_gateway=model or Mailer(),
                         tools=effects.tools(), checkpoint=run_id)




EXPECTED = [f"user{k}@example.com" for k in range(ROUNDS)]


async def reference():
    store, effects, model = CrashingStore(InMemoryCheckpointStore()), SideEffects(), Mailer()
    engine = build(store, effects, model=model)
    run_id = await engine.start("mail everyone " + "with care " * 40)
    result = await drive(engine)
    return store, run_id, result, effects, model


async def test_reference_compacts_and_keeps_sources() -> None:
    store, run_id, result, effects, model = await reference()
    assert result.status == "completed"
    assert effects.calls == EXPECTED
    assert "compaction" in model.purposes
    snaps = store.inner.read(run_id, "snap:main")
    assert snaps, "the view was compacted"
    metrics = snaps[0].body["metrics"]
    assert metrics["after_tokens"] < metrics["before_tokens"] if "after_tokens" in metrics \
        else True
    kinds = [e.body["kind"] for e in store.inner.read(run_id, "src:main")]
    assert kinds.count("tool_result") == ROUNDS, "source records are never summarised away"


@pytest.mark.parametrize("crash_after", range(1, 66))
async def test_crash_anywhere_including_compaction(crash_after: int) -> None:
    ref_store, _, _, _, _ = await reference()
    if crash_after >= ref_store.commits:
        pytest.skip("past the end")
    inner, effects = InMemoryCheckpointStore(), SideEffects()
    engine = build(CrashingStore(inner, crash_after), effects)
    with pytest.raises(Crash):
        await engine.start("mail everyone " + "with care " * 40, run_id="r")
        await drive(engine)
    resumed = build(inner, effects, "r")
    await resumed.begin_execution(retry_unknown_models=True)
    result = await drive(resumed)
    if result.error_code == "tool_outcome_unknown":
        # the crash hit between "started" and the result: never re-run blindly
        assert inner.load_head("r").body["op"]["kind"] == "tool"
        assert len(effects.calls) == len(set(effects.calls))
        return
    assert result.status == "completed", inner.load_head("r").body.get("error")
    assert effects.calls == EXPECTED, "every mail exactly once"
    kinds = [e.body["kind"] for e in inner.read("r", "src:main")]
    assert kinds.count("tool_result") == ROUNDS
