"""``create_engine``: assemble an Engine from a published snapshot (seed 002 §3).

It picks default modules, checks versions, registers tools, freezes the catalog and
hands the decided modules to the Engine. The loop never branches on tool names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentloom_runtime.checkpoint.memory import InMemoryCheckpointStore
from agentloom_runtime.checkpoint.store import BaseCheckpointStore
from agentloom_runtime.completion import EvidenceReviewPolicy
from agentloom_runtime.context.manager import JournalContextManager
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.planning import plan_tool
from agentloom_runtime.snapshot import AgentSnapshot, parse_snapshot
from agentloom_runtime.strategies import strategy_for
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition
from agentloom_runtime.tools import ToolRegistry, ToolRuntime

from .engine import Emit, Engine
from .modules import ExecutionLimits, RuntimeModules, module_binding
from .results import read_result_tool

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


class NoCompaction:
    """Never compacts (tests, hosts that manage context themselves). Requests still
    face the model's own limits; prefer a budget policy in production."""

    module_id = "no-compaction/v1"

    def checkpoint_config(self) -> dict[str, Any]:
        return {}

    def should_compact(self, context: Any) -> str | None:
        return None

    async def compact(self, context: Any, call: Any) -> None:
        return None


def default_compaction(snapshot: AgentSnapshot) -> Any:
    """Budget policy for snapshots with a context_policy; the character policy for old
    published versions without one (seed 000 §8)."""
    from agentloom_runtime.context import (
        BudgetCompactionPolicy,
        CharacterCompactionPolicy,
        estimator_for,
    )

    model = snapshot.model
    if snapshot.context_policy is None:
        return CharacterCompactionPolicy()
    policy = snapshot.context_policy
    return BudgetCompactionPolicy(
        context_window=model.context_window, max_output_tokens=model.max_output_tokens,
        safety_margin_tokens=model.safety_margin_tokens,
        estimator=estimator_for(model.model_dump()), context_ratio=policy.context_ratio,
        target_ratio=policy.target_ratio, user_turns=policy.user_turns,
        model_steps=policy.model_steps, max_compaction_calls=policy.max_compaction_calls)


def default_gateway(snapshot: AgentSnapshot, decrypt: Callable[[str], str] | None) -> Any:
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


def hooks_from_snapshot(snapshot: AgentSnapshot, registry: Any) -> Any:
    """The published hook bindings, resolved against the host's trusted registry."""
    from agentloom_runtime.hooks import HookBinding, HookManager

    if registry is None:
        raise ConfigError("the agent binds hooks but no hook_registry was given")
    bindings = [HookBinding(**spec.model_dump(), order=i)
                for i, spec in enumerate(snapshot.hooks)]
    return HookManager(registry, bindings)


def create_engine(
    snapshot: AgentSnapshot | Mapping[str, Any],
    workspace: Callable[[str], Any] | None = None,
    emit: Emit | None = None,
    decrypt: Callable[[str], str] | None = None,
    search: Any = None,
    checkpoint: str | None = None,
    save: BaseCheckpointStore | None = None,
    configure_tools: Callable[[ToolRegistry], None] | None = None,
    *,
    model_gateway: Any = None,
    compaction_policy: Any = None,
    completion_policy: Any = None,
    strategy: Any = None,
    limits: ExecutionLimits | None = None,
    registry: ToolRegistry | None = None,
    context_manager: Any = None,
    hooks: Any = None,
    hook_scope: Mapping[str, Any] | None = None,
    workspace_provider: Any = None,
    tools: list[ToolDefinition] | None = None,
    commands: Any = None,
    hook_registry: Any = None,
    services: Mapping[str, Any] | None = None,
) -> Engine:
    """Assemble an engine. ``checkpoint`` is the id of a run to attach to (resume or the
    next step); without it, call ``await engine.start(task)``. ``save`` is the checkpoint
    store (in-memory by default). ``tools`` adds trusted definitions (e.g. workspace file
    tools) before ``configure_tools`` runs."""
    snap = snapshot if isinstance(snapshot, AgentSnapshot) else parse_snapshot(dict(snapshot))
    snap_limits = snap.limits
    limits = limits or ExecutionLimits(max_model_calls=snap_limits.max_model_calls,
                                       max_iterations=snap_limits.max_iterations,
                                       max_children=snap_limits.max_children)
    if registry is None:
        registry = ToolRegistry()
        registry.register(plan_tool())
        registry.register(read_result_tool())
        if snap.subagents:
            registry.register(delegate_tool(snap))
        for definition in tools or ():
            registry.register(definition)
        if configure_tools is not None:
            configure_tools(registry)
    services = dict(services or {})
    if search is not None:
        services["search"] = search
    if hooks is None and snap.hooks:
        hooks = hooks_from_snapshot(snap, hook_registry)
    modules = RuntimeModules(
        model=model_gateway or default_gateway(snap, decrypt),
        compaction=compaction_policy if compaction_policy is not None
        else default_compaction(snap),
        completion=completion_policy or EvidenceReviewPolicy(),
        strategy=strategy or strategy_for(snap.mode),
        context=context_manager or JournalContextManager(),
        hooks=hooks, limits=limits)
    runtime = ToolRuntime(registry, config=snap.model_dump(mode="json"))
    bindings = modules.bindings()
    bindings["tools"] = registry.catalog()
    bindings["workspace"] = (workspace_provider.checkpoint_binding()
                             if workspace_provider is not None else None)
    bindings["hook_scope"] = dict(hook_scope or {})
    engine = Engine(store=save or InMemoryCheckpointStore(), modules=modules,
                    bindings=bindings, snapshot=snap, tools=runtime, emit=emit,
                    workspace=workspace, commands=commands, services=services)
    if checkpoint is not None:
        engine.attach(checkpoint)
    return engine


__all__ = ["create_engine", "delegate_tool", "module_binding"]
