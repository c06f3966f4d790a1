"""MCP tools as a ``Capability``: publish pins the chosen tools, a run gets one
``ToolDefinition`` per bound tool.

Publish (``pin``): each ``mcp_tools`` entry of the draft names a resource of the space
and a remote tool; the server is listed and the binding frozen into the version — the
tool's description and input schema, their digest, the annotation hints
(``readOnlyHint``, ``idempotentHint``) and the resource's ``trust_annotations`` flag —
with a model-visible alias (the draft's, or derived: ``[prefix_]tool`` made a valid,
unique function name). A tool the client cannot call (``service.unusable``: it requires
MCP tasks) is refused with the reason.

Run (``tools``): the definition's identity is ``tool_id = mcp:{resource}:{tool}``, its
``implementation_id`` carries the published digest, and a tool last seen with another
schema also carries that (``McpService.drifted``), so the resume check of the run's tool
catalog (``ToolRegistry.check_catalog``) refuses a run whose server changed. Recovery:
a call is side-effecting (``resume_inflight=False``: an unknown outcome blocks the run
for an operator's verdict) unless the binding trusts the server's annotations and the
tool is read-only or idempotent — then it runs again with ``uncertain=True``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from jsonschema.exceptions import SchemaError

from agentloom.capabilities import CapabilityBase, RunScope
from agentloom.mcp.resources import MAX_TIMEOUT
from agentloom.mcp.service import (
    McpServerFailed,
    McpService,
    run_sync,
    tool_digest,
    unusable,
)
from agentloom.platform.errors import field_errors
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.snapshot import AgentSnapshot, McpToolBinding
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition
from agentloom_runtime.tools.registry import checked_validator

IMPLEMENTATION = "mcp/v1"
# names other parts of the platform register in a run (skills, knowledge, delegation)
RESERVED = frozenset({"skill_load", "skill_read", "knowledge_search", "delegate_task",
                      "update_plan", "read_result"})
_BAD = re.compile(r"[^A-Za-z0-9_-]+")


def derive_alias(prefix: str | None, tool: str, taken: set[str]) -> str:
    base = _BAD.sub("_", f"{prefix}_{tool}" if prefix else tool).strip("_-") or "tool"
    if not base[0].isalpha() or base.startswith("workspace"):  # built-in names' prefix
        base = f"mcp_{base}"
    base = base[:60]
    alias, n = base, 2
    while alias in taken or alias in RESERVED:
        alias, n = f"{base}_{n}", n + 1
    return alias


class McpCapability(CapabilityBase):
    kind = "mcp"

    def __init__(self, service: McpService) -> None:
        self.service = service

    # -- publish -------------------------------------------------------------------------

    def pin(self, space_id: str, config: Mapping[str, Any]) -> dict[str, Any]:
        raw = config.get("mcp_tools") or []
        if not raw:
            return dict(config)
        bindings = [McpToolBinding.model_validate(b) for b in raw]
        listed: dict[str, dict[str, types.Tool]] = {}
        taken = {b.alias for b in bindings if b.alias}
        seen: set[tuple[str, str]] = set()
        for index, binding in enumerate(bindings):
            key = (binding.resource_id, binding.tool)
            if key in seen:  # one tool_id per remote tool
                raise _field(index, "tool", f"tool {binding.tool!r} of "
                             f"{binding.resource_id} is bound twice")
            seen.add(key)
            if binding.alias in RESERVED:
                raise _field(index, "alias", f"{binding.alias!r} is a tool name the "
                             "platform registers itself; choose another alias")
        pinned = []
        for index, binding in enumerate(bindings):
            tools = self._listed(space_id, binding, index, listed)
            tool = tools.get(binding.tool)
            if tool is None:
                names = ", ".join(sorted(tools)[:20]) or "none"
                raise _field(index, "tool", f"resource {binding.resource_id} has no tool "
                             f"{binding.tool!r} (it lists: {names})")
            reason = unusable(tool)
            if reason is not None:
                raise _field(index, "tool", f"tool {binding.tool!r}: {reason}")
            alias = binding.alias
            if alias is None:
                resource = self.service.resource(space_id, binding.resource_id)
                assert resource is not None
                alias = derive_alias(resource.spec.alias_prefix, binding.tool, taken)
                taken.add(alias)
            pinned.append(self._freeze(space_id, binding, tool, alias, index))
        return {**config, "mcp_tools": [b.model_dump(mode="json") for b in pinned]}

    def _listed(self, space_id: str, binding: McpToolBinding, index: int,
                listed: dict[str, dict[str, types.Tool]]) -> dict[str, types.Tool]:
        if binding.resource_id not in listed:
            resource = self.service.resource(space_id, binding.resource_id)
            if resource is None:
                raise _field(index, "resource_id", f"no MCP resource "
                             f"{binding.resource_id[:80]!r} in this space")
            try:
                tools = run_sync(self.service.list_tools(resource))
            except McpServerFailed as err:
                raise _field(index, "resource_id", err.message) from None
            listed[binding.resource_id] = {t.name: t for t in tools}
        return listed[binding.resource_id]

    def _freeze(self, space_id: str, binding: McpToolBinding, tool: types.Tool,
                alias: str, index: int) -> McpToolBinding:
        schema = dict(tool.input_schema)
        if schema.get("type") != "object":
            raise _field(index, "tool", f"tool {tool.name!r}: its input schema is not of "
                         "type object")
        try:
            checked_validator(schema)
        except SchemaError as err:
            raise _field(index, "tool", f"tool {tool.name!r} has an invalid input schema: "
                         f"{err.message[:200]}") from None
        hints = tool.annotations or types.ToolAnnotations()
        resource = self.service.resource(space_id, binding.resource_id)
        assert resource is not None
        return binding.model_copy(update={
            "alias": alias, "description": (tool.description or tool.title or "")[:10_000],
            "parameters": schema, "schema_digest": tool_digest(tool),
            "read_only_hint": bool(hints.read_only_hint),
            "idempotent_hint": bool(hints.idempotent_hint),
            "trust_annotations": resource.spec.trust_annotations})

    # -- runs ----------------------------------------------------------------------------

    def tools(self, snapshot: AgentSnapshot, scope: RunScope) -> list[ToolDefinition]:
        if not snapshot.mcp_tools:
            return []
        drifted = self.service.drifted(scope.space_id, snapshot.mcp_tools)
        return [self.definition(scope.space_id, b, drifted) for b in snapshot.mcp_tools]

    def credentials(self, snapshot: AgentSnapshot, scope: RunScope) -> list[str]:
        if not snapshot.mcp_tools:
            return []  # nothing bound: nothing to open
        return self.service.credential_values(
            scope.space_id, (b.resource_id for b in snapshot.mcp_tools))

    def definition(self, space_id: str, binding: McpToolBinding,
                   drifted: set[str] = frozenset()) -> ToolDefinition:  # type: ignore[assignment]
        if binding.parameters is None or binding.alias is None or not binding.schema_digest:
            raise ConfigError(f"MCP tool {binding.tool!r} of {binding.resource_id} is not "
                              "published (no pinned schema): publish the agent through the "
                              "platform")
        safe = binding.trust_annotations and (binding.read_only_hint or
                                              binding.idempotent_hint)
        implementation = f"{IMPLEMENTATION}:{binding.schema_digest}"
        if binding.alias in drifted:
            implementation += ":server-schema-changed"
        service = self.service

        async def handler(context: ToolContext, arguments: dict[str, Any]) -> Any:
            return await service.call(space_id, binding, arguments)

        return ToolDefinition(
            name=binding.alias, description=binding.description or binding.tool,
            parameters=dict(binding.parameters), handler=handler,
            implementation_id=implementation,
            tool_id=f"mcp:{binding.resource_id}:{binding.tool}", resume_inflight=safe,
            read_only=binding.trust_annotations and binding.read_only_hint,
            timeout=MAX_TIMEOUT + 30)


def _field(index: int, name: str, message: str) -> Exception:
    return field_errors([{"loc": ("config", "mcp_tools", index, name), "msg": message}])
