"""A tiny OpenAI-compatible Chat Completions server for tests and the demo.

It listens on 127.0.0.1 (ephemeral port) in a background thread and answers
``POST /v1/chat/completions`` (and ``/chat/completions``) from a script, so the real
gateway — sockets, headers, status codes, timeouts — is exercised without a provider.

Script steps are those of ``ScriptedModel`` plus wire-level injections: ``Raw`` (any
status, headers and body, optionally after a delay, optionally trickled a byte at a time)
and ``Disconnect`` (close the socket without answering). A scripted ``ModelStatusError``
is sent as that status with an OpenAI error body; any other exception as 500. An
unplanned call is answered 400 with error code ``script_exhausted`` and recorded in
``unexpected``. ``GET /v1/models`` lists one model, or the entries given as ``models``
(any fields a provider may publish, e.g. ``context_length``: for discovery tests).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from agentloom_runtime.contracts import JSON, ModelRequest, ModelResponse
from agentloom_runtime.errors import ModelStatusError
from agentloom_runtime.testing.scripted import Reply, ScriptNotConsumed, Step, as_step, to_response


@dataclass(frozen=True)
class Raw:
    """Send exactly this (after ``delay`` seconds): for status, size and timeout tests.
    With ``trickle`` the headers go out at once and the body one byte every ``trickle``
    seconds (a slow or stuck upstream that never trips a per-read timeout)."""

    status: int = 200
    body: bytes | str | Mapping[str, Any] = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    trickle: float = 0.0


@dataclass(frozen=True)
class Disconnect:
    """Read the request, then close the connection without a response."""


@dataclass(frozen=True)
class Received:
    path: str
    headers: Mapping[str, str]  # lower-cased names
    body: Any  # decoded JSON, or None when the body was not JSON


def completion_body(response: ModelResponse, *, model: str, number: int = 1) -> JSON:
    """The chat.completion JSON a provider would send for ``response``."""
    usage = dict(response.usage) if response.usage is not None else {
        "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    return {
        "id": f"chatcmpl-{number}", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": response.message(),
                     "finish_reason": "tool_calls" if response.tool_calls else "stop"}],
        "usage": usage,
    }


def error_body(message: str, code: str, kind: str = "invalid_request_error") -> JSON:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _request_of(body: Any) -> ModelRequest:
    """What a callable step sees: the wire carries no purpose or instance."""
    data = body if isinstance(body, dict) else {}
    options = {k: data[k] for k in ("temperature", "top_p") if k in data}
    tokens = data.get("max_completion_tokens", data.get("max_tokens"))
    if tokens is not None:
        options["max_output_tokens"] = tokens
    return ModelRequest(messages=list(data.get("messages") or []),
                        tools=list(data.get("tools") or []), options=options)


_ServerStep = Step | Raw | Disconnect


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    error_message_format = "%(code)d %(message)s"  # keep stdlib HTML out of test logs

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read ``OpenAICompatibleServer.received`` instead."""

    def _send(self, status: int, body: bytes | str | Mapping[str, Any],
              headers: Mapping[str, str] | None = None, *, trickle: float = 0.0) -> None:
        data = body if isinstance(body, bytes) else (
            body.encode() if isinstance(body, str) else json.dumps(body).encode())
        self.send_response(status)
        merged = {"Content-Type": "application/json", "Content-Length": str(len(data)),
                  **(headers or {})}
        for name, value in merged.items():
            self.send_header(name, value)
        self.end_headers()
        if trickle <= 0:
            self.wfile.write(data)
            return
        stopping = self.server.owner.stopping
        for i in range(len(data)):
            self.wfile.write(data[i:i + 1])
            self.wfile.flush()
            if stopping.wait(trickle):
                return  # the server is stopping: give up on this client

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            owner = self.server.owner
            self._send(200, {"object": "list", "data": owner.models if owner.models
                             is not None else [{"id": owner.model, "object": "model",
                                                "created": 0,
                                                "owned_by": "agentloom-testing"}]})
        else:
            self._send(404, error_body("not found", "not_found"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, error_body("not found", "not_found"))
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        owner = self.server.owner
        headers = {k.lower(): v for k, v in self.headers.items()}
        number = owner.record(Received(self.path, headers, body))
        if owner.api_key is not None and headers.get("authorization") != \
                f"Bearer {owner.api_key}":
            self._send(401, error_body("invalid api key", "invalid_api_key"))
        elif body is None:
            self._send(400, error_body("the body is not JSON", "invalid_json"))
        else:
            step = owner.take(number)
            if step is None:
                self._send(400, error_body(f"unexpected call #{number}", "script_exhausted"))
            else:
                self._play(step, body, number)

    def _play(self, step: _ServerStep, body: Any, number: int) -> None:
        reply = step.reply if isinstance(step, Step) else step
        if isinstance(reply, Disconnect):
            self.close_connection = True
            return
        if isinstance(reply, Raw):
            self.server.owner.stopping.wait(reply.delay)
            self._send(reply.status, reply.body, reply.headers, trickle=reply.trickle)
            return
        try:
            if isinstance(reply, BaseException):
                raise reply
            response = to_response(reply(_request_of(body)) if callable(reply) else reply)
        except ModelStatusError as exc:
            code = str(exc.details.get("provider_code", "scripted_error"))
            self._send(exc.status, error_body(exc.message, code))
        except Exception as exc:  # a scripted failure becomes a server error, as upstream
            self._send(500, error_body(type(exc).__name__, "server_error", "server_error"))
        else:
            model = body.get("model", "") if isinstance(body, dict) else ""
            self._send(200, completion_body(response, model=str(model), number=number))


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: OpenAICompatibleServer) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a timeout test) is expected; keep stderr clean."""


class OpenAICompatibleServer:
    """``with OpenAICompatibleServer(steps) as srv: ... srv.base_url ...``"""

    def __init__(self, steps: Iterable[Reply | Step | Raw | Disconnect] = (), *,
                 model: str = "scripted-model", api_key: str | None = None,
                 models: Iterable[Mapping[str, Any]] | None = None) -> None:
        self._steps = [self._as_step(s) for s in steps]
        self._next = 0
        self._lock = threading.Lock()
        self.model = model
        self.models = None if models is None else [dict(m) for m in models]
        self.api_key = api_key
        self.received: list[Received] = []
        self.unexpected: list[int] = []  # numbers of calls past the end of the script
        self.stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @staticmethod
    def _as_step(item: Reply | Step | Raw | Disconnect) -> _ServerStep:
        if isinstance(item, Raw | Disconnect):
            return item
        step = as_step(item)
        if step.purpose is not None:
            raise ValueError("the wire carries no purpose; use ScriptedModel to check it")
        return step

    def record(self, received: Received) -> int:
        with self._lock:
            self.received.append(received)
            return len(self.received)

    def take(self, number: int) -> _ServerStep | None:
        """The next step, or None (and ``number`` noted as unexpected) past the end."""
        with self._lock:
            if self._next >= len(self._steps):
                self.unexpected.append(number)
                return None
            self._next += 1
            return self._steps[self._next - 1]

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the server is not running")
        return int(self._server.server_address[1])

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What a gateway's ``base_url`` should be: it appends ``/chat/completions``."""
        return f"{self.root_url}/v1"

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.received]

    def start(self) -> OpenAICompatibleServer:
        if self._server is not None:
            raise RuntimeError("the server is already running")
        self.stopping.clear()
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        name="openai-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread, self._server, self._thread = self._server, self._thread, None, None
        if server is None or thread is None:
            return
        self.stopping.set()  # wakes handlers sleeping in a Raw delay
        server.shutdown()
        server.server_close()  # joins the handler threads
        thread.join()

    def assert_consumed(self) -> None:
        with self._lock:
            left, unexpected = len(self._steps) - self._next, list(self.unexpected)
        if left or unexpected:
            raise ScriptNotConsumed(f"{left} scripted responses not served; "
                                    f"unexpected calls: {unexpected}")

    def __enter__(self) -> OpenAICompatibleServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


