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
