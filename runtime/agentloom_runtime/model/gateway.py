"""``chat-completions/v1``: the default model gateway (docs/contract.md#data-contracts).

One POST to ``{base_url}/chat/completions`` per attempt, no streaming. Each attempt —
connect, send, and reading the whole body — has a total deadline of ``timeout`` seconds,
so a server that trickles bytes cannot hold a run longer than that.

The response is validated in full before the runtime sees it: an answer or tool calls with
unique ids. Arguments are kept as the model wrote them, even when they are not JSON (the
tool runtime turns those into a failure result the model can correct). Every text is made
storable at this boundary: lone surrogates (which JSON ``\\ud800`` escapes decode to)
become U+FFFD, so nothing downstream fails to encode a model's output — in tool-call
arguments they stay escapes instead, for the tool runtime to refuse the call.

Retries are bounded and happen only where a repeat cannot bill twice for work the provider
may already have done: a connection that never opened, or an explicitly retryable status.
A read timeout, a missed deadline or a disconnect after sending raises
``ModelTransportError`` with ``details["sent"] is True`` and is never repeated here; the
host decides (``retry_unknown_models``).

Errors name a status and at most a sanitized provider error code, never a response body
or the key: they are saved into checkpoints and shown to users.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import random
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import httpx

from agentloom_runtime._json import escaped_surrogates, storable, storable_text
from agentloom_runtime.contracts import JSON, Message, ModelRequest, ModelResponse, ToolCall
from agentloom_runtime.errors import (
    ConfigError,
    ModelCredentialsError,
    ModelNotFound,
    ModelResponseError,
    ModelStatusError,
    ModelTransportError,
)

Dialect = Literal["openai", "deepseek"]
ApiKey = str | Callable[[], str]
Sleep = Callable[[float], Awaitable[None]]

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
_ERROR_BODY_BYTES = 64 * 1024  # enough to read an error code; the rest is dropped
_OPTIONS = frozenset({"temperature", "top_p", "max_output_tokens"})
_CODE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_JITTER = 0.1


# ---------------------------------------------------------------- response validation


def _invalid(message: str, reason: str, index: int | None = None) -> ModelResponseError:
    details: JSON = {"reason": reason} if index is None else {"reason": reason, "index": index}
    return ModelResponseError(f"invalid model response: {message}", details=details)


def _arguments(value: Any) -> str:
    """The arguments as text, kept even when they are not JSON: the tool runtime answers
    those with a failure result the model can correct, instead of the run stopping here.
    A missing value is "" (a call without arguments); a decoded JSON value (a proxy that
    sends an object) becomes its JSON text. A lone surrogate stays a ``\\ud800`` escape
    (raw ones are escaped): the text is storable, and the tool runtime refuses the call
    instead of running it on a name with U+FFFD in it."""
    if value is None:
        return ""
    if not isinstance(value, str):
        return escaped_surrogates(json.dumps(value, ensure_ascii=False))
    return escaped_surrogates(value)


def _tool_call(item: Any, index: int, seen: set[str]) -> ToolCall:
    where = f"tool call {index}"
    if not isinstance(item, Mapping) or item.get("type") != "function":
        raise _invalid(f"{where} is not a function call", "tool_call_type", index)
    call_id = item.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise _invalid(f"{where} has no id", "tool_call_id", index)
    call_id = storable_text(call_id)
    if call_id in seen:
        raise _invalid(f"{where} repeats the id of an earlier call", "duplicate_tool_call_id",
                       index)
    seen.add(call_id)
    function = item.get("function")
    if not isinstance(function, Mapping):
        raise _invalid(f"{where} has no function", "tool_call_name", index)
    name = function.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _invalid(f"{where} has no function name", "tool_call_name", index)
    return ToolCall(id=call_id, name=storable_text(name),
                    arguments=_arguments(function.get("arguments")))


def validate_message(message: Any, *, usage: Mapping[str, Any] | None = None,
                     keep_reasoning: bool = True) -> ModelResponse:
    """Normalize one assistant message; raise ``ModelResponseError`` when it is unusable.
    The result holds only storable text (no lone surrogates).

    Shared with the test doubles so a script cannot produce what a provider may not.
    """
    if not isinstance(message, Mapping):
        raise _invalid("choices[0].message is missing", "no_message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise _invalid("content is not a string", "content_type")
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise _invalid("tool_calls is not a list", "tool_calls_type")
    seen: set[str] = set()
    calls = tuple(_tool_call(item, i, seen) for i, item in enumerate(raw_calls))
    if not calls and not (content and content.strip()):
        refused = isinstance(message.get("refusal"), str) and bool(message.get("refusal"))
        raise _invalid("the model returned neither an answer nor tool calls",
                       "refusal" if refused else "empty_answer")
    reasoning = message.get("reasoning_content") if keep_reasoning else None
    if reasoning is not None and not isinstance(reasoning, str):
        raise _invalid("reasoning_content is not a string", "reasoning_type")
    return ModelResponse(
        content=None if content is None else storable_text(content), tool_calls=calls,
        reasoning_content=None if reasoning is None else storable_text(reasoning),
        usage=storable(dict(usage)) if usage is not None else None)


def parse_chat_completion(data: Any, *, keep_reasoning: bool) -> ModelResponse:
    """Validate a decoded chat-completions body; only ``choices[0]`` and ``usage`` are kept."""
    if not isinstance(data, Mapping):
        raise _invalid("the body is not a JSON object", "not_object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise _invalid("the body has no choices", "no_choices")
    usage = data.get("usage")
    return validate_message(choices[0].get("message"),
                            usage=usage if isinstance(usage, Mapping) else None,
                            keep_reasoning=keep_reasoning)


# ---------------------------------------------------------------- transport helpers


@dataclass(frozen=True)
class _Reply:
    status: int
    retry_after: str | None
    body: bytes


class _Progress:
    """How far one attempt got, from httpcore's ``trace`` extension: once the request
    headers start going out, the provider may act on the request. A transport that does
    not trace (a mock, a custom one) tells us nothing, so its requests count as sent."""

    __slots__ = ("sending", "traced")

    def __init__(self) -> None:
        self.traced = False
        self.sending = False

    async def trace(self, event: str, info: Mapping[str, Any]) -> None:
        self.traced = True
        if ".send_request_" in event:
            self.sending = True

    @property
    def sent(self) -> bool:
        return self.sending or not self.traced


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(
        value)


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP-date); None if absent."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _too_large(limit: int) -> ModelResponseError:
    return ModelResponseError(f"invalid model response: the body exceeds {limit} bytes",
                              details={"reason": "too_large", "limit": limit})


async def _read_capped(response: httpx.Response, limit: int, *, truncate: bool) -> bytes:
    """Read at most ``limit`` decoded bytes while streaming, so a huge body never lands
    in memory; beyond it either truncate (error bodies) or refuse (answers)."""
    declared = response.headers.get("content-length", "")
    if not truncate and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            if truncate:
                return bytes(body[:limit])
            raise _too_large(limit)
    return bytes(body)


def _provider_code(body: bytes, secret: str) -> str | None:
    """The provider's ``error.code`` or ``error.type`` if it is a short token; never text."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None
    for field in ("code", "type"):
        value = error.get(field)
        if isinstance(value, str) and _CODE.fullmatch(value) and not (
                secret and (value in secret or secret in value)):
            return value
    return None


