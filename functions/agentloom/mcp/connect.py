"""Opening one MCP client session for a resource (a session per call).

- ``streamable_http``: the SDK's Streamable HTTP client. ``protocol=auto`` probes
  ``server/discover`` and speaks the stateless 2026-07-28 core when offered (no
  ``initialize``, no ``Mcp-Session-Id``), else the 2025-11-25 initialize handshake;
  a pinned revision skips the probe.
- ``sse``: the legacy HTTP+SSE transport (2025-11-25 handshake).
- ``stdio``: the command runs inside the bubblewrap sandbox (``agentloom.sandbox``: no
  network, read-only root, limits, cleared environment), with a private scratch
  ``/workspace`` and the resource's ``mounts`` read-only under ``/skills/<name>``.

URLs pass the SSRF guard of ``agentloom.models._addresses`` (metadata and link-local
always refused; loopback / private only when the policy allows), and the connection is
pinned to the checked addresses (no second DNS answer is used). HTTP clients ignore
proxy variables and follow no redirects off the endpoint's origin (the SDK's rule). The
credential is set on this client only.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from agentloom.mcp.errors import McpToolFailure
from agentloom.mcp.policy import TOO_LARGE, McpPolicy, response_limit
from agentloom.mcp.resources import Credential, McpSpec
from agentloom.models._addresses import AddressPolicy, check_addresses, system_resolver
from agentloom.models.errors import AddressNotAllowed, ProviderUnreachable

_MODES = {"auto": "auto", "2025-11-25": "legacy", "2026-07-28": "2026-07-28"}
_CREDENTIAL_FILE = ".agentloom-credential"
# stdio: read the credential file, delete it, export it, exec the server (argv "$@")
_WRAP = ('IFS= read -r v < /workspace/{f}; rm -f /workspace/{f}; {name}="$v"; '
         'export {name}; exec "$@"')



class _Limited(httpx2.AsyncByteStream):
    """A response body that fails once it passes ``limit`` bytes (a hostile or broken
    server cannot make a call buffer without bound)."""

    def __init__(self, inner: Any, limit: int, tripped: list[int]) -> None:
        self.inner, self.limit, self.tripped = inner, limit, tripped

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.inner:
            seen += len(chunk)
            if seen > self.limit:
                self.tripped.append(seen)  # the SDK may report it as a closed stream
                raise httpx2.StreamError(f"{TOO_LARGE} {self.limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class _Pinned(httpx2.AsyncBaseTransport):
    """Sends each request to one of the checked addresses of its host (original Host
    header, the name as TLS SNI); any other host is refused. Each response body is
    capped at ``limit`` bytes."""

    pins: Mapping[str, Sequence[str]]
    limit: int
    tripped: list[int]
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
                response.stream = _Limited(response.stream, self.limit, self.tripped)
                return response
            except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def aclose(self) -> None:
        await self.inner.aclose()


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


def _http_client(pins: Mapping[str, Sequence[str]], headers: Mapping[str, str] | None,
                 spec: McpSpec, tripped: list[int]) -> httpx2.AsyncClient:
    timeout = spec.timeout_seconds
    return httpx2.AsyncClient(headers=dict(headers or {}),
                              transport=_Pinned(pins, response_limit(spec), tripped),
                              timeout=httpx2.Timeout(timeout), trust_env=False,
                              follow_redirects=False)


def _headers(credential: Credential | None) -> dict[str, str]:
    name = credential.header_name() if credential is not None else None
    return {name: credential.header_value()} if credential is not None and name else {}


@contextlib.asynccontextmanager
async def open_client(spec: McpSpec, credential: Credential | None, policy: McpPolicy,
                      tripped: list[int] | None = None) -> AsyncIterator[Client]:
    """An entered ``mcp.Client`` for one session; closed (and a stdio sandbox gone) on
    exit. Connection failures surface from entering it. ``tripped`` gets an entry when
    an HTTP response passed ``response_limit``."""
    tripped = [] if tripped is None else tripped
    if spec.transport == "stdio":
        async with _stdio(spec, credential, policy) as client:
            yield client
        return
    assert spec.url is not None
    pins = await checked_pins(spec.url, policy)
    headers = _headers(credential)
    if spec.transport == "sse":
        def factory(headers: dict[str, str] | None = None,
                    timeout: httpx2.Timeout | None = None,
                    auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
            return _http_client(pins, headers, spec, tripped)

        transport = sse_client(spec.url, headers=headers, timeout=spec.timeout_seconds,
                               sse_read_timeout=spec.timeout_seconds,
                               httpx_client_factory=factory)
        async with Client(transport, mode="legacy", cache=None) as client:
            yield client
        return
    async with _http_client(pins, headers, spec, tripped) as http, \
            Client(streamable_http_client(spec.url, http_client=http),
                   mode=_MODES[spec.protocol], cache=None) as client:
        yield client


def _mounts(spec: McpSpec, policy: McpPolicy) -> dict[str, str]:
    roots = [Path(os.path.realpath(r)) for r in policy.stdio_roots]
    mounts: dict[str, str] = {}
    for host_path, name in spec.mounts.items():
        real = Path(os.path.realpath(host_path))
        if not any(real == r or real.is_relative_to(r) for r in roots):
            raise McpToolFailure("mcp_sandbox_unavailable", f"mount {name!r} is not under "
                                 "a folder this deployment allows for stdio servers")
        mounts[name] = str(real)
    return mounts


def stdio_argv(spec: McpSpec, credential: Credential | None, policy: McpPolicy,
               workspace: Path) -> list[str]:
    """bwrap's argv for the server (``BubblewrapRunner.build_argv``: the same sandbox as
    ``workspace_command``), the credential read from a file in its private workspace."""
    from agentloom_runtime.workspace import CommandSpec

    assert spec.command is not None
    argv: list[str] = [spec.command, *spec.args]
    if credential is not None and credential.kind == "env":
        (workspace / _CREDENTIAL_FILE).write_text(credential.value + "\n")
        argv = ["/bin/sh", "-c", _WRAP.format(f=_CREDENTIAL_FILE, name=credential.name),
                "sh", *argv]
    command = CommandSpec(request_id=f"mcp-{secrets.token_hex(6)}", argv=tuple(argv),
                          timeout_s=spec.timeout_seconds, skills=_mounts(spec, policy))
    built: list[str] = policy.sandbox.build_argv(command, workspace, secrets.token_hex(8))
    return built


@contextlib.asynccontextmanager
async def _stdio(spec: McpSpec, credential: Credential | None,
                 policy: McpPolicy) -> AsyncIterator[Client]:
    sandbox = policy.sandbox
    if sandbox is None:
        raise McpToolFailure("mcp_sandbox_unavailable", "stdio MCP servers need the "
                             "command sandbox, which this deployment does not have")
    try:
        sandbox.ensure_available()
    except Exception as exc:  # SandboxUnavailable: never fall back to the host
        raise McpToolFailure("mcp_sandbox_unavailable", str(exc)[:300]) from None
    workspace = Path(tempfile.mkdtemp(prefix="agentloom-mcp-"))
    try:
        argv = stdio_argv(spec, credential, policy, workspace)
        params = StdioServerParameters(command=argv[0], args=argv[1:], env={})
        with open(os.devnull, "w") as errlog:  # noqa: ASYNC230 (no I/O: /dev/null)
            # the server's stderr is not ours to log
            async with Client(stdio_client(params, errlog=errlog), mode=_MODES[spec.protocol],
                              cache=None) as client:
                yield client
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
