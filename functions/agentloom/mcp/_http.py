"""The HTTP layer of one MCP session: the pinned, capped transport, what it saw
(``Wire``), and the legacy HTTP+SSE transport with our event-size cap.

- ``Pinned`` sends each request to one of the checked addresses of its host (original
  Host header, the name as TLS SNI); any other host is refused. Every response body is
  capped at the resource's ``response_limit`` while it streams.
- ``Wire`` (``_wire``) records what the SDK may report only as a closed stream: a body
  over the cap, a 401/403 (the credential was refused), a 404 to a POST that carried an
  ``Mcp-Session-Id`` (the server forgot the session: that request never ran).
- ``legacy_sse`` is the SDK's ``sse_client`` with one change: the size of one
  server-sent event is bounded by the resource's cap, not the SDK's fixed 1 MiB (which
  made every result over 1 MiB fail with ``SSEError``). A failed message POST ends the
  session with its error instead of leaving the request to time out.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import anyio
import httpx2
import mcp_types as types
from mcp.client._transport import TransportStreams

# the SDK's redirect rule (stay on the endpoint's origin), shared with its transports
from mcp.shared._httpx_utils import request_within_origin, sse_within_origin
from mcp.shared.message import SessionMessage

from agentloom.mcp._wire import Wire
from agentloom.mcp.policy import TOO_LARGE


class _Limited(httpx2.AsyncByteStream):
    """A response body that fails once it passes the wire's limit (a hostile or broken
    server cannot make a call buffer without bound)."""

    def __init__(self, inner: Any, wire: Wire) -> None:
        self.inner, self.wire = inner, wire

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.inner:
            seen += len(chunk)
            if seen > self.wire.limit:
                self.wire.over = seen  # the SDK may report it as a closed stream
                raise httpx2.StreamError(f"{TOO_LARGE} {self.wire.limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class Pinned(httpx2.AsyncBaseTransport):
    """Each request to one of its host's checked addresses; every response noted on
    the wire and its body capped."""

    pins: Mapping[str, Sequence[str]]
    wire: Wire
    inner: httpx2.AsyncBaseTransport = field(
        default_factory=lambda: httpx2.AsyncHTTPTransport(trust_env=False, retries=0))

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        host = request.url.host.lower()
        addresses = self.pins.get(host)
        if not addresses:
            raise httpx2.ConnectError("this host was not checked", request=request)
        failure: Exception | None = None
        for address in addresses:
            pinned = httpx2.Request(
                request.method, request.url.copy_with(host=address), headers=request.headers,
                stream=request.stream, extensions={**request.extensions, "sni_hostname": host})
            try:
                response = await self.inner.handle_async_request(pinned)
            except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
                failure = exc
                continue
            self.wire.saw(request.method, request.headers, response.status_code)
            response.stream = _Limited(response.stream, self.wire)
            return response
        assert failure is not None
        raise failure

    async def aclose(self) -> None:
        await self.inner.aclose()


def http_client(pins: Mapping[str, Sequence[str]], headers: Mapping[str, str] | None,
                timeout: float, wire: Wire) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers=dict(headers or {}), transport=Pinned(pins, wire),
                              timeout=httpx2.Timeout(timeout), trust_env=False,
                              follow_redirects=False)


def _same_origin(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.netloc) == (pb.scheme, pb.netloc)


@contextlib.asynccontextmanager
async def legacy_sse(url: str, client: httpx2.AsyncClient,
                     max_event_size: int) -> AsyncIterator[TransportStreams]:
    """The 2024-11-05 HTTP+SSE transport over ``client``: a GET event stream that
    names the message endpoint (on the same origin), then one POST per message."""
    async with sse_within_origin(client, url, max_event_size=max_event_size) as source:
        source.response.raise_for_status()
        reader_end, read_stream = anyio.create_memory_object_stream[
            SessionMessage | Exception](0)
        write_stream, writer_end = anyio.create_memory_object_stream[SessionMessage](0)

        async def read(task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED
                       ) -> None:
            async with reader_end:
                async for event in source:
                    if event.event == "endpoint":
                        endpoint = urljoin(url, event.data)
                        if not _same_origin(url, endpoint):
                            raise ValueError("the SSE endpoint is on another origin")
                        task_status.started(endpoint)
                    elif event.event == "message" and event.data:
                        try:
                            message = types.jsonrpc_message_adapter.validate_json(
                                event.data, by_name=False)
                        except ValueError as exc:
                            await reader_end.send(exc)
                            continue
                        await reader_end.send(SessionMessage(message))

        async def write(endpoint: str) -> None:
            async with writer_end:
                async for message in writer_end:
                    response = await request_within_origin(
                        client, "POST", endpoint, json=message.message.model_dump(
                            by_alias=True, mode="json", exclude_unset=True))
                    response.raise_for_status()

        async with read_stream, write_stream, anyio.create_task_group() as tasks:
            endpoint = await tasks.start(read)
            tasks.start_soon(write, endpoint)
            yield read_stream, write_stream
            tasks.cancel_scope.cancel()
