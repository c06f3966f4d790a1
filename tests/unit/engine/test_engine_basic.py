from __future__ import annotations

from support.engine import SideEffects, make_snapshot

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.context import NoCompaction
from agentloom_runtime.engine import create_engine
from agentloom_runtime.testing import ScriptedModel


async def run_to_end(engine, limit: int = 50):
    results = []
    for _ in range(limit):
        result = await engine.step()
        results.append(result)
        if result.next == "done":
            return results
    raise AssertionError("run did not finish")


async def test_representative_run(effects: SideEffects) -> None:
    model = ScriptedModel([
        ScriptedModel.call("count_words", {"text": "a b c"}),
        ScriptedModel.call("send_mail", {"to": "ops@example.com"}),
        ScriptedModel.answer("3 words; mail sent."),
        ScriptedModel.verdict("complete", "done"),
    ])
    store = InMemoryCheckpointStore()
    engine = create_engine(make_snapshot(), save=store, model_gateway=model,
                           tools=effects.tools(), compaction_policy=NoCompaction())
    run_id = await engine.start("count and mail")
    results = await run_to_end(engine)
    model.assert_consumed()
    assert [r.kind for r in results] == ["action", "tool", "action", "tool", "action",
                                         "verification"]
    assert results[-1].status == "completed"
    assert effects.calls == ["ops@example.com"]
    head = store.load_head(run_id).body
    assert engine.outcome().answer == "3 words; mail sent."
    assert head["total_calls"] == 4
    await engine.close()
