"""Bad tool calls never wedge a run (issue 9): arguments that are not JSON become a
failure result that says what is wrong, and the model corrects itself; a tool-call id
that repeats one from an earlier turn is rewritten, so no later request the provider
receives has duplicate ids or breaks the chat protocol."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from support.engine import SideEffects, build_engine, drive

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.context._protocol import protocol_violations
from agentloom_runtime.contracts import ModelRequest, ModelResponse, ToolCall
from agentloom_runtime.testing import ScriptedModel, Step

# The replies pass the gateway's validation, as a provider's would: it keeps arguments
# that are not JSON and ids repeated from another turn, which the engine must handle.
REVIEW = Step(ScriptedModel.verdict("complete"), purpose="verification")


def mail(call_id: str, arguments: str) -> ModelResponse:
    return ModelResponse(tool_calls=(ToolCall(call_id, "send_mail", arguments),))


@pytest.mark.parametrize(("arguments", "says"), [
    ('{"to": "ops@example.com"', "not valid JSON"),
    ("{'to': 'ops@example.com'}", "not valid JSON"),
    ('{"to": NaN}', "not valid JSON"),
    ('["ops@example.com"]', "must be a JSON object"),
])
async def test_arguments_that_are_not_json_are_a_failure_result_the_model_can_correct(
        arguments: str, says: str) -> None:
    store, effects = InMemoryCheckpointStore(), SideEffects()
    model = ScriptedModel([mail("c1", arguments), mail("c2", '{"to": "ops@example.com"}'),
                           ModelResponse(content="mailed, after fixing my call"), REVIEW])
    engine = build_engine(store=store, model=model, tools=effects.tools())
    run_id = await engine.start("mail ops")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("completed", None), engine.error
    assert effects.calls == ["ops@example.com"], "the corrected call ran, once"
    seen = [m for m in model.requests[1].messages if m.get("role") == "tool"]
    assert len(seen) == 1
    error = json.loads(seen[0]["content"])["error"]
    assert error["code"] == "tool_arguments_invalid" and says in error["message"]
    statuses = [e.body["status"] for e in store.read(run_id, "src:main")
                if e.body["kind"] == "tool_result"]
    assert statuses == ["error", "ok"]


def duplicate_ids(request: ModelRequest) -> list[str]:
    ids = Counter(str(c["id"]) for m in request.messages if m.get("role") == "assistant"
                  for c in m.get("tool_calls") or ())
    return [i for i, n in ids.items() if n > 1]


def assert_clean(model: ScriptedModel) -> None:
    for number, request in enumerate(model.requests, 1):
        assert protocol_violations(list(request.messages)) == [], f"request {number}"
        assert duplicate_ids(request) == [], f"request {number} repeats a tool-call id"


@pytest.mark.parametrize("repeated", ["call_abc", "x"])
async def test_a_call_id_repeated_from_an_earlier_turn_is_rewritten_for_the_provider(
        repeated: str) -> None:
    store, effects = InMemoryCheckpointStore(), SideEffects()
    model = ScriptedModel([mail(repeated, '{"to": "a@example.com"}'),
                           mail(repeated, '{"to": "b@example.com"}'),
                           mail(repeated, '{"to": "c@example.com"}'),
                           ModelResponse(content="mailed three"), REVIEW])
    engine = build_engine(store=store, model=model, tools=effects.tools())
    run_id = await engine.start("mail a, b and c")
    assert (await drive(engine)).status == "completed", engine.error
    assert effects.calls == ["a@example.com", "b@example.com", "c@example.com"]
    assert len(model.requests) == 5
    assert_clean(model)
    raw = [c["id"] for e in store.read(run_id, "src:main") if e.body["kind"] == "assistant"
           for c in e.body["message"].get("tool_calls") or ()]
    assert raw == [repeated] * 3, "the source records keep what the provider sent"


async def test_a_rewritten_id_never_collides_with_an_id_the_provider_chose() -> None:
    """Providers that number their ids (``call_1``, ``call_2``…) use the same shape as
    the engine's fresh ids: a rewrite must still produce an id not yet in the view."""
    store, effects = InMemoryCheckpointStore(), SideEffects()
    model = ScriptedModel([mail("call_2", '{"to": "a@example.com"}'),
                           mail("call_2", '{"to": "b@example.com"}'),
                           mail("call_3", '{"to": "c@example.com"}'),
                           ModelResponse(content="mailed three"), REVIEW])
    engine = build_engine(store=store, model=model, tools=effects.tools())
    await engine.start("mail a, b and c")
    assert (await drive(engine)).status == "completed", engine.error
    assert effects.calls == ["a@example.com", "b@example.com", "c@example.com"]
    assert_clean(model)
