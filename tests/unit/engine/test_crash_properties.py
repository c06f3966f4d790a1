"""Property: for any script of tool calls and any crash point, resuming never runs a side
effect twice, never rewrites a source record, and ends as the uninterrupted run did —
or blocks exactly where an outcome is unknown."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.engine import Crash, CrashingStore, SideEffects, build_engine, drive, saved_head

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.testing import KeyedScriptModel, ScriptedModel

calls = st.lists(st.one_of(
    st.tuples(st.just("send_mail"), st.integers(0, 50)),
    st.tuples(st.just("count_words"), st.integers(0, 50)),
    st.tuples(st.just("bad_args"), st.integers(0, 50)),
), min_size=0, max_size=6)


def script(steps: list[tuple[str, int]]) -> list[Any]:
    out = []
    for i, (kind, n) in enumerate(steps):
        if kind == "send_mail":
            out.append(ScriptedModel.call("send_mail", {"to": f"u{n}@example.com"}, id=f"c{i}"))
        elif kind == "count_words":
            out.append(ScriptedModel.call("count_words", {"text": "a " * n}, id=f"c{i}"))
        else:
            out.append(ScriptedModel.call("count_words", {"text": n}, id=f"c{i}"))
    return [*out, ScriptedModel.answer("done")]


def sources(store: InMemoryCheckpointStore, run_id: str) -> list[Any]:
    return [e.body for e in store.read(run_id, "src:main")]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=calls, data=st.data())
async def test_any_crash_point_resumes_safely(steps: list[tuple[str, int]],
                                              data: st.DataObject) -> None:
    replies = script(steps)
    ref_store, ref_effects = CrashingStore(InMemoryCheckpointStore()), SideEffects()
    engine = build_engine(store=ref_store, model=KeyedScriptModel(replies),
                          tools=ref_effects.tools())
    await engine.start("work", run_id="r")
    reference = await drive(engine)
    assert reference.status == "completed"
    # any commit of this script's own reference run (not a fixed range)
    crash = data.draw(st.integers(1, ref_store.commits - 1), label="crash_after")

    inner, effects = InMemoryCheckpointStore(), SideEffects()
    engine = build_engine(store=CrashingStore(inner, crash), model=KeyedScriptModel(replies),
                          tools=effects.tools())
    try:
        await engine.start("work", run_id="r")
        await drive(engine)
    except Crash:
        pass
    before = sources(inner, "r")
    resumed = build_engine(store=inner, model=KeyedScriptModel(replies), tools=effects.tools(),
                           run_id="r")
    await resumed.begin_execution(retry_unknown_models=True)
    result = await drive(resumed)
    after = sources(inner, "r")
    assert after[:len(before)] == before, "a source record was rewritten"
    assert effects.calls == ref_effects.calls[:len(effects.calls)], \
        "side effects ran twice or out of order"
    if result.status == "blocked":
        assert result.error_code == "tool_outcome_unknown"
        assert saved_head(inner, "r")["op"]["kind"] == "tool"
        return
    assert result.status == "completed"
    assert effects.calls == ref_effects.calls
    assert [r["kind"] for r in after] == [r["kind"] for r in sources(ref_store.inner, "r")]
