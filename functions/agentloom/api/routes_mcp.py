"""MCP routes (``agentloom.mcp``): the space's MCP resources and their tools. Prefix
``/api/v1``:

    POST/GET          /spaces/{s}/mcp/resources                  admin / member
    GET/PUT/DELETE    /spaces/{s}/mcp/resources/{r}              member / admin / admin
    POST              /spaces/{s}/mcp/resources/{r}/discover     admin (lists the tools)

A credential (``bearer``, ``header`` or, for stdio, ``env``) is write-only: responses
say ``has_credential`` and its kind/name, never the value. ``PUT`` replaces name and spec
at the given ``revision`` (409 ``mcp_resource_changed`` if it moved on); a new
``credential`` replaces the stored one, ``clear_credential`` drops it, neither keeps it.
The service is the ``McpCapability`` the host wired (404 ``mcp_unavailable`` without:
no resource exists in a deployment without MCP tools).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from agentloom.api.routing import declare, json_response
from agentloom.platform.access import member_of
from agentloom.platform.domain import Role
from agentloom.platform.errors import NotFound

if TYPE_CHECKING:
    from agentloom.api._resolver import ApiResolver
    from agentloom.mcp import McpResource, McpService  # the SDK loads with the first call
    from agentloom.platform.admin import AdminService
    from agentloom.platform.sessions import SessionService

P = "/api/v1"
TAG = ["mcp"]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CredentialIn(_In):
    kind: StrictStr = Field(description="bearer | header | env (stdio only)")
    name: StrictStr | None = Field(default=None, max_length=64,
                                   description="The header or variable name.")
    value: StrictStr = Field(min_length=1, max_length=8_000, description="Write-only.")


class McpResourceIn(_In):
    name: StrictStr = Field(min_length=1, max_length=100)
    spec: dict[str, Any] = Field(description="transport (streamable_http | sse | stdio), "
                                 "url or command/args/mounts, protocol, timeout_seconds, "
                                 "max_result_chars, trust_annotations, alias_prefix")
    credential: CredentialIn | None = None


class McpResourceUpdate(_In):
    revision: StrictInt = Field(ge=1)
    name: StrictStr | None = Field(default=None, min_length=1, max_length=100)
    spec: dict[str, Any] | None = None
    credential: CredentialIn | None = None
    clear_credential: StrictBool = False


class McpResourceOut(BaseModel):
    space_id: str
    resource_id: str
    name: str
    spec: dict[str, Any]
    has_credential: bool
    credential_kind: str | None
    credential_name: str | None
    revision: int
    created_by: str
    created_at: float
    updated_at: float

    @classmethod
    def of(cls, r: McpResource) -> McpResourceOut:
        return cls(space_id=r.space_id, resource_id=r.resource_id, name=r.name,
                   spec=r.spec.model_dump(mode="json"),
                   has_credential=r.sealed_credential is not None,
                   credential_kind=r.credential_kind, credential_name=r.credential_name,
                   revision=r.revision, created_by=r.created_by, created_at=r.created_at,
                   updated_at=r.updated_at)


class McpResourcesOut(BaseModel):
    items: list[McpResourceOut]


class McpToolOut(BaseModel):
    name: str
    title: str | None = None
    description: str | None = None
    input_schema: dict[str, Any]
    read_only_hint: bool | None = None
    idempotent_hint: bool | None = None
    destructive_hint: bool | None = None
    schema_digest: str
    usable: bool = Field(default=True, description="False: it cannot be bound (see "
                         "unusable_reason)")
    unusable_reason: str | None = Field(default=None, description="Why the tool cannot be "
                                        "called here, e.g. it requires MCP tasks")


class McpToolsOut(BaseModel):
    items: list[McpToolOut]


def _service(app: ApiResolver, admin: AdminService, space_id: str,
             role: Role = "member") -> McpService:
    """The service, after the caller's membership and role (so a stranger gets 404 and a
    member 403 whether or not this deployment has MCP tools)."""
    member_of(admin.store, app.principal(), space_id, role)
    from agentloom.mcp import McpCapability

    capability = admin.capabilities.find(McpCapability)
    if capability is not None:
        return capability.service
    # without the capability no resource exists here: 404, not a server error
    raise NotFound("this deployment has no MCP tools", code="mcp_unavailable")


def _credential(c: CredentialIn | None) -> dict[str, Any] | None:
    return None if c is None else c.model_dump()


def _tool(tool: Any) -> McpToolOut:
    from agentloom.mcp.service import tool_digest, unusable

    hints, reason = tool.annotations, unusable(tool)
    return McpToolOut(name=tool.name, title=tool.title, description=tool.description,
                      input_schema=dict(tool.input_schema),
                      read_only_hint=hints.read_only_hint if hints else None,
                      idempotent_hint=hints.idempotent_hint if hints else None,
                      destructive_hint=hints.destructive_hint if hints else None,
                      schema_digest=tool_digest(tool), usable=reason is None,
                      unusable_reason=reason)


def register(app: ApiResolver, admin: AdminService, sessions: SessionService) -> None:
    base = f"{P}/spaces/<space_id>/mcp/resources"

    def svc(space_id: str, role: Role = "member") -> McpService:
        return _service(app, admin, space_id, role)

    @app.post(base, tags=TAG, status_code=201, responses=declare(
        403, 404, body=True, ok={201: "The new resource (its credential is never returned)"},
        model=McpResourceOut))
    def create_mcp_resource(space_id: str, body: McpResourceIn) -> Response[McpResourceOut]:
        made = svc(space_id, "admin").create(app.principal(), space_id, body.name, body.spec,
                                             _credential(body.credential))
        return json_response(201, McpResourceOut.of(made))

    @app.get(base, tags=TAG, responses=declare(404))
    def list_mcp_resources(space_id: str) -> McpResourcesOut:
        found = svc(space_id).list_resources(app.principal(), space_id)
        return McpResourcesOut(items=[McpResourceOut.of(r) for r in found])

    @app.get(f"{base}/<resource_id>", tags=TAG, responses=declare(404))
    def get_mcp_resource(space_id: str, resource_id: str) -> McpResourceOut:
        return McpResourceOut.of(svc(space_id).get(app.principal(), space_id, resource_id))

    @app.put(f"{base}/<resource_id>", tags=TAG, responses=declare(403, 404, 409, body=True))
    def update_mcp_resource(space_id: str, resource_id: str,
                            body: McpResourceUpdate) -> McpResourceOut:
        return McpResourceOut.of(svc(space_id, "admin").update(
            app.principal(), space_id, resource_id, revision=body.revision, name=body.name,
            spec=body.spec, credential=_credential(body.credential),
            clear_credential=body.clear_credential))

    @app.delete(f"{base}/<resource_id>", tags=TAG, responses=declare(
        403, 404, 409, ok={204: "Deleted"}))
    def delete_mcp_resource(space_id: str, resource_id: str) -> Response[str]:
        svc(space_id, "admin").delete(app.principal(), space_id, resource_id)
        return Response(status_code=204, body="")

    @app.post(f"{base}/<resource_id>/discover", tags=TAG, responses=declare(403, 404, 502))
    def discover_mcp_tools(space_id: str, resource_id: str) -> McpToolsOut:
        tools = svc(space_id, "admin").discover(app.principal(), space_id, resource_id)
        return McpToolsOut(items=[_tool(t) for t in tools])
