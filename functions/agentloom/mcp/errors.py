"""MCP errors, under the runtime's single root.

::

    ToolError (agentloom_runtime)        a failure result the model reads; the run goes on
    └── McpToolFailure                   code: mcp_tool_error (isError), mcp_timeout,
                                         mcp_unreachable, mcp_protocol_error,
                                         mcp_result_too_large, mcp_credential_refused,
                                         mcp_session_lost, mcp_server_exited,
                                         mcp_address_refused, mcp_tool_missing,
                                         mcp_tool_unsupported, mcp_resource_missing,
                                         mcp_sandbox_unavailable
    RunError (agentloom_runtime)         the run blocks with a way out
    └── McpSchemaChanged                 the server's schema differs from the published one
    PlatformError (agentloom.platform)   API answers (404 resource not found, 422, 502)

Messages never carry a server's body, a credential or tool output beyond the text the
tool itself reports as its error (which the model is meant to read) and, for a stdio
server that exited, the end of its stderr with the credential's value scrubbed.
"""

from __future__ import annotations

from typing import Any

from agentloom_runtime.errors import RunError, ToolError


class McpToolFailure(ToolError):
    code = "mcp_tool_error"

    def __init__(self, code: str, message: str, *,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)
        self.code = code


class McpSchemaChanged(RunError):
    """Raised by a call whose server lists the tool with another schema than the agent
    version was published with: the call is not sent and the run blocks."""

    code = "mcp_schema_changed"
