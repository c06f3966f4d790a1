"""AgentLoom as an MCP server (``agentloom.api.mcp_server``): each agent, and each
space's published agents, as a stateless MCP server on Streamable HTTP. Prefix
``/api/v1``:

    POST   /spaces/{s}/agents/{a}/mcp   member   one agent: ask, run_status, resume_run,
                                                 resolve_run, cancel_run
    POST   /spaces/{s}/mcp              member   the same, ask taking agent_id

Both pass the gate like every route (bearer token on ``serve``, the JWT authorizer in
AWS: no token is 401 before any MCP handling), then the space's membership (404 to
anyone else) and, in the tools, the session's creator. A body that is not one JSON-RPC
message is 422. The answer is JSON (``application/json``), or Server-Sent Events when
``serve`` streams it (progress notifications); ``GET`` is 405 (no standalone stream:
the server is stateless). docs/interop.md maps the tools onto sessions, runs and events.
The facade (``mcp_server.protocol``, ``mcp_server.tools``) loads with the first MCP
request, not on a Lambda's cold start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response, content_types

from agentloom.api.mcp_server.messages import McpMessageIn, McpReplyOut
from agentloom.api.models import ErrorOut
from agentloom.api.routing import ALWAYS, ERROR_NAMES, WITH_BODY

if TYPE_CHECKING:
    from agentloom.api._resolver import ApiResolver
    from agentloom.api.mcp_server.tools import Scope
    from agentloom.platform.admin import AdminService
    from agentloom.platform.sessions import SessionService

P = "/api/v1"
TAG = ["mcp-server"]
SERVER_VERSION = "1.0.0"


def _responses() -> dict[int, Any]:
    """200 a JSON-RPC response (or its event stream on ``serve``), 202 a notification
    taken; 400/404 the API's error body or, from the MCP layer, a JSON-RPC error."""
    either = {"application/json": {"schema": {"anyOf": [
        {"$ref": "#/components/schemas/ErrorOut"},
        {"$ref": "#/components/schemas/McpReplyOut"}]}}}
    out: dict[int, Any] = {
        200: {"description": "A JSON-RPC response (result or error); on agentloom serve, "
              "with Accept: text/event-stream and a progressToken, an event stream of "
              "notifications/progress ending with the response",
              "content": {"application/json": {"model": McpReplyOut},
                          "text/event-stream": {"schema": {"type": "string"}}}},
        202: {"description": "A notification, taken (no body)", "content": {}},
        400: {"description": ERROR_NAMES[400] + "; or a JSON-RPC error (an unserved "
              "protocol version, headers that do not match the body)", "content": either},
        404: {"description": ERROR_NAMES[404] + "; or a JSON-RPC error (an unknown "
              "method, 2026-07-28)", "content": either}}
    for code in sorted({*ALWAYS, *WITH_BODY} - {400}):
        out[code] = {"description": ERROR_NAMES[code],
                     "content": {"application/json": {"model": ErrorOut}}}
    return out


def register(app: ApiResolver, admin: AdminService, sessions: SessionService) -> None:
    responses = _responses()

    @app.post(f"{P}/spaces/<space_id>/agents/<agent_id>/mcp", tags=TAG,
              responses=responses, summary="An agent as an MCP server (Streamable HTTP)")
    def agent_mcp(space_id: str, agent_id: str, body: McpMessageIn) -> Response[Any]:
        from agentloom.api.mcp_server.tools import Scope

        agent = admin.agent(app.principal(), space_id, agent_id)
        return _answer(app, sessions, Scope(space_id, agent, (agent,)), body,
                       f"agentloom {agent.name}",
                       f"Ask {agent.name}, an AgentLoom agent, questions (ask); follow, "
                       "resume, resolve or cancel its runs.")

    @app.post(f"{P}/spaces/<space_id>/mcp", tags=TAG, responses=responses,
              summary="A space's published agents as an MCP server (Streamable HTTP)")
    def space_mcp(space_id: str, body: McpMessageIn) -> Response[Any]:
        from agentloom.api.mcp_server.tools import Scope

        agents = tuple(a for a in admin.agents(app.principal(), space_id)
                       if a.latest_version)
        return _answer(app, sessions, Scope(space_id, None, agents), body,
                       f"agentloom space {space_id}",
                       "Ask this space's AgentLoom agents questions (ask, with agent_id); "
                       "follow, resume, resolve or cancel their runs.")


def _answer(app: ApiResolver, sessions: SessionService, scope: Scope,
            body: McpMessageIn, name: str, instructions: str) -> Response[Any]:
    from agentloom.api.mcp_server.protocol import McpEndpoint, ServerInfo
    from agentloom.api.mcp_server.tools import Toolbox

    endpoint = McpEndpoint(Toolbox(sessions, app.principal(), scope),
                           ServerInfo(name[:120], SERVER_VERSION, instructions))
    headers = {str(k).lower(): str(v) for k, v in (app.current_event.headers or {}).items()}
    stream = app.reply_stream()
    reply = endpoint.handle(body, headers, stream.send if stream is not None else None)
    if reply.body is None:
        return Response(status_code=reply.status, body="", headers=reply.headers)
    return Response(status_code=reply.status, content_type=content_types.APPLICATION_JSON,
                    body=reply.body, headers=reply.headers)
