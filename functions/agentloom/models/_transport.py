"""An httpx transport that connects only to addresses checked beforehand.

The host name is resolved and checked once (``_addresses.py``); this transport then
sends each request to one of those IP addresses with the original ``Host`` header and
the original name as TLS SNI and for certificate verification (httpcore's
``sni_hostname`` extension). Nothing resolves the name again, so a DNS answer that
changes between the check and the connection (DNS rebinding) cannot redirect it. A
request for any other host is refused before it is sent.

Addresses are tried in order while the connection cannot even be opened (safe: nothing
was sent); any other failure is final.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import httpx


class PinnedTransport(httpx.AsyncBaseTransport):
    def __init__(self, pins: Mapping[str, Sequence[str]],
                 inner: httpx.AsyncBaseTransport | None = None) -> None:
        self._pins = {host.lower(): tuple(addresses) for host, addresses in pins.items()}
        self._inner = inner if inner is not None else httpx.AsyncHTTPTransport(
            trust_env=False, retries=0)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host.lower()
        addresses = self._pins.get(host)
        if not addresses:
            raise httpx.ConnectError("this host was not checked", request=request)
        failure: httpx.TransportError | None = None
        for address in addresses:
            pinned = httpx.Request(
                request.method, request.url.copy_with(host=address), headers=request.headers,
                stream=request.stream, extensions={**request.extensions, "sni_hostname": host})
            try:
                return await self._inner.handle_async_request(pinned)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass(frozen=True)
class Fetched:
    """What a guarded request got: the body, or why not — ``status`` (a non-2xx answer,
    ``status_code`` set: its body is never read, so it cannot be echoed), ``too_large``,
    ``connect``, ``timeout`` or ``disconnected``."""

    body: bytes = b""
    failure: str = ""
    status_code: int | None = None


async def fetch_pinned(method: str, target: httpx.URL, addresses: Sequence[str], *,
                       headers: Mapping[str, str], limit: int, io_timeout: float,
                       content: bytes | None = None,
                       inner: httpx.AsyncBaseTransport | None = None) -> Fetched:
    """One request to a checked host over ``PinnedTransport``: no proxy environment, no
    redirects followed, the body capped at ``limit`` bytes while it streams; ``io_timeout``
    is httpx's per-operation timeout (callers put an overall deadline around it)."""
    transport = PinnedTransport({target.host: addresses}, inner)
    failure = ""
    async with httpx.AsyncClient(transport=transport, trust_env=False,
                                 follow_redirects=False, timeout=io_timeout) as client:
        try:
            async with client.stream(method, target, headers=dict(headers),
                                     content=content) as response:
                if not response.is_success:
                    return Fetched(failure="status", status_code=response.status_code)
                return await _capped(response, limit)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout):
            failure = "connect"
        except httpx.TimeoutException:
            failure = "timeout"
        except httpx.HTTPError:
            failure = "disconnected"
    return Fetched(failure=failure)


async def _capped(response: httpx.Response, limit: int) -> Fetched:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return Fetched(failure="too_large")
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            return Fetched(failure="too_large")
    return Fetched(body=bytes(body))
