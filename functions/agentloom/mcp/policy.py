"""What a deployment lets MCP resources reach, and the size rule of their answers —
without the MCP SDK, so wiring a host (a Lambda cold start) does not import it: the SDK
is loaded by ``connect`` when a run first calls or discovers a tool."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentloom.mcp.resources import McpSpec

TOO_LARGE = "the MCP server's response is larger than"


@dataclass(frozen=True)
class McpPolicy:
    """What this deployment lets resources reach. ``stdio_roots``: host folders a stdio
    resource may mount; stdio needs a ``sandbox`` (a ``BubblewrapRunner``)."""

    allow_loopback: bool = False
    allow_private: bool = False
    stdio_roots: tuple[str, ...] = ()
    sandbox: Any = None


def response_limit(spec: McpSpec) -> int:
    """Bytes one HTTP response may carry: room for the capped result JSON-escaped."""
    return 4 * spec.max_result_chars + (1 << 20)
