"""``create_engine``: assemble an Engine from a published snapshot (docs/contract.md#assembly).

It picks default modules, checks versions, registers tools, freezes the catalog, wires
each module's own resume verifier and hands the decided modules to the Engine. The loop
never branches on tool names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from agentloom_runtime.checkpoint.memory import InMemoryCheckpointStore
from agentloom_runtime.checkpoint.store import BaseCheckpointStore
from agentloom_runtime.completion import EvidenceReviewPolicy
from agentloom_runtime.context.manager import JournalContextManager
from agentloom_runtime.context.policy import CompactionPolicyBase, with_defaults
from agentloom_runtime.contracts import (
    CommandMarkers,
    CompactionPolicy,
    CompletionPolicy,
    ContextManager,
    ExecutionStrategy,
    ModelGateway,
    WorkspaceProvider,
)
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.events import Emit
from agentloom_runtime.hook_contracts import HookManager
from agentloom_runtime.planning import plan_tool
from agentloom_runtime.strategies import strategy_for
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition
from agentloom_runtime.tools import ToolRegistry, ToolRuntime

from ._context import HostPorts
from ._modules import ExecutionLimits, RuntimeModules, Verifier
from ._results import read_result_tool
from .engine import Engine

if TYPE_CHECKING:
    from agentloom_runtime.snapshot import AgentSnapshot

DEFAULT: Literal["default"] = "default"

DELEGATE_SCHEMA = {
    "type": "object",
    "properties": {
        "subagent_id": {"type": "string", "description": "id of a published sub-agent"},
        "task": {"type": "string", "minLength": 1,
                 "description": "the concrete task, with the background it needs"},
    },
    "required": ["subagent_id", "task"],
    "additionalProperties": False,
}


async def _delegate_handler(context: ToolContext, arguments: dict[str, Any]) -> Any:
    raise ConfigError("delegate_task is executed by the engine, not called directly")


def delegate_tool(snapshot: AgentSnapshot) -> ToolDefinition:
    duties = "; ".join(f"{t.id}: {t.duty}" for t in snapshot.subagents)
    return ToolDefinition(
        name="delegate_task", description=f"Delegate a task to a sub-agent. Available: {duties}",
        parameters=DELEGATE_SCHEMA, handler=_delegate_handler,
        implementation_id="delegate-task/v1", execution="delegate",
        available=lambda config, instance: instance == "main")


def default_compaction(snapshot: AgentSnapshot) -> CompactionPolicyBase:
    """The budget policy for snapshots with a context_policy (every new configuration);
    the character policy only for legacy versions without one (docs/contract.md#compaction)."""
    from agentloom_runtime.context import BudgetCompactionPolicy, CharacterCompactionPolicy

    if snapshot.context_policy is None:
        return CharacterCompactionPolicy()
    return BudgetCompactionPolicy.from_settings(snapshot.context_policy.model_dump(),
                                                snapshot.model.model_dump())


def default_gateway(snapshot: AgentSnapshot, decrypt: Callable[[str], str] | None
                    ) -> ModelGateway:
    from agentloom_runtime.model import ChatCompletionsGateway

    model = snapshot.model
    ref = model.api_key_ref
    if ref and decrypt is None:
        raise ConfigError("the model connection names a key but no decrypt was given")

    def key() -> str:
        return decrypt(ref) if (ref and decrypt) else ""

    return ChatCompletionsGateway(base_url=model.base_url, model=model.model, api_key=key,
                                  dialect=model.dialect,
                                  max_output_tokens=model.max_output_tokens,
                                  timeout=model.timeout_seconds)


def hooks_from_snapshot(snapshot: AgentSnapshot, registry: Any) -> HookManager:
    """The published hook bindings, resolved against the host's trusted registry."""
    from agentloom_runtime.hooks import HookBinding
    from agentloom_runtime.hooks import HookManager as DefaultHookManager

    if registry is None:
        raise ConfigError("the agent binds hooks but no hook_registry was given")
    bindings = [HookBinding(**spec.model_dump(), order=i)
                for i, spec in enumerate(snapshot.hooks)]
    return DefaultHookManager(registry, bindings)


def _build_registry(snap: AgentSnapshot, tools: list[ToolDefinition] | None,
                    configure_tools: Callable[[ToolRegistry], None] | None) -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(plan_tool())
    registry.register(read_result_tool())
    if snap.subagents:
        registry.register(delegate_tool(snap))
    for definition in tools or ():
        registry.register(definition)
    if configure_tools is not None:
        configure_tools(registry)
    return registry


def _check_grants(snap: AgentSnapshot, registry: ToolRegistry) -> None:
    """A sub-agent template may grant only tools that exist in the catalog (or the
    ``workspace`` group): a typo must not silently grant nothing."""
    from agentloom_runtime.workspace import WORKSPACE_GROUP

    for index, template in enumerate(snap.subagents):
        unknown = [t for t in template.tools if t != WORKSPACE_GROUP and t not in registry]
        if unknown:
            raise ConfigError(
                f"subagents[{index}].tools: unknown tool(s) {', '.join(map(repr, unknown))}; "
                f"the catalog has: {', '.join(sorted(d.name for d in registry))}")


def _verifiers(registry: ToolRegistry, hooks: HookManager | None,
               workspace_provider: WorkspaceProvider | None,
               limits: ExecutionLimits) -> dict[str, Verifier]:
    """Each binding is verified by its owner on resume (one path, the tested one)."""
    verifiers: dict[str, Verifier] = {"tools": registry.check_catalog,
                                      "limits": limits.verify_binding}
    if workspace_provider is not None:
        verifiers["workspace"] = workspace_provider.verify_binding
    if hooks is not None:
        from agentloom_runtime.hooks import verify_manifest

        current = hooks.checkpoint_config()
        verifiers["hooks"] = lambda saved: verify_manifest(saved.get("config") or {},
                                                           current)
    return verifiers


def create_engine(
    snapshot: AgentSnapshot | Mapping[str, Any],
    workspace: Callable[[str], Any] | None = None,
    emit: Emit | None = None,
    decrypt: Callable[[str], str] | None = None,
    checkpoint: str | None = None,
    save: BaseCheckpointStore | None = None,
    configure_tools: Callable[[ToolRegistry], None] | None = None,
    *,
    model_gateway: ModelGateway | None = None,
    compaction_policy: CompactionPolicy | Literal["default"] = DEFAULT,
    completion_policy: CompletionPolicy | None = None,
    strategy: ExecutionStrategy | None = None,
    limits: ExecutionLimits | None = None,
    registry: ToolRegistry | None = None,
    context_manager: ContextManager | None = None,
    hooks: HookManager | None = None,
    workspace_provider: WorkspaceProvider | None = None,
    tools: list[ToolDefinition] | None = None,
    commands: CommandMarkers | None = None,
    hook_registry: Any = None,
    services: Mapping[str, Any] | None = None,
) -> Engine:
    """Assemble an engine. ``checkpoint`` is the id of a run to attach to (resume or the
    next step); without it, call ``await engine.start(task)``. ``save`` is the checkpoint
    store (in-memory by default). ``compaction_policy``: omit it for the snapshot's
    default policy, pass ``NoCompaction()`` for none. ``tools`` adds trusted definitions
    (e.g. workspace file tools) before ``configure_tools`` runs."""
    # imported here, not at module level: pydantic costs ~80 ms, and importing the engine
    # (a Lambda's cold start, the CLI) should not pay it before an engine is assembled
    from agentloom_runtime.snapshot import AgentSnapshot, parse_snapshot

    snap = snapshot if isinstance(snapshot, AgentSnapshot) else parse_snapshot(dict(snapshot))
    if compaction_policy is None:
        raise ConfigError("compaction_policy=None is ambiguous: omit it for the default "
                          "policy, or pass agentloom_runtime.context.NoCompaction() for none")
    lim = snap.limits
    limits = limits or ExecutionLimits(max_model_calls=lim.max_model_calls,
                                       max_iterations=lim.max_iterations,
                                       max_children=lim.max_children,
                                       max_tokens=lim.max_tokens, max_cost=lim.max_cost)
    if limits.max_cost is not None and not snap.model.priced:
        raise ConfigError("limits.max_cost needs the model connection's prices "
                          "(model.input_price_per_million, model.output_price_per_million)")
    registry = registry or _build_registry(snap, tools, configure_tools)
    _check_grants(snap, registry)
    if hooks is None and snap.hooks:
        hooks = hooks_from_snapshot(snap, hook_registry)
    compaction = default_compaction(snap) if compaction_policy == DEFAULT \
        else with_defaults(compaction_policy)
    modules = RuntimeModules(
        model=model_gateway or default_gateway(snap, decrypt),
        compaction=compaction,
        completion=completion_policy or EvidenceReviewPolicy(),
        strategy=strategy or strategy_for(snap.mode),
        # the policy's sizes kept with the view's records (context.manager)
        context=context_manager or JournalContextManager(compaction.message_sizer()),
        hooks=hooks, limits=limits)
    runtime = ToolRuntime(registry, config=snap.model_dump(mode="json"))
    bindings = modules.bindings()
    bindings["tools"] = registry.catalog()
    bindings["workspace"] = (workspace_provider.checkpoint_binding()
                             if workspace_provider is not None else None)
    engine = Engine(store=save or InMemoryCheckpointStore(), modules=modules,
                    bindings=bindings, snapshot=snap, tools=runtime,
                    host=HostPorts(workspace=workspace, commands=commands,
                                   services=dict(services or {})),
                    emit=emit, verifiers=_verifiers(registry, hooks, workspace_provider, limits))
    if checkpoint is not None:
        engine.attach(checkpoint)
    return engine


__all__ = ["create_engine", "default_compaction", "delegate_tool"]
