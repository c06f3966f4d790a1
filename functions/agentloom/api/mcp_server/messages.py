"""The two documents of the MCP routes that the resolver needs when the routes are
registered (the request body it validates, the response the OpenAPI document names);
the rest of ``agentloom.api.mcp_server`` loads with the first MCP request."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr


class McpMessageIn(BaseModel):
    """One JSON-RPC 2.0 request (with ``id``) or notification (without) — a body that
    is not one is 422 with the API's error envelope, before any MCP handling."""

    model_config = ConfigDict(extra="forbid")

    jsonrpc: StrictStr = Field(pattern=r"^2\.0$", description="Always \"2.0\".")
    id: StrictStr | StrictInt | None = Field(default=None, description="A request's id "
                                              "(absent: a notification).")
    method: StrictStr = Field(min_length=1, max_length=200)
    params: dict[str, Any] | None = None


class McpReplyOut(BaseModel):
    """A JSON-RPC 2.0 response: ``result`` or ``error`` (``code``, ``message``,
    ``data``?)."""

    model_config = ConfigDict(extra="allow")

    jsonrpc: str = "2.0"
    id: str | int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
