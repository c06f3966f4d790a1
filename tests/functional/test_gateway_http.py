"""The real gateway over real sockets against the local OpenAI-compatible server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.errors import ModelResponseError, ModelStatusError, ModelTransportError
from agentloom_runtime.model import ChatCompletionsGateway
from agentloom_runtime.testing import (
    Disconnect,
    OpenAICompatibleServer,
    Raw,
    ScriptedModel,
    completion_body,
)

KEY = "sk-local-test-key"
REQUEST = ModelRequest(messages=[{"role": "user", "content": "hello"}])
TOOLS = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]


async def no_sleep(seconds: float) -> None:
    return None


def gateway(srv: OpenAICompatibleServer, **kwargs: Any) -> ChatCompletionsGateway:
    options: dict[str, Any] = {"base_url": srv.base_url, "model": "local-model",
                               "api_key": KEY, "max_output_tokens": 256, "sleep": no_sleep}
    options.update(kwargs)
    return ChatCompletionsGateway(**options)


@pytest.fixture
def bogus_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    proxy = "http://127.0.0.1:9"  # discard port: nothing listens, a proxied call would fail
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy",
                 "all_proxy"):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    yield proxy


async def test_openai_dialect_round_trip() -> None:
    script = [ScriptedModel.call("read", {"path": "a"}, id="call-1"),
              ScriptedModel.answer("done")]
    with OpenAICompatibleServer(script, api_key=KEY) as srv:
        gw = gateway(srv)
        first = await gw.invoke(ModelRequest(messages=REQUEST.messages, tools=TOOLS,
                                             options={"temperature": 0}))
        history = [*REQUEST.messages, first.message(),
                   {"role": "tool", "tool_call_id": "call-1", "content": "text"}]
        second = await gw.invoke(ModelRequest(messages=history, tools=TOOLS))
        await gw.aclose()
        srv.assert_consumed()
    assert first.tool_calls[0].name == "read" and first.tool_calls[0].arguments == \
        '{"path": "a"}'
    assert second == ModelResponse(content="done", usage={
        "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
    body = srv.bodies[0]
    assert body["model"] == "local-model" and body["max_completion_tokens"] == 256
    assert body["temperature"] == 0 and body["tools"] == TOOLS
    assert srv.received[0].path == "/v1/chat/completions"
    assert srv.received[0].headers["authorization"] == f"Bearer {KEY}"
    assert srv.bodies[1]["messages"][1]["tool_calls"][0]["id"] == "call-1"


async def test_deepseek_dialect_round_trip() -> None:
    script = [ModelResponse(content="42", reasoning_content="thought",
                            usage={"prompt_tokens": 5, "completion_tokens": 2})]
    with OpenAICompatibleServer(script) as srv:
        gw = gateway(srv, dialect="deepseek")
        resp = await gw.invoke(REQUEST)
        await gw.aclose()
    assert resp.content == "42" and resp.reasoning_content == "thought"
    assert resp.usage == {"prompt_tokens": 5, "completion_tokens": 2}
    assert srv.bodies[0]["max_tokens"] == 256
    assert "max_completion_tokens" not in srv.bodies[0]


async def test_proxy_environment_is_ignored(bogus_proxy: str) -> None:
    with OpenAICompatibleServer([ScriptedModel.answer("direct")]) as srv:
        gw = gateway(srv)
        assert (await gw.invoke(REQUEST)).content == "direct"
        await gw.aclose()
        # Control: a client that trusts the environment goes to the dead proxy.
        async with httpx.AsyncClient(trust_env=True) as client:
            with pytest.raises(httpx.ConnectError):
                await client.get(f"{srv.base_url}/models")


async def test_retryable_status_then_success() -> None:
    script: list[Any] = [Raw(503, {"error": {"message": "busy", "code": "overloaded"}}),
                         Raw(429, b"", headers={"Retry-After": "0"}),
                         ScriptedModel.answer("ok")]
    with OpenAICompatibleServer(script) as srv:
        gw = gateway(srv)
        assert (await gw.invoke(REQUEST)).content == "ok"
        await gw.aclose()
    assert len(srv.received) == 3


async def test_scripted_status_error_and_wrong_key() -> None:
    script = [ModelStatusError("nope", status=400,
                               details={"provider_code": "invalid_request_error"})]
    with OpenAICompatibleServer(script, api_key=KEY) as srv:
        bad = gateway(srv, api_key="sk-wrong")
        with pytest.raises(ModelStatusError) as info:
            await bad.invoke(REQUEST)
        assert info.value.status == 401 and "sk-wrong" not in str(info.value.to_dict())
        await bad.aclose()
        gw = gateway(srv)
        with pytest.raises(ModelStatusError, match=r"HTTP 400 \(invalid_request_error\)"):
            await gw.invoke(REQUEST)
        await gw.aclose()
        srv.assert_consumed()


async def test_read_timeout_is_not_retried() -> None:
    with OpenAICompatibleServer([Raw(200, b"{}", delay=5), ScriptedModel.answer("no")]) as srv:
        gw = gateway(srv, timeout=0.2)
        with pytest.raises(ModelTransportError) as info:
            await gw.invoke(REQUEST)
        await gw.aclose()
    assert info.value.details["sent"] is True and len(srv.received) == 1


async def test_disconnect_after_sending_is_not_retried() -> None:
    with OpenAICompatibleServer([Disconnect(), ScriptedModel.answer("no")]) as srv:
        gw = gateway(srv)
        with pytest.raises(ModelTransportError) as info:
            await gw.invoke(REQUEST)
        await gw.aclose()
    assert info.value.details["sent"] is True and len(srv.received) == 1


async def test_connection_refused_is_retried_then_fails() -> None:
    with OpenAICompatibleServer() as srv:
        base_url = srv.base_url
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    gw = ChatCompletionsGateway(base_url=base_url, model="m", api_key=KEY, max_retries=2,
                                sleep=sleep)
    with pytest.raises(ModelTransportError) as info:
        await gw.invoke(REQUEST)
    await gw.aclose()
    assert info.value.details["sent"] is False and info.value.details["attempts"] == 3
    assert len(sleeps) == 2


async def test_oversized_answer_over_the_wire() -> None:
    with OpenAICompatibleServer([Raw(200, b"x" * 100_000)]) as srv:
        gw = gateway(srv, max_response_bytes=10_000)
        with pytest.raises(ModelResponseError, match="exceeds 10000 bytes"):
            await gw.invoke(REQUEST)
        await gw.aclose()


async def test_unexpected_call_and_models_listing() -> None:
    with OpenAICompatibleServer(model="demo-model") as srv:
        async with httpx.AsyncClient(trust_env=False) as client:
            listing = (await client.get(f"{srv.base_url}/models")).json()
        gw = gateway(srv)
        with pytest.raises(ModelStatusError, match="script_exhausted"):
            await gw.invoke(REQUEST)
        await gw.aclose()
        assert srv.unexpected == [1]
    assert [m["id"] for m in listing["data"]] == ["demo-model"]
    listed = [{"id": "big", "object": "model", "context_length": 131_072}]
    with OpenAICompatibleServer(models=listed) as srv:
        async with httpx.AsyncClient(trust_env=False) as client:
            assert (await client.get(f"{srv.base_url}/models")).json()["data"] == listed


# ---------------------------------------------------------------- every failure has a way out


async def test_attempt_deadline_stops_a_trickling_server() -> None:
    """One byte every 50 ms never trips the read timeout; the attempt's total deadline
    (the connection's timeout) does, and a sent request is not repeated."""
    body = completion_body(ModelResponse(content="slow " * 40), model="local-model")
    with OpenAICompatibleServer([Raw(200, body, trickle=0.05),
                                 ScriptedModel.answer("no")]) as srv:
        gw = gateway(srv, timeout=0.6, max_retries=2)
        started = time.monotonic()
        with pytest.raises(ModelTransportError) as info:
            await gw.invoke(REQUEST)
        elapsed = time.monotonic() - started
        await gw.aclose()
    assert elapsed < 3.0  # the body alone would take more than 10 s
    assert info.value.details["sent"] is True
    assert info.value.details["reason"] == "deadline"
    assert info.value.details["attempts"] == 1 and len(srv.received) == 1
    assert "within 0.6 s" in str(info.value)


async def test_attempt_deadline_allows_a_slow_answer_that_finishes_in_time() -> None:
    body = completion_body(ModelResponse(content="ok"), model="local-model")
    with OpenAICompatibleServer([Raw(200, body, trickle=0.001)]) as srv:
        gw = gateway(srv, timeout=10)
        assert (await gw.invoke(REQUEST)).content == "ok"
        await gw.aclose()


def _surrogate_completion() -> bytes:
    """A body whose JSON escapes decode to lone surrogates, as a broken model sends."""
    arguments = json.dumps({"path": "\ud800.txt"})  # the escape inside the argument text
    message = {"role": "assistant", "content": "bad \udc00 text",
               "reasoning_content": "think \ud800",
               "tool_calls": [
                   {"id": "call-\ud801", "type": "function",
                    "function": {"name": "read\udfff", "arguments": arguments}},
                   {"id": "call-2", "type": "function",
                    "function": {"name": "write", "arguments": '{"path": "a\ud800"}'}}]}
    text = json.dumps({"choices": [{"index": 0, "message": message}]})  # ASCII escapes
    assert "\\ud800" in text
    return text.encode()


@pytest.mark.parametrize("dialect", ["openai", "deepseek"])
async def test_lone_surrogates_from_the_model_become_replacement_characters(
        dialect: str) -> None:
    """In every text but tool-call arguments, where they stay escapes (storable ASCII) for
    the tool runtime to refuse the call (issue 17)."""
    with OpenAICompatibleServer([Raw(200, _surrogate_completion())]) as srv:
        gw = gateway(srv, dialect=dialect)
        resp = await gw.invoke(REQUEST)
        await gw.aclose()
    message = resp.message()
    json.dumps(message, ensure_ascii=False).encode("utf-8")  # storable: no lone surrogate
    assert resp.content == "bad \ufffd text"
    first, second = resp.tool_calls
    assert (first.id, first.name) == ("call-\ufffd", "read\ufffd")
    assert first.arguments.isascii() and json.loads(first.arguments) == {"path": "\ud800.txt"}
    assert second.id == "call-2" and json.loads(second.arguments) == {"path": "a\ud800"}
    if dialect == "deepseek":
        assert resp.reasoning_content == "think \ufffd"
    else:
        assert resp.reasoning_content is None


async def test_tool_call_arguments_that_are_not_json_are_kept_over_the_wire() -> None:
    calls = [{"id": "c1", "type": "function",
              "function": {"name": "read", "arguments": '{"path": "a.txt"'}}]
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": None,
                                                 "tool_calls": calls}}]}
    with OpenAICompatibleServer([Raw(200, body)]) as srv:
        gw = gateway(srv)
        resp = await gw.invoke(REQUEST)
        await gw.aclose()
    assert resp.tool_calls[0].arguments == '{"path": "a.txt"'
