"""ChatCompletionsGateway against httpx.MockTransport routing functions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from agentloom_runtime.contracts import ModelRequest, ModelResponse, ToolCall
from agentloom_runtime.errors import (
    ConfigError,
    ModelCredentialsError,
    ModelNotFound,
    ModelResponseError,
    ModelStatusError,
    ModelTransportError,
    error_from_dict,
)
from agentloom_runtime.model import ChatCompletionsGateway, retry_after_seconds

KEY = "sk-test-SECRET-0123456789"
BODY_MARKER = "PROVIDER-BODY-TEXT-7f3a"
REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}])
Handler = Callable[[httpx.Request], httpx.Response]


def completion(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", **message},
                         "finish_reason": "stop"}], **extra}


def ok(message: dict[str, Any], **extra: Any) -> httpx.Response:
    """ASCII JSON, as providers send it: lone surrogates travel as ``\\ud800`` escapes."""
    return httpx.Response(200, content=json.dumps(completion(message, **extra)).encode(),
                          headers={"Content-Type": "application/json"})


def tool_call(call_id: str = "c1", name: str = "read", arguments: str = '{"p": 1}',
              kind: str = "function") -> dict[str, Any]:
    return {"id": call_id, "type": kind, "function": {"name": name, "arguments": arguments}}


class Recorder:
    """Routes each request to the next handler and keeps what was sent."""

    def __init__(self, *handlers: Handler) -> None:
        self.handlers = list(handlers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        assert self.handlers, "unexpected extra request"
        return self.handlers.pop(0)(request)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


class Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def make(sleeps: Sleeps) -> Callable[..., ChatCompletionsGateway]:
    def build(route: Handler, **kwargs: Any) -> ChatCompletionsGateway:
        options: dict[str, Any] = {"base_url": "https://api.example.test/v1", "model": "m-1",
                                   "api_key": KEY, "max_output_tokens": 1000,
                                   "max_retries": 2, "sleep": sleeps}
        options.update(kwargs)
        return ChatCompletionsGateway(transport=httpx.MockTransport(route), **options)
    return build


def raising(exc_type: type[httpx.TransportError]) -> Handler:
    def route(request: httpx.Request) -> httpx.Response:
        raise exc_type("boom", request=request)
    return route


def assert_clean(err: Exception) -> None:
    for text in (str(err), repr(err), json.dumps(getattr(err, "to_dict", dict)())):
        assert KEY not in text
        assert BODY_MARKER not in text


# ---------------------------------------------------------------- request shape


async def test_openai_dialect_request(make: Any) -> None:
    rec = Recorder(lambda r: ok({"content": "hello", "reasoning_content": "hidden"},
                                usage={"prompt_tokens": 3, "completion_tokens": 1}))
    gw = make(rec)
    tools = [{"type": "function", "function": {"name": "read", "parameters": {}}}]
    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": "a", "reasoning_content": "r"}]
    resp = await gw.invoke(ModelRequest(messages=messages, tools=tools,
                                        options={"temperature": 0.2, "top_p": 0.9}))
    await gw.aclose()
    assert resp == ModelResponse(content="hello",
                                 usage={"prompt_tokens": 3, "completion_tokens": 1})
    (request,) = rec.requests
    assert request.method == "POST"
    assert str(request.url) == "https://api.example.test/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = rec.bodies[0]
    assert body == {"model": "m-1", "stream": False, "max_completion_tokens": 1000,
                    "temperature": 0.2, "top_p": 0.9, "tools": tools,
                    "messages": [messages[0], {"role": "assistant", "content": "a"}]}


async def test_deepseek_dialect_request_and_reasoning(make: Any) -> None:
    rec = Recorder(lambda r: ok({"content": None, "reasoning_content": "think",
                                 "tool_calls": [tool_call()]}))
    gw = make(rec, dialect="deepseek")
    messages = [{"role": "assistant", "content": "a", "reasoning_content": "r"}]
    resp = await gw.invoke(ModelRequest(messages=messages,
                                        options={"max_output_tokens": 50}))
    body = rec.bodies[0]
    assert body["max_tokens"] == 50 and "max_completion_tokens" not in body
    assert body["messages"] == messages  # thinking mode wants reasoning_content back
    assert "tools" not in body and "tool_choice" not in body
    assert resp.reasoning_content == "think"
    assert resp.tool_calls == (ToolCall("c1", "read", '{"p": 1}'),)
    assert resp.message()["reasoning_content"] == "think"


async def test_max_output_tokens_option_is_bounded(make: Any) -> None:
    rec = Recorder(lambda r: ok({"content": "x"}))
    gw = make(rec)
    await gw.invoke(ModelRequest(messages=[], options={"max_output_tokens": 10**6}))
    assert rec.bodies[0]["max_completion_tokens"] == 1000


@pytest.mark.parametrize("options", [{"seed": 1}, {"temperature": "hot"},
                                     {"max_output_tokens": 0}, {"top_p": True}])
async def test_bad_options_are_config_errors(make: Any, options: dict[str, Any]) -> None:
    rec = Recorder()
    with pytest.raises(ConfigError):
        await make(rec).invoke(ModelRequest(messages=[], options=options))
    assert rec.requests == []


async def test_api_key_callable_is_resolved_lazily(make: Any) -> None:
    calls: list[int] = []

    def key() -> str:
        calls.append(1)
        return KEY

    rec = Recorder(lambda r: ok({"content": "x"}))
    gw = make(rec, api_key=key)
    assert calls == []
    await gw.invoke(REQUEST)
    assert calls == [1]
    assert rec.requests[0].headers["authorization"] == f"Bearer {KEY}"


async def test_empty_key_sends_no_authorization(make: Any) -> None:
    rec = Recorder(lambda r: httpx.Response(400, json={"error": {"code": "bad_request"}}))
    with pytest.raises(ModelStatusError, match=r"\(bad_request\)"):
        await make(rec, api_key=lambda: "").invoke(REQUEST)
    assert "authorization" not in rec.requests[0].headers


async def test_invalid_key_is_refused_without_echo(make: Any) -> None:
    rec = Recorder()
    with pytest.raises(ModelCredentialsError) as info:  # never sent: nothing is unknown
        await make(rec, api_key="sk-bad\nInjected: 1").invoke(REQUEST)
    assert "Injected" not in str(info.value) and info.value.details["sent"] is False
    assert rec.requests == []


def test_checkpoint_config_is_non_secret(make: Any) -> None:
    gw = make(Recorder(), dialect="deepseek", timeout=30, connect_timeout=5)
    config = gw.checkpoint_config()
    assert gw.module_id == "chat-completions/v1"
    assert config["dialect"] == "deepseek" and config["model"] == "m-1"
    assert config["base_url"] == "https://api.example.test/v1"
    assert config["timeouts"] == {"connect": 5, "read": 30}
    assert config["retry"]["max_retries"] == 2 and config["max_output_tokens"] == 1000
    assert KEY not in json.dumps(config) and KEY not in repr(gw)


@pytest.mark.parametrize("kwargs", [
    {"dialect": "anthropic"}, {"base_url": "ftp://x"}, {"base_url": "https://u:p@h/v1"},
    {"max_retries": -1}, {"timeout": 0}, {"model": ""},
])
def test_bad_construction(make: Any, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        make(Recorder(), **kwargs)


async def test_closed_gateway_refuses(make: Any) -> None:
    gw = make(Recorder(lambda r: ok({"content": "x"})))
    await gw.invoke(REQUEST)
    await gw.aclose()
    await gw.aclose()
    with pytest.raises(ConfigError):
        await gw.invoke(REQUEST)


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(("message", "reason"), [
    ({"content": ""}, "empty_answer"),
    ({"content": "  \n"}, "empty_answer"),
    ({"content": None, "refusal": "no"}, "refusal"),
    ({"content": None, "tool_calls": []}, "empty_answer"),
    ({"content": 3}, "content_type"),
    ({"tool_calls": [tool_call("a"), tool_call("a")]}, "duplicate_tool_call_id"),
    ({"tool_calls": [tool_call("\ud800"), tool_call("\udc00")]}, "duplicate_tool_call_id"),
    ({"tool_calls": [tool_call(call_id="")]}, "tool_call_id"),
    ({"tool_calls": [tool_call(name="")]}, "tool_call_name"),
    ({"tool_calls": [{"id": "a", "type": "function", "function": "read"}]}, "tool_call_name"),
    ({"tool_calls": [tool_call(kind="code")]}, "tool_call_type"),
    ({"tool_calls": {"id": "a"}}, "tool_calls_type"),
])
async def test_invalid_messages(make: Any, message: dict[str, Any], reason: str) -> None:
    rec = Recorder(lambda r: ok({**message, "marker": BODY_MARKER}))
    with pytest.raises(ModelResponseError) as info:
        await make(rec).invoke(REQUEST)
    assert info.value.details["reason"] == reason
    assert len(rec.requests) == 1  # a malformed answer is never retried
    assert_clean(info.value)


@pytest.mark.parametrize(("content", "reason"), [
    (b"not json " + BODY_MARKER.encode(), "not_json"),
    (b"[]", "not_object"),
    (b'{"choices": []}', "no_choices"),
    (b'{"choices": [{"index": 0}]}', "no_message"),
    (b"[" * 100_000, "not_json"),
])
async def test_invalid_bodies(make: Any, content: bytes, reason: str) -> None:
    rec = Recorder(lambda r: httpx.Response(200, content=content))
    with pytest.raises(ModelResponseError) as info:
        await make(rec).invoke(REQUEST)
    assert info.value.details["reason"] == reason
    assert_clean(info.value)


async def test_valid_tool_calls_keep_argument_text(make: Any) -> None:
    calls = [tool_call("a", "read", '{"path": "x"}'), tool_call("b", "list", "[]")]
    rec = Recorder(lambda r: ok({"content": "", "tool_calls": calls}))
    resp = await make(rec).invoke(REQUEST)
    assert [c.arguments for c in resp.tool_calls] == ['{"path": "x"}', "[]"]
    assert resp.usage is None and resp.reasoning_content is None


@pytest.mark.parametrize(("arguments", "kept"), [
    ("{not json", "{not json"),
    ('{"path": "a.txt"', '{"path": "a.txt"'),
    ("", ""),
    (None, ""),
    ({"p": 1}, '{"p": 1}'),
    ('{"p": "\\ud800"}', '{"p": "\\ud800"}'),  # an escape: the tool runtime refuses it
    ('{"p": "\\u00e9 \\ud83d\\ude00"}', '{"p": "\\u00e9 \\ud83d\\ude00"}'),
])
async def test_tool_call_arguments_that_are_not_json_are_kept(
        make: Any, arguments: Any, kept: str) -> None:
    """Only the tool runtime judges arguments (it answers bad ones with a failure result
    the model can correct); the gateway keeps them, made storable (a lone surrogate as
    its escape, never U+FFFD: issue 17)."""
    call: dict[str, Any] = {"id": "c1", "type": "function", "function": {"name": "read"}}
    if arguments is not None:
        call["function"]["arguments"] = arguments
    rec = Recorder(lambda r: ok({"content": None, "tool_calls": [call]}))
    resp = await make(rec).invoke(REQUEST)
    assert resp.tool_calls == (ToolCall("c1", "read", kept),)


async def test_lone_surrogates_are_replaced_in_every_text(make: Any) -> None:
    """Every text but the arguments: there a lone surrogate stays an escape, so the tool
    runtime refuses the call instead of running it on a name with U+FFFD (issue 17)."""
    calls = [tool_call("id-\ud800", "read\udbff", '{"p": "\ud800"}')]
    rec = Recorder(lambda r: ok({"content": "a\udfffb", "reasoning_content": "\ud800",
                                 "tool_calls": calls}, usage={"note": "\ud800"}))
    resp = await make(rec, dialect="deepseek").invoke(REQUEST)
    assert resp == ModelResponse(content="a\ufffdb", reasoning_content="\ufffd",
                                 tool_calls=(ToolCall("id-\ufffd", "read\ufffd",
                                                      '{"p": "\\ud800"}'),),
                                 usage={"note": "\ufffd"})


# ---------------------------------------------------------------- deadline


class StallingTransport(httpx.AsyncBaseTransport):
    """Reports the given trace events for each request, then never answers."""

    def __init__(self, *events: str) -> None:
        self.events = events
        self.requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        trace = request.extensions.get("trace")
        for event in self.events:
            if trace is not None:
                await trace(event, {})
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


@pytest.mark.parametrize(("events", "sent", "requests"), [
    (("connection.connect_tcp.started",), False, 3),
    (("connection.connect_tcp.started", "connection.connect_tcp.complete",
      "http11.send_request_headers.started"), True, 1),
    (("http2.send_request_headers.started",), True, 1),
    ((), True, 1),  # a transport that does not trace: the request may have gone out
])
async def test_attempt_deadline_reports_whether_the_request_was_sent(
        sleeps: Sleeps, events: tuple[str, ...], sent: bool, requests: int) -> None:
    transport = StallingTransport(*events)
    gw = ChatCompletionsGateway(base_url="https://api.example.test/v1", model="m",
                                api_key=KEY, timeout=0.05, max_retries=2, sleep=sleeps,
                                transport=transport)
    with pytest.raises(ModelTransportError) as info:
        await gw.invoke(REQUEST)
    await gw.aclose()
    assert info.value.details["reason"] == "deadline"
    assert info.value.details["sent"] is sent
    assert info.value.details["attempts"] == requests == transport.requests
    assert error_from_dict(info.value.to_dict()).details["sent"] is sent


# ---------------------------------------------------------------- retries


async def test_connect_errors_are_retried_up_to_the_bound(make: Any, sleeps: Sleeps) -> None:
    rec = Recorder(*[raising(httpx.ConnectError)] * 3)
    with pytest.raises(ModelTransportError) as info:
        await make(rec).invoke(REQUEST)
    assert len(rec.requests) == 3
    assert info.value.details == {"sent": False, "reason": "ConnectError", "attempts": 3}
    assert len(sleeps) == 2
    assert 0.5 <= sleeps[0] <= 0.55 and 1.0 <= sleeps[1] <= 1.1  # backoff + small jitter


async def test_connect_timeout_then_success(make: Any, sleeps: Sleeps) -> None:
    rec = Recorder(raising(httpx.ConnectTimeout), lambda r: ok({"content": "x"}))
    assert (await make(rec).invoke(REQUEST)).content == "x"
    assert len(rec.requests) == 2 and len(sleeps) == 1


async def test_503_is_retried_up_to_the_bound(make: Any, sleeps: Sleeps) -> None:
    rec = Recorder(*[lambda r: httpx.Response(503, text=BODY_MARKER)] * 3)
    with pytest.raises(ModelStatusError) as info:
        await make(rec).invoke(REQUEST)
    assert len(rec.requests) == 3 and len(sleeps) == 2
    assert info.value.status == 503 and info.value.retryable
    assert info.value.details["attempts"] == 3
    assert_clean(info.value)


async def test_no_retries_when_disabled(make: Any, sleeps: Sleeps) -> None:
    rec = Recorder(lambda r: httpx.Response(503))
    with pytest.raises(ModelStatusError):
        await make(rec, max_retries=0).invoke(REQUEST)
    assert len(rec.requests) == 1 and sleeps == []


@pytest.mark.parametrize("exc_type", [httpx.ReadTimeout, httpx.RemoteProtocolError,
                                      httpx.ReadError, httpx.WriteTimeout])
async def test_failures_after_sending_are_not_retried(
        make: Any, sleeps: Sleeps, exc_type: type[httpx.TransportError]) -> None:
    rec = Recorder(raising(exc_type))
    with pytest.raises(ModelTransportError) as info:
        await make(rec).invoke(REQUEST)
    assert len(rec.requests) == 1 and sleeps == []
    assert info.value.details["sent"] is True
    assert error_from_dict(info.value.to_dict()).details["sent"] is True


@pytest.mark.parametrize("status", [400, 401, 403, 422])
async def test_client_errors_are_not_retried(make: Any, sleeps: Sleeps, status: int) -> None:
    body = {"error": {"message": f"{BODY_MARKER} key {KEY}", "type": "invalid_request_error",
                      "code": "context_length_exceeded"}}
    rec = Recorder(lambda r: httpx.Response(status, json=body))
    with pytest.raises(ModelStatusError) as info:
        await make(rec).invoke(REQUEST)
    err = info.value
    assert len(rec.requests) == 1 and sleeps == []
    assert err.status == status and not err.retryable
    assert str(err) == f"model provider answered HTTP {status} (context_length_exceeded)"
    assert err.to_dict()["details"] == {"status": status, "retryable": False, "attempts": 1,
                                        "provider_code": "context_length_exceeded"}
    assert_clean(err)


async def test_a_404_is_model_not_found_naming_the_model(make: Any, sleeps: Sleeps) -> None:
    """Issue 17: a wrong model name is told apart (a resume would ask for it again)."""
    body = {"error": {"message": f"{BODY_MARKER} key {KEY}", "code": "model_not_found"}}
    rec = Recorder(lambda r: httpx.Response(404, json=body))
    with pytest.raises(ModelNotFound) as info:
        await make(rec).invoke(REQUEST)
    err = info.value
    assert len(rec.requests) == 1 and sleeps == [] and not err.retryable
    assert (err.code, err.status) == ("model_not_found", 404)
    assert str(err) == ("model provider answered HTTP 404 (model_not_found): it has no "
                        "model 'm-1' at https://api.example.test/v1 (check the model name "
                        "and the base URL)")
    assert isinstance(error_from_dict(err.to_dict()), ModelNotFound)
    assert_clean(err)


@pytest.mark.parametrize("error", [
    {"code": f"x {BODY_MARKER}", "type": None}, {"code": KEY}, {"type": "a" * 65}, "text",
])
async def test_unsafe_provider_codes_are_dropped(make: Any, error: Any) -> None:
    rec = Recorder(lambda r: httpx.Response(400, json={"error": error}))
    with pytest.raises(ModelStatusError) as info:
        await make(rec).invoke(REQUEST)
    assert str(info.value) == "model provider answered HTTP 400"
    assert "provider_code" not in info.value.details
    assert_clean(info.value)


async def test_retry_after_is_respected_and_capped(make: Any, sleeps: Sleeps) -> None:
    rec = Recorder(lambda r: httpx.Response(429, headers={"Retry-After": "3"}),
                   lambda r: httpx.Response(429, headers={"Retry-After": "3600"}),
                   lambda r: ok({"content": "x"}))
    assert (await make(rec, retry_after_cap=20).invoke(REQUEST)).content == "x"
    assert sleeps == [3.0, 20.0]


async def test_exhausted_quota_is_not_retried(make: Any, sleeps: Sleeps) -> None:
    body = {"error": {"message": "quota", "type": "insufficient_quota",
                      "code": "insufficient_quota"}}
    rec = Recorder(lambda r: httpx.Response(429, json=body))
    with pytest.raises(ModelStatusError) as info:
        await make(rec).invoke(REQUEST)
    assert len(rec.requests) == 1 and sleeps == [] and not info.value.retryable
    assert str(info.value) == "model provider answered HTTP 429 (insufficient_quota)"


def test_retry_after_parsing() -> None:
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("2.5") == 2.5
    assert retry_after_seconds("-4") == 0.0
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds("nan") is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past


# ---------------------------------------------------------------- transport limits


async def test_declared_size_over_the_cap_is_refused(make: Any) -> None:
    rec = Recorder(lambda r: httpx.Response(200, content=b"x" * 2048))
    with pytest.raises(ModelResponseError) as info:
        await make(rec, max_response_bytes=1024).invoke(REQUEST)
    assert info.value.details == {"reason": "too_large", "limit": 1024}


async def test_streamed_size_is_capped_while_reading(make: Any) -> None:
    produced: list[int] = []

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(1000):
            produced.append(1)
            yield b"x" * 512

    rec = Recorder(lambda r: httpx.Response(200, content=chunks()))
    with pytest.raises(ModelResponseError) as info:
        await make(rec, max_response_bytes=4096).invoke(REQUEST)
    assert info.value.details["reason"] == "too_large"
    assert len(produced) < 20  # stopped reading soon after the cap, not at the end


async def test_large_error_bodies_are_truncated_not_refused(make: Any) -> None:
    rec = Recorder(lambda r: httpx.Response(400, content=b"y" * 1_000_000))
    with pytest.raises(ModelStatusError) as info:
        await make(rec).invoke(REQUEST)
    assert info.value.status == 400


async def test_redirects_are_not_followed(make: Any) -> None:
    rec = Recorder(lambda r: httpx.Response(307, headers={"Location": "https://evil.test/x"}))
    with pytest.raises(ModelStatusError) as info:
        await make(rec).invoke(REQUEST)
    assert len(rec.requests) == 1
    assert info.value.status == 307 and "redirects are not followed" in str(info.value)
