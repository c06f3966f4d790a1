"""ScriptedModel: the model double fails loudly on anything unplanned."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from agentloom_runtime.completion import parse_decision
from agentloom_runtime.contracts import ModelGateway, ModelRequest, ModelResponse, ToolCall
from agentloom_runtime.errors import ModelResponseError, ModelStatusError
from agentloom_runtime.testing import (
    FunctionModel,
    ScriptedModel,
    ScriptExhausted,
    ScriptNotConsumed,
    Step,
    UnexpectedCall,
)


def request(purpose: Any = "action", text: str = "hi") -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": text}], purpose=purpose)


async def test_plays_steps_in_order_and_records_requests() -> None:
    model = ScriptedModel([
        ScriptedModel.call("read", {"path": "a.txt"}, id="c1"),
        {"role": "assistant", "content": "from a dict"},
        lambda req: ModelResponse(content=f"echo {req.messages[-1]['content']}"),
        ScriptedModel.answer("done"),
    ])
    first = await model.invoke(request())
    assert first.tool_calls == (ToolCall("c1", "read", '{"path": "a.txt"}'),)
    assert (await model.invoke(request())).content == "from a dict"
    assert (await model.invoke(request(text="ping"))).content == "echo ping"
    assert (await model.invoke(request())).content == "done"
    model.assert_consumed()
    assert [r.messages[-1]["content"] for r in model.requests] == ["hi", "hi", "ping", "hi"]


async def test_requests_keep_their_own_message_list_but_share_the_messages() -> None:
    model = ScriptedModel([ScriptedModel.answer("a")])
    first = {"role": "user", "content": "before"}
    messages = [first]
    await model.invoke(ModelRequest(messages=messages))
    messages.append({"role": "user", "content": "later"})  # the caller's list grows
    recorded = model.requests[0].messages
    assert len(recorded) == 1
    assert recorded[0] is first  # no deep copy per call (documented: never mutate)


async def test_exhausted_script_raises_and_records() -> None:
    model = ScriptedModel([ScriptedModel.answer("a")])
    await model.invoke(request())
    with pytest.raises(ScriptExhausted, match="call #2"):
        await model.invoke(request(purpose="verification"))
    assert isinstance(ScriptExhausted("x"), AssertionError)
    assert len(model.requests) == 2


async def test_purpose_mismatch_raises() -> None:
    model = ScriptedModel([Step(ScriptedModel.verdict("complete"), purpose="verification")])
    with pytest.raises(UnexpectedCall, match="expected purpose='verification'"):
        await model.invoke(request(purpose="action"))


async def test_purpose_match_passes() -> None:
    model = ScriptedModel([Step(ScriptedModel.answer("s"), purpose="compaction")])
    assert (await model.invoke(request(purpose="compaction"))).content == "s"


async def test_scripted_exceptions_are_raised() -> None:
    err = ModelStatusError("rate limited", status=429, retryable=True)
    model = ScriptedModel([err, ScriptedModel.answer("ok")])
    with pytest.raises(ModelStatusError) as info:
        await model.invoke(request())
    assert info.value is err
    assert (await model.invoke(request())).content == "ok"


async def test_async_callable_steps() -> None:
    async def reply(req: ModelRequest) -> dict[str, Any]:
        return {"role": "assistant", "content": req.purpose}

    model = ScriptedModel([reply])
    assert (await model.invoke(request(purpose="verification"))).content == "verification"


async def test_unconsumed_steps_fail_the_test() -> None:
    model = ScriptedModel([ScriptedModel.answer("a"), ScriptedModel.answer("b")])
    await model.invoke(request())
    with pytest.raises(ScriptNotConsumed, match="1 of 2"):
        model.assert_consumed()
    model.extend(ScriptedModel.answer("c"))
    assert model.remaining == 2


@pytest.mark.parametrize("reply", [
    ModelResponse(content=""),
    ModelResponse(tool_calls=(ToolCall("a", "f", "{}"), ToolCall("a", "g", "{}"))),
    ModelResponse(tool_calls=(ToolCall("", "f", "{}"),)),  # a call without an id
    {"role": "assistant", "content": None},
])
async def test_replies_are_validated_like_the_gateway(reply: Any) -> None:
    with pytest.raises(ModelResponseError):
        await ScriptedModel([reply]).invoke(request())


async def test_unvalidated_doubles_hand_replies_over_as_given() -> None:
    """``validate=False``: what no gateway lets through reaches the code under test."""
    twice = ModelResponse(tool_calls=(ToolCall("a", "f", "{}"), ToolCall("a", "g", "{}")))
    lone = {"role": "assistant", "content": "odd \ud800"}
    model = ScriptedModel([twice, lone, ModelResponseError("bad body")], validate=False)
    assert await model.invoke(request()) is twice
    assert (await model.invoke(request())).content == "odd \ud800", "not sanitized"
    with pytest.raises(ModelResponseError, match="bad body"):
        await model.invoke(request())
    function = FunctionModel(lambda req: twice, validate=False)
    assert await function.invoke(request()) is twice
    assert (await FunctionModel(lambda req: "", validate=False).invoke(request())).content == ""
    with pytest.raises(ModelResponseError):  # the default stays the gateway's validation
        await FunctionModel(lambda req: twice).invoke(request())


def test_bad_steps_are_refused_at_construction() -> None:
    with pytest.raises(TypeError):
        ScriptedModel([42])  # type: ignore[list-item]


async def test_call_after_close_is_unexpected() -> None:
    model = ScriptedModel([ScriptedModel.answer("a")])
    await model.aclose()
    with pytest.raises(UnexpectedCall, match="after aclose"):
        await model.invoke(request())


def test_helpers() -> None:
    a, b = ScriptedModel.call("f", {}), ScriptedModel.call("f", {})
    assert a.tool_calls[0].id != b.tool_calls[0].id
    assert json.loads(ScriptedModel.call("f", {"x": [1, "é"]}).tool_calls[0].arguments) == {
        "x": [1, "é"]}
    verdict = ScriptedModel.verdict("continue", "missing tests", "run pytest")
    decision = parse_decision(verdict.content)
    assert decision is not None
    assert decision.to_dict() == {"decision": "continue", "reason": "missing tests",
                                  "next_action": "run pytest"}
    with pytest.raises(ValueError):
        ScriptedModel.verdict("maybe")  # type: ignore[arg-type]


def test_is_a_model_gateway() -> None:
    model: ModelGateway = ScriptedModel()
    assert model.module_id == "scripted/v1" and model.checkpoint_config() == {}


# ---------------------------------------------------------------- FunctionModel


async def test_function_model_answers_with_a_function_of_the_request() -> None:
    def reply(req: ModelRequest) -> Any:
        if req.purpose == "verification":
            return ScriptedModel.verdict("complete")
        if req.messages[-1]["content"] == "read it":
            return ScriptedModel.call("read", {"path": "a.txt"}, id="c1")
        if req.purpose == "compaction":
            return {"role": "assistant", "content": "a summary"}
        return f"answer to {req.messages[-1]['content']}"

    model = FunctionModel(reply)
    call = await model.invoke(request(text="read it"))
    assert call.tool_calls == (ToolCall("c1", "read", '{"path": "a.txt"}'),)
    assert (await model.invoke(request(text="why"))).content == "answer to why"
    assert (await model.invoke(request(purpose="compaction"))).content == "a summary"
    review = await model.invoke(request(purpose="verification"))
    assert parse_decision(review.content) is not None
    assert [r.purpose for r in model.requests] == ["action", "action", "compaction",
                                                   "verification"]
    model.assert_consumed()  # like ScriptedModel's, for drivers that use either


async def test_function_model_async_functions_exceptions_and_validation() -> None:
    async def slow(req: ModelRequest) -> str:
        return "later"

    assert (await FunctionModel(slow).invoke(request())).content == "later"
    err = ModelStatusError("rate limited", status=429, retryable=True)
    with pytest.raises(ModelStatusError) as info:
        await FunctionModel(lambda req: err).invoke(request())
    assert info.value is err
    with pytest.raises(ModelResponseError):
        await FunctionModel(lambda req: "").invoke(request())  # an empty answer
    with pytest.raises(TypeError):
        await FunctionModel(lambda req: 42).invoke(request())  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError):
        FunctionModel("not callable")  # type: ignore[arg-type]


async def test_function_model_is_a_model_gateway_and_refuses_calls_after_close() -> None:
    model: ModelGateway = FunctionModel(lambda req: "x")
    assert model.module_id == "function-model/v1" and model.checkpoint_config() == {}
    await model.aclose()
    with pytest.raises(UnexpectedCall, match="after aclose"):
        await model.invoke(request())


def test_importing_the_doubles_does_not_load_the_http_test_server() -> None:
    code = ("import sys\n"
            "from agentloom_runtime.testing import FunctionModel, ScriptedModel\n"
            "assert 'agentloom_runtime.testing.openai_server' not in sys.modules\n"
            "assert 'http.server' not in sys.modules\n"
            "from agentloom_runtime.testing import OpenAICompatibleServer\n"
            "assert 'agentloom_runtime.testing.openai_server' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    import agentloom_runtime.testing as testing

    with pytest.raises(AttributeError):
        testing.NoSuchDouble  # noqa: B018
    assert "FunctionModel" in dir(testing)
