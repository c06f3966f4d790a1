"""HookContext exposes read-only config, scope and identity fields, nothing else."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from unit.hooks.hook_fixtures import payload, scope

from agentloom_runtime.hooks import (
    Continue,
    HookBinding,
    HookContext,
    HookDefinition,
    HookManager,
    HookRegistry,
    HookScope,
    PatchInput,
)

CONFIG = {"mask": "***", "fields": ["text"], "nested": {"limit": 3, "items": [{"a": 1}]}}


async def capture_context(*, purpose: str | None = None) -> HookContext:
    seen: list[HookContext] = []

    async def spy(ctx: HookContext, data: dict[str, Any]) -> Continue:
        seen.append(ctx)
        return Continue()

    mgr = HookManager(HookRegistry([HookDefinition("spy", "7", spy)]),
                      [HookBinding("spy", "7", "tool.before", config=CONFIG)])
    await mgr.run("tool.before", payload("tool.before"),
                  scope("tool.before", space_id="team", agent_id="writer", agent_version="4",
                        session_id="s-1", operation_id="op-9"))
    return seen[0]


async def test_the_context_exposes_only_config_scope_and_identity() -> None:
    ctx = await capture_context()
    public = {name for name in dir(ctx) if not name.startswith("_")}
    assert public == {"config", "scope", "hook_id", "hook_version", "point", "deadline",
                      "remaining_seconds"}
    assert not hasattr(ctx, "__dict__")
    assert (ctx.hook_id, ctx.hook_version, ctx.point) == ("spy", "7", "tool.before")
    private = {name for name in HookContext.__slots__}
    values = [getattr(ctx, name) for name in private]
    assert all(isinstance(v, str | float | HookScope) or v is ctx.config for v in values)


async def test_the_scope_is_identity_only_and_frozen() -> None:
    ctx = await capture_context()
    assert [f.name for f in dataclasses.fields(HookScope)] == [
        "run_id", "instance", "point", "purpose", "tool", "space_id", "agent_id",
        "agent_version", "session_id", "operation_id"]
    assert ctx.scope == HookScope(run_id="run-1", instance="main", point="tool.before",
                                  tool="echo", space_id="team", agent_id="writer",
                                  agent_version="4", session_id="s-1", operation_id="op-9")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.scope.run_id = "other"  # type: ignore[misc]


async def test_identity_fields_cannot_be_reassigned() -> None:
    ctx = await capture_context()
    for name in ("hook_id", "config", "scope", "deadline"):
        with pytest.raises(AttributeError):
            setattr(ctx, name, "x")
    with pytest.raises(AttributeError):
        ctx.engine = object()  # type: ignore[attr-defined]


async def test_the_config_is_deep_frozen() -> None:
    ctx = await capture_context()
    assert ctx.config["nested"]["items"][0]["a"] == 1
    with pytest.raises(TypeError):
        ctx.config["mask"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        ctx.config["nested"]["limit"] = 4
    with pytest.raises(AttributeError):
        ctx.config["fields"].append("y")
    assert ctx.config["fields"] == ("text",)


async def test_a_handler_mutating_its_payload_or_its_patch_changes_nothing() -> None:
    kept: list[dict[str, Any]] = []

    async def vandal(ctx: HookContext, data: dict[str, Any]) -> Continue:
        data["arguments"]["text"] = "changed in place"
        data["name"] = "rm"
        return Continue()

    async def patcher(ctx: HookContext, data: dict[str, Any]) -> PatchInput:
        kept.append({"arguments": {"text": "patched"}})
        return PatchInput(kept[0])

    async def later(ctx: HookContext, data: dict[str, Any]) -> Continue:
        kept[0]["arguments"]["text"] = "mutated after it was applied"
        return Continue()

    original = payload("tool.before")
    registry = HookRegistry([HookDefinition("vandal", "1", vandal),
                             HookDefinition("patcher", "1", patcher),
                             HookDefinition("later", "1", later)])
    mgr = HookManager(registry, [HookBinding(h, "1", "tool.before")
                                 for h in ("vandal", "patcher", "later")])
    outcome = await mgr.run("tool.before", original, scope("tool.before"))
    assert original == payload("tool.before")
    assert outcome.payload == {**payload("tool.before"), "arguments": {"text": "patched"}}