def _retryable(reply: _Reply, key: str) -> bool:
    """A retryable status, unless it is a 429 for an exhausted quota (waiting won't help)."""
    return reply.status in RETRYABLE_STATUSES and \
        _provider_code(reply.body, key) != "insufficient_quota"


def _check_key(key: object) -> str:
    """An empty key is allowed: keyless local servers get no Authorization header."""
    if not isinstance(key, str) or not key.isascii() or not key.isprintable() \
            or key != key.strip() or " " in key:
        raise ConfigError("api_key is not a string usable as a header value")
    return key


def _check_base_url(base_url: str) -> str:
    try:
        url = httpx.URL(base_url)
    except (TypeError, httpx.InvalidURL) as exc:
        raise ConfigError("base_url is not a valid URL") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError("base_url must be an absolute http(s) URL")
    if url.userinfo or url.query or url.fragment:
        raise ConfigError("base_url must not carry credentials, a query or a fragment")
    return str(url).rstrip("/")


# ---------------------------------------------------------------- gateway


class ChatCompletionsGateway:
    """OpenAI / DeepSeek compatible Chat Completions over httpx.

    ``openai`` sends ``max_completion_tokens`` and drops ``reasoning_content`` both ways;
    ``deepseek`` sends ``max_tokens`` and round-trips ``reasoning_content`` (its thinking
    mode requires it back on tool-call turns).
    """

    module_id = "chat-completions/v1"

    def __init__(self, *, base_url: str, model: str, api_key: ApiKey,
                 dialect: Dialect = "openai", max_output_tokens: int = 4096,
                 timeout: float = 120.0, connect_timeout: float = 10.0,
                 max_retries: int = 2, backoff_base: float = 0.5, backoff_max: float = 8.0,
                 retry_after_cap: float = 20.0, max_response_bytes: int = MAX_RESPONSE_BYTES,
                 transport: httpx.AsyncBaseTransport | None = None,
                 sleep: Sleep | None = None) -> None:
        if dialect not in ("openai", "deepseek"):
            raise ConfigError(f"unknown dialect {dialect!r}; use 'openai' or 'deepseek'")
        if not isinstance(model, str) or not model:
            raise ConfigError("model must be a non-empty string")
        positive = {"max_output_tokens": max_output_tokens, "timeout": timeout,
                    "connect_timeout": connect_timeout, "max_response_bytes": max_response_bytes}
        if any(not _number(v) or v <= 0 for v in positive.values()):
            raise ConfigError(f"these must be positive numbers: {sorted(positive)}")
        limits = (max_retries, backoff_base, backoff_max, retry_after_cap)
        if not isinstance(max_retries, int) or any(not _number(v) or v < 0 for v in limits):
            raise ConfigError("retry settings must be non-negative numbers")
        self._base_url = _check_base_url(base_url)
        self._model = model
        self._api_key = api_key
        self._dialect: Dialect = dialect
        self._max_output_tokens = int(max_output_tokens)
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout, pool=connect_timeout)
        self._max_retries = max_retries
        self._backoff = (float(backoff_base), float(backoff_max))
        self._retry_after_cap = float(retry_after_cap)
        self._max_response_bytes = int(max_response_bytes)
        self._transport = transport
        self._sleep: Sleep = asyncio.sleep if sleep is None else sleep
        self._client: httpx.AsyncClient | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"ChatCompletionsGateway(dialect={self._dialect!r}, model={self._model!r}, " \
               f"base_url={self._base_url!r})"

    def checkpoint_config(self) -> JSON:
        """``timeouts.read`` is also the total deadline of one attempt (connect, send and
        the whole body)."""
        return {"dialect": self._dialect, "base_url": self._base_url, "model": self._model,
                "max_output_tokens": self._max_output_tokens,
                "max_response_bytes": self._max_response_bytes,
                "timeouts": {"connect": self._timeout.connect, "read": self._timeout.read},
                "retry": {"max_retries": self._max_retries,
                          "statuses": sorted(RETRYABLE_STATUSES),
                          "backoff_base": self._backoff[0], "backoff_max": self._backoff[1],
                          "retry_after_cap": self._retry_after_cap}}

    async def aclose(self) -> None:
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    # -------------------------------------------------------------- request

    def _client_for_call(self) -> httpx.AsyncClient:
        """Created on first use so it binds to the event loop that runs the calls."""
        if self._closed:
            raise ConfigError("the model gateway is closed")
        if self._client is None:
            self._client = httpx.AsyncClient(
                transport=self._transport, timeout=self._timeout, trust_env=False,
                follow_redirects=False)
        return self._client

    def _resolve_key(self) -> str:
        """Resolved per call, so the host's callable decides about caching and rotation."""
        return _check_key(self._api_key() if callable(self._api_key) else self._api_key)

    def _max_tokens(self, options: Mapping[str, Any]) -> int:
        requested = options.get("max_output_tokens")
        if requested is None:
            return self._max_output_tokens
        if not isinstance(requested, int) or isinstance(requested, bool) or requested < 1:
            raise ConfigError("options.max_output_tokens must be a positive integer")
        return min(requested, self._max_output_tokens)

    def _messages(self, messages: Sequence[Message]) -> list[Message]:
        if self._dialect == "deepseek":
            return [dict(m) for m in messages]
        return [{k: v for k, v in m.items() if k != "reasoning_content"} for m in messages]

    def build_body(self, request: ModelRequest) -> JSON:
        """The JSON body for ``request``; raises ``ConfigError`` on unsupported options."""
        options = request.options
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise ConfigError(f"unsupported model options: {unknown}")
        tokens_field = "max_tokens" if self._dialect == "deepseek" else "max_completion_tokens"
        body: JSON = {"model": self._model, "messages": self._messages(request.messages),
                      "stream": False, tokens_field: self._max_tokens(options)}
        for name in ("temperature", "top_p"):
            value = options.get(name)
            if value is None:
                continue
            if not _number(value) or value < 0:
                raise ConfigError(f"options.{name} must be a non-negative number")
            body[name] = value
        if request.tools:
            body["tools"] = list(request.tools)
        return body

    def _encode(self, request: ModelRequest) -> bytes:
        try:
            return json.dumps(self.build_body(request), ensure_ascii=False,
                              allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            raise ConfigError("the model request is not JSON-serializable") from exc

    # -------------------------------------------------------------- invoke

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        client = self._client_for_call()
        payload = self._encode(request)
        try:
            key = self._resolve_key()
        except ConfigError as err:  # before any I/O: the request never left
            raise ModelCredentialsError(
                f"the model request was not sent: {err.message}; set the credential, then "
                "resume the run", details={"sent": False, "reason": "credentials"}) from None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        attempt = 0
        while True:
            attempt += 1
            try:
                reply = await self._attempt(client, payload, headers)
            except ModelTransportError as exc:
                exc.details["attempts"] = attempt
                if exc.details.get("sent") or attempt > self._max_retries:
                    raise
                await self._sleep(self._delay(attempt, None))
                continue
            if attempt <= self._max_retries and _retryable(reply, key):
                await self._sleep(self._delay(attempt, retry_after_seconds(reply.retry_after)))
                continue
            return self._finish(reply, key, attempt)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Retry-After wins (capped); otherwise exponential backoff with a little jitter."""
        if retry_after is not None:
            return min(retry_after, self._retry_after_cap)
        base, ceiling = self._backoff
        delay = min(ceiling, base * 2.0 ** (attempt - 1))
        return delay + random.uniform(0.0, delay * _JITTER)

    async def _attempt(self, client: httpx.AsyncClient, payload: bytes,
                       headers: Mapping[str, str]) -> _Reply:
        """One attempt under its total deadline. httpx's timeouts bound each read; this
        bounds the sum, which a byte every few seconds would otherwise stretch forever."""
        progress = _Progress()
        deadline = self._timeout.read
        try:
            async with asyncio.timeout(deadline) as scope:
                return await self._send_once(client, payload, headers, progress)
        except TimeoutError as exc:
            if not scope.expired():
                raise
            sent = progress.sent
            outcome = "; the outcome is unknown" if sent else " (nothing was sent)"
            raise ModelTransportError(
                f"the model request did not complete within {deadline:g} s{outcome}",
                details={"sent": sent, "reason": "deadline", "deadline_seconds": deadline},
            ) from exc

    async def _send_once(self, client: httpx.AsyncClient, payload: bytes,
                         headers: Mapping[str, str], progress: _Progress) -> _Reply:
        url = f"{self._base_url}/chat/completions"
        try:
            async with client.stream("POST", url, content=payload, headers=headers,
                                     extensions={"trace": progress.trace}) as response:
                ok = response.is_success
                body = await _read_capped(
                    response, self._max_response_bytes if ok else _ERROR_BODY_BYTES,
                    truncate=not ok)
                return _Reply(response.status_code, response.headers.get("retry-after"), body)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise ModelTransportError(
                f"could not connect to the model provider ({type(exc).__name__})",
                details={"sent": False, "reason": type(exc).__name__}) from exc
        except httpx.TransportError as exc:
            # Read/write timeouts, resets and protocol errors: the request may have been
            # processed (and billed), so the outcome is unknown and this is not retried.
            raise ModelTransportError(
                f"the model request was sent but no response was received "
                f"({type(exc).__name__})",
                details={"sent": True, "reason": type(exc).__name__}) from exc

    def _finish(self, reply: _Reply, key: str, attempts: int) -> ModelResponse:
        if 200 <= reply.status < 300:
            try:
                data = json.loads(reply.body)
            except (ValueError, RecursionError):
                raise _invalid("the body is not JSON", "not_json") from None
            return parse_chat_completion(data, keep_reasoning=self._dialect == "deepseek")
        details: JSON = {"attempts": attempts}
        if 300 <= reply.status < 400:
            message = f"model provider answered HTTP {reply.status}; redirects are not followed"
        else:
            code = _provider_code(reply.body, key)
            message = f"model provider answered HTTP {reply.status}"
            if code is not None:
                message += f" ({code})"
                details["provider_code"] = code
        if reply.status == 404:  # the same model is asked for again on a resume
            raise ModelNotFound(f"{message}: it has no model {self._model!r} at "
                                f"{self._base_url} (check the model name and the base URL)",
                                status=404, details=details)
        raise ModelStatusError(message, status=reply.status, retryable=_retryable(reply, key),
                               details=details)
