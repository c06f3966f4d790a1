"""MCP tools (docs/mcp.md): MCP servers registered as resources of a space,
their tools discovered, pinned into an agent version at publish and called by runs.

::

    resources.py  McpSpec / Credential / McpResource and their store (platform store items)
    connect.py    one client session per call: Streamable HTTP (2025-11-25 or the
                  stateless 2026-07-28 core), legacy SSE, stdio in the bubblewrap sandbox;
                  the SSRF guard
    _http.py      the pinned, capped HTTP transport; legacy SSE with the resource's cap
    _wire.py      Wire: what one session's HTTP layer saw (too large, 401, lost session)
    _stdio.py     a stdio server in the sandbox under the resource's limits; its exit
    results.py    CallToolResult -> the tool's JSON value (content types, caps, isError)
    service.py    McpService: resources CRUD, discovery, the call path (a lost session
                  retried once), schema checks, unusable tools, credentials to redact
    tools.py      McpCapability: pin at publish, ToolDefinitions for a run
    errors.py     McpToolFailure (a failure result), McpSchemaChanged (blocks the run)

The package is ``agentloom.mcp``; the SDK is the top-level ``mcp`` (absolute imports).
Wire it with ``mcp_capability(platform_store, secrets, policy)`` or, embedded,
``embedded_capability(home)``.
"""

from __future__ import annotations

from pathlib import Path

from agentloom.mcp.errors import McpSchemaChanged, McpToolFailure
from agentloom.mcp.policy import McpPolicy
from agentloom.mcp.resources import Credential, McpResource, McpResourceStore, McpSpec
from agentloom.mcp.service import McpServerFailed, McpService
from agentloom.mcp.tools import McpCapability
from agentloom.platform.store import PlatformStore

__all__ = ["Credential", "McpCapability", "McpPolicy", "McpResource", "McpResourceStore",
           "McpSchemaChanged", "McpServerFailed", "McpService", "McpSpec", "McpToolFailure",
           "embedded_capability", "mcp_capability"]


def mcp_capability(store: PlatformStore, secrets: object,
                   policy: McpPolicy | None = None) -> McpCapability:
    return McpCapability(McpService(store, secrets, policy))


def embedded_capability(home: Path, policy: McpPolicy | None = None) -> McpCapability:
    """The capability on the embedded platform's SQLite file and key file under
    ``home`` (its own connection to the same database)."""
    from agentloom.crypto import LocalKeyring
    from agentloom.platform.secrets import CodecSecrets
    from agentloom.platform.store.sqlite import embedded_items
    from agentloom.stores.layout import KEY_FILE

    store = PlatformStore(embedded_items(home))  # owner-only, bodies sealed
    return mcp_capability(store, CodecSecrets(LocalKeyring(home / KEY_FILE), store), policy)
