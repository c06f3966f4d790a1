"""The MCP service: resources of a space (register, list, get, update, delete), tool
discovery, and the one call path every MCP tool of a run goes through.

Admins and owners manage resources; members may list and read them (nothing secret is
returned) — the same roles as ``agentloom.platform.access`` checks everywhere. A call
opens one session (``connect.open_client``), lists the tools to find the bound one and
check its schema digest against the published one, then calls it, all under the
resource's timeout; a server that answers 404 for the session's id forgot it, and the
session starts again once (the refused request never ran). The listing seen last for
each tool is recorded (only when it changes), so an engine built for a resume can see a
server that changed and refuse the run's tool catalog (``tools.McpCapability``). A tool
the client cannot call (one that requires MCP tasks) is ``unusable``: discovery says
why, publish refuses to bind it, a call refuses it before sending.

``credential_values`` opens the credentials of a version's bound resources for the run
host's redactor (``McpCapability.credentials``), so a server or model that echoes one
never puts it in a session's records, an answer or an event.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

import anyio
import mcp_types as types
from pydantic import BaseModel, ValidationError

from agentloom.mcp._wire import Wire
from agentloom.mcp.errors import McpSchemaChanged, McpToolFailure
from agentloom.mcp.policy import TOO_LARGE, McpPolicy, response_limit
from agentloom.mcp.resources import Credential, McpResource, McpResourceStore, McpSpec
from agentloom.platform.access import check_id, member_of
from agentloom.platform.domain import content_hash, new_id, now
from agentloom.platform.errors import Conflict, Invalid, NotFound, PlatformError, field_errors
from agentloom.platform.identity import Principal
from agentloom.platform.store import PlatformStore, WriteConflict
from agentloom.platform.store.items import put
from agentloom_runtime.snapshot import McpToolBinding

T = TypeVar("T")
MAX_TOOLS = 500
_PAGES = 20


class McpServerFailed(PlatformError):
    """Discovery could not list the server's tools (502; no server body)."""

    status = 502
    code = "mcp_server_failed"


class _Observed(BaseModel):
    digest: str


