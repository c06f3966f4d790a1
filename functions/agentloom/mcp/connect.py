"""Opening one MCP client session for a resource (a session per call).

- ``streamable_http``: the SDK's Streamable HTTP client. ``protocol=auto`` probes
  ``server/discover`` and speaks the stateless 2026-07-28 core when offered (no
  ``initialize``, no ``Mcp-Session-Id``), else the 2025-11-25 initialize handshake;
  a pinned revision skips the probe.
- ``sse``: the legacy HTTP+SSE transport (2025-11-25 handshake; ``_http.legacy_sse``).
- ``stdio``: the command runs inside the bubblewrap sandbox (``_stdio``: no network,
  read-only root, the resource's limits, cleared environment), with a private scratch
  ``/workspace`` and the resource's ``mounts`` read-only under ``/skills/<name>``.

One server-sent event and one response body may carry ``response_limit`` bytes (the
resource's ``max_result_chars`` JSON-escaped), so a large result is cut to that cap
(``results.cap``) instead of failing at the SDK's fixed 1 MiB event limit.

URLs pass the SSRF guard of ``agentloom.models._addresses`` (metadata and link-local
always refused; loopback / private only when the policy allows), and the connection is
pinned to the checked addresses (no second DNS answer is used). HTTP clients ignore
proxy variables and follow no redirects off the endpoint's origin (the SDK's rule). The
credential is set on this client only.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agentloom.mcp._http import http_client, legacy_sse
from agentloom.mcp._stdio import MODES, stdio_session
from agentloom.mcp._wire import Wire
from agentloom.mcp.errors import McpToolFailure
from agentloom.mcp.policy import McpPolicy, response_limit
from agentloom.mcp.resources import Credential, McpSpec
from agentloom.models._addresses import AddressPolicy, check_addresses, system_resolver
from agentloom.models.errors import AddressNotAllowed, ProviderUnreachable


async def checked_pins(url: str, policy: McpPolicy) -> dict[str, list[str]]:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = check_addresses(await system_resolver(host, port), AddressPolicy(
            allow_loopback=policy.allow_loopback, allow_private=policy.allow_private))
    except AddressNotAllowed as err:
        raise McpToolFailure("mcp_address_refused", err.message.replace(
            "model discovery", "MCP"), details={"reason": err.details.get("reason")}) from None
    except ProviderUnreachable:
        raise McpToolFailure("mcp_unreachable", "the MCP server's host name did not "
                             "resolve") from None
    return {host: addresses}


def _headers(credential: Credential | None) -> dict[str, str]:
    name = credential.header_name() if credential is not None else None
    return {name: credential.header_value()} if credential is not None and name else {}


@contextlib.asynccontextmanager
async def open_client(spec: McpSpec, credential: Credential | None, policy: McpPolicy,
                      wire: Wire | None = None) -> AsyncIterator[Client]:
    """An entered ``mcp.Client`` for one session; closed (and a stdio sandbox gone) on
    exit. Connection failures surface from entering it. ``wire`` records what the HTTP
    layer saw (a response over ``response_limit``, a refused credential, a lost
    session)."""
    wire = Wire(response_limit(spec)) if wire is None else wire
    if spec.transport == "stdio":
        async with stdio_session(spec, credential, policy) as client:
            yield client
        return
    assert spec.url is not None
    pins = await checked_pins(spec.url, policy)
    async with http_client(pins, _headers(credential), spec.timeout_seconds, wire) as http:
        if spec.transport == "sse":
            transport: Any = legacy_sse(spec.url, http, max_event_size=wire.limit)
            mode = "legacy"
        else:
            transport = streamable_http_client(spec.url, http_client=http,
                                               max_sse_event_size=wire.limit)
            mode = MODES[spec.protocol]
        async with Client(transport, mode=mode, cache=None) as client:
            yield client
