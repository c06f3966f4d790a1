"""Real MCP servers on 127.0.0.1 for the tests: the SDK's ``MCPServer`` served by
uvicorn in a thread (Streamable HTTP — both the 2025-11-25 handshake and the stateless
2026-07-28 core — or legacy SSE), with tools that answer, fail, hang, return too much,
an image, one whose schema the test can change, one that requires MCP tasks, one that
echoes the request's credential; a middleware that forgets sessions on demand.
``calls`` counts what ran."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN = "s3cret-token-for-tests"


@dataclass
class State:
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    entered: threading.Event = field(default_factory=threading.Event)
    auth_seen: list[str] = field(default_factory=list)
    forget: int = 0  # how many more tools/call POSTs answer 404 "Session not found"
    forgotten: int = 0


class _Server(MCPServer):
    """Lists ``long_job`` as a tool that requires MCP tasks (2025-11-25
    ``execution.taskSupport``)."""

    async def list_tools(self) -> list[types.Tool]:
        tools = await super().list_tools()
        required = types.ToolExecution(task_support="required")
        return [t.model_copy(update={"execution": required}) if t.name == "long_job" else t
                for t in tools]


def build(state: State) -> MCPServer:
    server = _Server("agentloom-test", log_level="ERROR")
    read_only = types.ToolAnnotations(read_only_hint=True)

    @server.tool()
    def long_job(items: int) -> str:
        """A job the server runs only as an MCP task."""
        state.calls.append(("long_job", {"items": items}))
        return "done"

    @server.tool()
    def whoami() -> str:
        """The Authorization header this request carried (a server echoing a secret)."""
        return state.auth_seen[-1] if state.auth_seen else "nobody"

    @server.tool(annotations=read_only)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        state.calls.append(("add", {"a": a, "b": b}))
        return a + b

    @server.tool()
    def send_mail(to: str) -> str:
        """Send a mail (a side effect)."""
        state.calls.append(("send_mail", {"to": to}))
        return f"sent to {to}"

    @server.tool(annotations=read_only)
    async def slow_lookup(key: str) -> str:
        """Waits until the test releases it."""
        state.calls.append(("slow_lookup", {"key": key}))
        state.entered.set()
        while not state.release.is_set():  # noqa: ASYNC110 (a thread sets it)
            await asyncio.sleep(0.01)
        return f"value of {key}"

    @server.tool()
    async def slow_send(to: str) -> str:
        """A side effect that waits until the test releases it."""
        state.calls.append(("slow_send", {"to": to}))
        state.entered.set()
        while not state.release.is_set():  # noqa: ASYNC110 (a thread sets it)
            await asyncio.sleep(0.01)
        return f"sent to {to}"

    @server.tool()
    async def hang() -> str:
        """Never answers."""
        state.calls.append(("hang", {}))
        await asyncio.sleep(3600)
        return "never"

    @server.tool()
    def big(size: int) -> str:
        """Returns size characters."""
        return "x" * size

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails."""
        raise ToolError(f"it failed: {reason}")

    @server.tool()
    def picture() -> list[Any]:
        """An image and a caption."""
        return [types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
                types.TextContent(type="text", text="a tiny picture")]

    @server.tool()
    def lookup(key: str) -> str:
        """The tool whose schema tests change."""
        state.calls.append(("lookup", {"key": key}))
        return f"found {key}"

    return server


def change_lookup(server: MCPServer, state: State) -> None:
    """The server's ``lookup`` now takes another argument (its schema changes)."""
    server.remove_tool("lookup")

    def lookup(key: str, limit: int) -> str:
        state.calls.append(("lookup", {"key": key, "limit": limit}))
        return f"found {key}"

    server.add_tool(lookup, name="lookup", description="The tool whose schema tests change.")


def restore_lookup(server: MCPServer, state: State) -> None:
    """``lookup`` as it was published (its original schema)."""
    server.remove_tool("lookup")

    def lookup(key: str) -> str:
        state.calls.append(("lookup", {"key": key}))
        return f"found {key}"

    server.add_tool(lookup, name="lookup", description="The tool whose schema tests change.")


class RequireBearer:
    """ASGI middleware: 401 without ``Authorization: Bearer TOKEN``."""

    def __init__(self, app: ASGIApp, state: State) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            auth = headers.get(b"authorization", b"").decode()
            self.state.auth_seen.append(auth)
            if auth != f"Bearer {TOKEN}":
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"no"})
                return
        await self.app(scope, receive, send)


class ForgetSessions:
    """ASGI middleware: while ``state.forget`` > 0, a tools/call POST that carries an
    ``Mcp-Session-Id`` answers 404 "Session not found" (what the SDK's session manager
    answers for a session it no longer has, e.g. after a restart) without running."""

    def __init__(self, app: ASGIApp, state: State) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        if scope["type"] != "http" or scope["method"] != "POST" \
                or b"mcp-session-id" not in headers or self.state.forget <= 0:
            await self.app(scope, receive, send)
            return
        messages, body = [], b""
        while True:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if b'"tools/call"' in body and self.state.forget > 0:
            self.state.forget -= 1
            self.state.forgotten += 1
            error = (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,'
                     b'"message":"Session not found"}}')
            await send({"type": "http.response.start", "status": 404,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": error})
            return

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


@dataclass
class Running:
    url: str
    server: MCPServer
    state: State


@contextmanager
def serve(kind: str = "http", *, auth: bool = False) -> Iterator[Running]:
    """``kind``: ``http`` (Streamable HTTP at /mcp) or ``sse`` (at /sse)."""
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    state = State()
    server = build(state)
    app: ASGIApp = server.sse_app() if kind == "sse" else server.streamable_http_app()
    app = ForgetSessions(app, state)
    if auth:
        app = RequireBearer(app, state)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uv.started and time.monotonic() < deadline:
        time.sleep(0.01)
    path = "/sse" if kind == "sse" else "/mcp"
    try:
        yield Running(f"http://127.0.0.1:{port}{path}", server, state)
    finally:
        state.release.set()
        uv.should_exit = True
        thread.join(10)
        sock.close()