def tool_digest(tool: types.Tool) -> str:
    """What a published binding freezes: the remote name and input schema."""
    return content_hash({"name": tool.name, "input_schema": tool.input_schema})


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` from synchronous code, also when this thread has a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _leaf(exc: BaseException) -> BaseException:
    """The first error of ours (or the first at all) inside anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        ours = [e for e in exc.exceptions if isinstance(e, McpToolFailure | McpSchemaChanged)]
        exc = ours[0] if ours else exc.exceptions[0]
    return exc


def _failure(exc: BaseException, spec: McpSpec, wire: Wire,
             credential: Credential | None) -> BaseException:
    leaf = _leaf(exc)
    if isinstance(leaf, McpToolFailure | McpSchemaChanged):
        return leaf
    if wire.over is not None:
        return McpToolFailure("mcp_result_too_large", f"{TOO_LARGE} "
                              f"{response_limit(spec)} bytes; the call may have taken "
                              "effect (raise max_result_chars or page the tool's output)")
    if wire.refused is not None:
        return _refused(wire.refused, credential)
    if wire.session_lost:
        return McpToolFailure("mcp_session_lost", "the MCP server answered 404 for the "
                              "session of this call again after a new session was "
                              "started; the call was not run")
    if isinstance(leaf, TimeoutError):
        return McpToolFailure("mcp_timeout", f"the MCP server did not answer within "
                              f"{spec.timeout_seconds:g} seconds; the call may or may not "
                              "have taken effect")
    from mcp.shared.exceptions import MCPError  # the SDK is loaded by the call itself

    if isinstance(leaf, MCPError):
        return McpToolFailure("mcp_protocol_error", f"the MCP server refused the request: "
                              f"{str(leaf.error.message)[:300]}")
    if isinstance(leaf, ValidationError):
        return McpToolFailure("mcp_protocol_error", "the MCP server's answer is not valid "
                              "MCP")
    return McpToolFailure("mcp_unreachable", f"cannot reach the MCP server "
                          f"({type(leaf).__name__})")


def _refused(status: int, credential: Credential | None) -> McpToolFailure:
    if credential is None:
        message = (f"the MCP server requires a credential (HTTP {status}) and this "
                   "resource has none: set the resource's credential")
    else:
        message = (f"the MCP server refused the resource's {credential.kind} credential "
                   f"(HTTP {status}): it is invalid, expired or lacks access; give the "
                   "resource a new credential")
    return McpToolFailure("mcp_credential_refused", message, details={"status": status})


def unusable(tool: types.Tool) -> str | None:
    """Why a listed tool cannot be called here, or None: a tool that requires MCP
    tasks (``execution.taskSupport: required``) must be called as a task, which this
    client does not do."""
    execution = tool.execution
    if execution is not None and execution.task_support == "required":
        return ("the tool requires MCP tasks (execution.taskSupport = required), which "
                "AgentLoom does not support; it cannot be bound")
    return None


class McpService:
    def __init__(self, store: PlatformStore, secrets: Any,
                 policy: McpPolicy | None = None) -> None:
        self.platform = store
        self.resources = McpResourceStore(store)
        self.secrets = secrets  # agentloom.platform.admin.SecretSealer
        self.policy = policy or McpPolicy()

    # -- resources (API) ---------------------------------------------------------------

    def create(self, who: Principal, space_id: str, name: str, spec: Mapping[str, Any],
               credential: Mapping[str, Any] | None = None) -> McpResource:
        member_of(self.platform, who, space_id, "admin")
        resource_id = new_id("mcp")
        checked = self._spec(spec)
        at = now()
        resource = McpResource(space_id=space_id, resource_id=resource_id,
                               name=_name(name), spec=checked, revision=1,
                               created_by=who.user_id, created_at=at, updated_at=at,
                               **self._sealed(space_id, resource_id, checked, credential))
        self.resources.create(resource)
        return resource

    def list_resources(self, who: Principal, space_id: str) -> list[McpResource]:
        member_of(self.platform, who, space_id)
        return self.resources.list(space_id)

    def get(self, who: Principal, space_id: str, resource_id: str) -> McpResource:
        member_of(self.platform, who, space_id)
        return self._find(space_id, resource_id)[0]

    def update(self, who: Principal, space_id: str, resource_id: str, *, revision: int,
               name: str | None = None, spec: Mapping[str, Any] | None = None,
               credential: Mapping[str, Any] | None = None,
               clear_credential: bool = False) -> McpResource:
        """Replace name/spec; a new ``credential`` replaces the stored one (write-only),
        ``clear_credential`` removes it, neither keeps it."""
        member_of(self.platform, who, space_id, "admin")
        current, version = self._find(space_id, resource_id)
        if revision != current.revision:
            raise Conflict(f"the MCP resource is at revision {current.revision}, not "
                           f"{revision}; reload it", code="mcp_resource_changed",
                           details={"revision": current.revision})
        checked = self._spec(spec) if spec is not None else current.spec
        sealed: dict[str, Any] = {k: getattr(current, k) for k in (
            "sealed_credential", "credential_kind", "credential_name")}
        if clear_credential:
            sealed = {"sealed_credential": None, "credential_kind": None,
                      "credential_name": None}
        if credential is not None:
            sealed = self._sealed(space_id, resource_id, checked, credential)
        elif sealed["credential_kind"] is not None and \
                (sealed["credential_kind"] == "env") != (checked.transport == "stdio"):
            raise field_errors([{"loc": ("credential",), "msg": "the stored credential "
                                 "does not fit the new transport; give a new one"}])
        new = current.model_copy(update={"name": _name(name) if name is not None
                                         else current.name, "spec": checked,
                                         "revision": current.revision + 1,
                                         "updated_at": now(), **sealed})
        try:
            self.resources.replace(new, version)
        except WriteConflict:
            raise Conflict("the MCP resource was changed meanwhile; reload it",
                           code="mcp_resource_changed") from None
        return new

    def delete(self, who: Principal, space_id: str, resource_id: str) -> None:
        """Published versions keep their bindings; their calls then fail clearly."""
        member_of(self.platform, who, space_id, "admin")
        _, version = self._find(space_id, resource_id)
        try:
            self.resources.delete(space_id, resource_id, version)
        except WriteConflict:
            raise Conflict("the MCP resource was changed meanwhile; reload it",
                           code="mcp_resource_changed") from None

    def discover(self, who: Principal, space_id: str, resource_id: str) -> list[types.Tool]:
        member_of(self.platform, who, space_id, "admin")
        resource, _ = self._find(space_id, resource_id)
        return run_sync(self.list_tools(resource))

    # -- internals used by publish and runs ----------------------------------------------

    def resource(self, space_id: str, resource_id: str) -> McpResource | None:
        found = self.resources.get(space_id, resource_id)
        return None if found is None else found.value

    def credential(self, resource: McpResource) -> Credential | None:
        if resource.sealed_credential is None:
            return None
        value = self.secrets.open(resource.space_id, resource.resource_id,
                                  resource.sealed_credential)
        return Credential(kind=resource.credential_kind or "bearer",  # type: ignore[arg-type]
                          name=resource.credential_name, value=value)

    def credential_values(self, space_id: str, resource_ids: Iterable[str]) -> list[str]:
        """The credential values of these resources (a deleted one or one without a
        credential adds nothing; one that cannot be opened here neither: its calls
        fail before anything is sent)."""
        values = []
        for resource_id in dict.fromkeys(resource_ids):
            resource = self.resource(space_id, resource_id)
            try:
                credential = None if resource is None else self.credential(resource)
            except Exception:  # the call reports it (mcp_unreachable), nothing to redact
                credential = None
            if credential is not None:
                values.append(credential.value)
        return values

    async def list_tools(self, resource: McpResource) -> list[types.Tool]:
        """Every tool the server lists (pages followed, at most ``MAX_TOOLS``)."""
        try:
            tools = await self._session(resource, _all_tools)
        except McpToolFailure as failure:
            raise McpServerFailed(f"listing the tools of MCP resource {resource.resource_id}"
                                  f" failed: {failure}", details={"reason": failure.code}
                                  ) from None
        self._observe(resource, tools)
        return tools

    async def call(self, space_id: str, binding: McpToolBinding,
                   arguments: dict[str, Any]) -> Any:
        from agentloom.mcp.results import tool_value

        resource = self.resource(space_id, binding.resource_id)
        if resource is None:
            raise McpToolFailure("mcp_resource_missing", f"MCP resource "
                                 f"{binding.resource_id} no longer exists in this space")
        spec = resource.spec

        async def work(client: Any) -> Any:
            tool = await _find_tool(client, binding.tool)
            self._check(resource, binding, tool)
            return await client.call_tool(binding.tool, arguments,
                                          read_timeout_seconds=spec.timeout_seconds)

        result = await self._session(resource, work)
        return tool_value(result, max_chars=spec.max_result_chars)

    async def _session(self, resource: McpResource,
                       work: Callable[[Any], Awaitable[T]]) -> T:
        """``work`` in one session, under the resource's timeout. A server that
        answers 404 for the session's id has forgotten it (restarted, expired): the
        request it refused never ran, so a new session is started and ``work`` runs
        again, once (the spec's rule). Failures become ``McpToolFailure``."""
        spec = resource.spec
        wire, credential = Wire(response_limit(spec)), None
        try:
            credential = self.credential(resource)
            with anyio.fail_after(spec.timeout_seconds):
                from agentloom.mcp.connect import open_client  # the SDK: on first use

                for attempt in (1, 2):
                    wire = Wire(response_limit(spec))
                    try:
                        async with open_client(spec, credential, self.policy,
                                               wire) as client:
                            return await work(client)
                    except Exception:
                        if not (wire.session_lost and attempt == 1):
                            raise
            raise AssertionError("unreachable")  # pragma: no cover
        except Exception as exc:
            raise _failure(exc, spec, wire, credential) from None

    def drifted(self, space_id: str, bindings: tuple[McpToolBinding, ...]) -> set[str]:
        """Aliases whose tool was last seen with another schema than it was published
        with (one query per resource)."""
        seen: dict[str, dict[str, str]] = {}
        out: set[str] = set()
        for b in bindings:
            if b.resource_id not in seen:
                seen[b.resource_id] = {
                    s.sk.split("#", 2)[2]: _Observed.model_validate_json(s.text).digest
                    for s in self.platform.items.query_raw(f"space#{space_id}",
                                                           f"mcpseen#{b.resource_id}#")}
            last = seen[b.resource_id].get(b.tool)
            if last is not None and last != b.schema_digest:
                out.add(b.alias or b.tool)
        return out

    def _check(self, resource: McpResource, binding: McpToolBinding,
               tool: types.Tool | None) -> None:
        if tool is None:
            raise McpToolFailure("mcp_tool_missing", f"the MCP server of resource "
                                 f"{resource.resource_id} no longer lists tool "
                                 f"{binding.tool!r}")
        self._observe(resource, [tool])
        reason = unusable(tool)
        if reason is not None:
            raise McpToolFailure("mcp_tool_unsupported", f"tool {binding.tool!r}: {reason}")
        if tool_digest(tool) != binding.schema_digest:
            raise McpSchemaChanged(
                f"MCP tool {binding.tool!r} of resource {resource.resource_id} changed its "
                "input schema since this agent version was published; the call was not "
                "sent. Publish the agent again (it pins the new schema) and ask in a new "
                "run; or restore the server's schema, list the resource's tools again "
                f"(POST /api/v1/spaces/{resource.space_id}/mcp/resources/"
                f"{resource.resource_id}/discover), resume, and resolve the refused call "
                "with `agentloom resolve RUN --run-again`.",
                details={"resource_id": resource.resource_id, "tool": binding.tool,
                         "published": binding.schema_digest[:16],
                         "listed": tool_digest(tool)[:16]})

    def _observe(self, resource: McpResource, tools: list[types.Tool]) -> None:
        pk = f"space#{resource.space_id}"
        for tool in tools:
            sk = f"mcpseen#{resource.resource_id}#{tool.name}"
            current = tool_digest(tool)
            found = self.platform.items.get(pk, sk, _Observed)
            if found is None or found.value.digest != current:
                self.platform.items.transact([put(pk, sk, _Observed(digest=current))])

    def _find(self, space_id: str, resource_id: str) -> tuple[McpResource, int]:
        check_id(resource_id, "mcp", "mcp_resource")
        found = self.resources.get(space_id, resource_id)
        if found is None:
            raise NotFound(f"MCP resource {resource_id} not found",
                           code="mcp_resource_not_found")
        return found.value, found.version

    def _spec(self, spec: Mapping[str, Any]) -> McpSpec:
        try:
            checked = McpSpec.model_validate(spec)
        except ValidationError as err:
            raise field_errors([dict(e) for e in err.errors()], prefix="spec") from None
        if checked.transport == "stdio" and self.policy.sandbox is None:
            raise Invalid("this deployment runs no stdio MCP servers (no command sandbox)",
                          code="mcp_stdio_unavailable")
        return checked

    def _sealed(self, space_id: str, resource_id: str, spec: McpSpec,
                credential: Mapping[str, Any] | None) -> dict[str, Any]:
        if credential is None:
            return {}
        try:
            checked = Credential.model_validate(credential)
        except ValidationError as err:
            raise field_errors([dict(e) for e in err.errors()], prefix="credential") from None
        if (checked.kind == "env") != (spec.transport == "stdio"):
            raise field_errors([{"loc": ("credential", "kind"), "msg": "env credentials are "
                                 "for stdio resources; bearer/header for HTTP ones"}])
        if self.secrets is None:
            raise Invalid("this deployment cannot store credentials (no key)",
                          code="secrets_unavailable")
        return {"sealed_credential": self.secrets.seal(space_id, resource_id, checked.value),
                "credential_kind": checked.kind, "credential_name": checked.name}


def _name(name: str) -> str:
    name = name.strip()
    if not 1 <= len(name) <= 100:
        raise field_errors([{"loc": ("name",), "msg": "1 to 100 characters"}])
    return name


async def _all_tools(client: Any) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None or len(tools) >= MAX_TOOLS:
            break
    return tools[:MAX_TOOLS]


async def _find_tool(client: Any, name: str) -> types.Tool | None:
    cursor: str | None = None
    for _ in range(_PAGES):
        page = await client.list_tools(cursor=cursor)
        for tool in page.tools:
            if tool.name == name:
                return tool  # type: ignore[no-any-return]
        cursor = page.next_cursor
        if cursor is None:
            return None
    return None
