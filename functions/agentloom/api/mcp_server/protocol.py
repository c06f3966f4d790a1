"""The JSON-RPC surface of an MCP server on Streamable HTTP, stateless, for both eras:

- **2026-07-28** (the stateless core): every request is self-contained — its
  ``params._meta`` carries the protocol version and the client's capabilities, and the
  ``MCP-Protocol-Version`` / ``Mcp-Method`` / ``Mcp-Name`` headers repeat what the body
  says (a mismatch is ``-32020``, an unserved version ``-32022`` naming the served ones);
  ``server/discover`` answers what ``initialize`` answered before. Errors take the
  HTTP status the transport assigns (400, 404 for an unknown method).
- **2025-11-25** (and the handshake versions before it): ``initialize`` negotiates the
  version; no ``Mcp-Session-Id`` is issued (stateless: every request stands alone, so
  any instance — a Lambda, a thread — can answer it); later requests may carry
  ``MCP-Protocol-Version`` (an unserved one is 400). Errors are HTTP 200.

Notifications (``notifications/initialized``, ``notifications/cancelled``) are
acknowledged ``202`` and dropped: nothing here holds state for one to act on. Methods:
``initialize``, ``server/discover``, ``ping``, ``tools/list``, ``tools/call``; any other
is ``-32601``. A request's ``_meta.progressToken`` asks for ``notifications/progress``,
sent on the request's own response stream when it streams (``agentloom serve``).

Errors, under the runtime's single root::

    AgentLoomError (agentloom_runtime)
    ├── RpcError      a JSON-RPC error answer (its rpc_code, HTTP status by era)
    └── UnknownTool   (tools) a tools/call of no such tool → RpcError -32602
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentloom.api.mcp_server.messages import McpMessageIn
from agentloom.api.mcp_server.reports import progress_message
from agentloom.api.mcp_server.tools import Progress, Toolbox, UnknownTool
from agentloom.platform.views import EventItem
from agentloom_runtime.errors import AgentLoomError

MODERN_VERSIONS = ("2026-07-28",)
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[-1]
DEFAULT_HANDSHAKE = "2025-03-26"  # a request without the header (the transport's rule)
VERSION_HEADER, METHOD_HEADER, NAME_HEADER = "mcp-protocol-version", "mcp-method", "mcp-name"
# the reserved ``_meta`` keys of 2026-07-28 (mcp_types' names; tests/platform checks them)
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32600, -32601, -32602
HEADER_MISMATCH, UNSUPPORTED_VERSION = -32020, -32022
_MODERN_STATUS = {INVALID_REQUEST: 400, INVALID_PARAMS: 400, HEADER_MISMATCH: 400,
                  UNSUPPORTED_VERSION: 400, METHOD_NOT_FOUND: 404}


class RpcError(AgentLoomError):
    """A JSON-RPC error answer (``rpc_code``, ``data``); it never leaves ``McpEndpoint``."""

    code = "mcp_rpc_error"

    def __init__(self, rpc_code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.rpc_code, self.data = rpc_code, data


@dataclass(frozen=True)
class Reply:
    """What the route answers: ``body`` None is ``202`` with no body."""

    status: int
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)


Send = Callable[[Mapping[str, Any]], bool]  # one message on the response stream


@dataclass(frozen=True)
class ServerInfo:
    name: str
    version: str
    instructions: str


class McpEndpoint:
    """One MCP server (an agent's or a space's) answering one POSTed message."""

    def __init__(self, tools: Toolbox, info: ServerInfo) -> None:
        self.tools, self.info = tools, info

    def handle(self, message: McpMessageIn, headers: Mapping[str, str],
               send: Send | None) -> Reply:
        version = headers.get(VERSION_HEADER)
        modern = version in MODERN_VERSIONS or message.method == "server/discover"
        if "id" not in message.model_fields_set:  # a notification
            if version is not None and version not in (*MODERN_VERSIONS, *HANDSHAKE_VERSIONS):
                return _error_reply(None, _unsupported(version), modern=True)
            return Reply(202)
        try:
            if modern:
                _modern_ladder(message, headers)
            elif version is not None and version not in HANDSHAKE_VERSIONS:
                raise _unsupported(version)
            result = self._dispatch(message, modern, send)
        except RpcError as err:
            return _error_reply(message.id, err, modern=modern)
        if modern:
            result.setdefault("resultType", "complete")
        return Reply(200, {"jsonrpc": "2.0", "id": message.id, "result": result})

    def _dispatch(self, message: McpMessageIn, modern: bool,
                  send: Send | None) -> dict[str, Any]:
        params = message.params or {}
        method = message.method
        if method == "initialize" and not modern:
            return self._initialize(params)
        if method == "server/discover" and modern:
            return {"supportedVersions": list(MODERN_VERSIONS),
                    "capabilities": _CAPABILITIES, "instructions": self.info.instructions,
                    "ttlMs": 0, "cacheScope": "private",
                    "_meta": {META_SERVER_INFO: self._server_info()}}
        if method == "ping":
            return {}
        if method == "tools/list":
            listed: dict[str, Any] = {"tools": self.tools.descriptors()}
            if modern:
                listed.update(ttlMs=0, cacheScope="private")  # per caller: private
            return listed
        if method == "tools/call":
            return self._call_tool(message.id, params, send)
        raise RpcError(METHOD_NOT_FOUND, f"method not found: {method[:80]}")

    def _initialize(self, params: Mapping[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        chosen = asked if isinstance(asked, str) and asked in HANDSHAKE_VERSIONS \
            else LATEST_HANDSHAKE
        return {"protocolVersion": chosen, "capabilities": _CAPABILITIES,
                "serverInfo": self._server_info(), "instructions": self.info.instructions}

    def _server_info(self) -> dict[str, str]:
        return {"name": self.info.name, "version": self.info.version}

    def _call_tool(self, request_id: str | int | None, params: Mapping[str, Any],
                   send: Send | None) -> dict[str, Any]:
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, "tools/call: params.name must be a string")
        if arguments is not None and not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "tools/call: params.arguments must be an object")
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        progress = _progress(token, send) if send is not None and \
            isinstance(token, str | int) and not isinstance(token, bool) else None
        try:
            return self.tools.call(name, arguments or {}, progress)
        except UnknownTool:
            raise RpcError(INVALID_PARAMS, f"unknown tool: {name[:80]}") from None


_CAPABILITIES: dict[str, Any] = {"tools": {"listChanged": False}}


def _progress(token: str | int, send: Send) -> Progress:
    def report(item: EventItem) -> bool:
        return send({"jsonrpc": "2.0", "method": "notifications/progress",
                     "params": {"progressToken": token, "progress": item.seq,
                                "message": progress_message(item)}})

    return report


def _modern_ladder(message: McpMessageIn, headers: Mapping[str, str]) -> None:
    """The 2026-07-28 envelope checks, first failure wins: ``_meta`` carries the version
    and the client's capabilities; the headers match the body; the version is served."""
    params = message.params or {}
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise RpcError(INVALID_PARAMS, f"params._meta must be an object carrying "
                       f"{META_VERSION!r} and {META_CAPABILITIES!r}")
    missing = [key for key in (META_VERSION, META_CAPABILITIES) if key not in meta]
    if missing:
        raise RpcError(INVALID_PARAMS, "params._meta is missing the required envelope "
                       f"key(s): {', '.join(missing)}")
    version = meta[META_VERSION]
    if headers.get(VERSION_HEADER) != version:
        raise RpcError(HEADER_MISMATCH, f"the {VERSION_HEADER} header does not match the "
                       "request envelope's protocol version")
    if headers.get(METHOD_HEADER) != message.method:
        raise RpcError(HEADER_MISMATCH, f"the {METHOD_HEADER} header does not match the "
                       "request body's method")
    name = params.get("name")
    if message.method == "tools/call" and isinstance(name, str) and \
            _header_value(headers.get(NAME_HEADER)) != name:
        raise RpcError(HEADER_MISMATCH, f"the {NAME_HEADER} header does not match the "
                       "request body's name")
    if not isinstance(version, str) or version not in MODERN_VERSIONS:
        raise _unsupported(str(version)[:40])


def _header_value(value: str | None) -> str | None:
    """A header value, decoded when it is the ``=?base64?…?=`` form (a value that is
    not plain ASCII); a malformed one matches nothing."""
    if value is None or not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    try:
        return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _unsupported(version: str) -> RpcError:
    return RpcError(UNSUPPORTED_VERSION, "Unsupported protocol version",
                    {"supported": [*MODERN_VERSIONS, *HANDSHAKE_VERSIONS],
                     "requested": version[:40]})


def _error_reply(request_id: str | int | None, err: RpcError, *, modern: bool) -> Reply:
    error: dict[str, Any] = {"code": err.rpc_code, "message": err.message}
    if err.data is not None:
        error["data"] = err.data
    status = _MODERN_STATUS.get(err.rpc_code, 200) if modern else \
        400 if err.rpc_code == UNSUPPORTED_VERSION else 200
    return Reply(status, {"jsonrpc": "2.0", "id": request_id, "error": error})
