"""Registries: trusted handlers by (hook_id, version); host-defined points."""

from __future__ import annotations

from typing import Any

import pytest
from unit.hooks.hook_fixtures import payload

from agentloom_runtime.hooks import (
    Continue,
    HookConfigError,
    HookContractError,
    HookDefinition,
    HookPoint,
    HookPointRegistry,
    HookRegistry,
    PatchOutput,
    PointRule,
    Reject,
)


async def handler(ctx: Any, data: dict[str, Any]) -> Continue:
    return Continue()


def test_versions_coexist_and_duplicates_are_refused() -> None:
    registry = HookRegistry([HookDefinition("h", "1", handler)])
    registry.register(HookDefinition("h", "2", handler))
    assert ("h", "1") in registry and ("h", "2") in registry and len(registry) == 2
    with pytest.raises(HookConfigError, match="already registered"):
        registry.register(HookDefinition("h", "1", handler))
    with pytest.raises(HookConfigError, match="not registered"):
        registry.get("h", "3")


def test_the_decorator_registers_and_returns_the_handler() -> None:
    registry = HookRegistry()

    @registry.hook("audit", "1", observation=True)
    async def audit(ctx: Any, data: dict[str, Any]) -> Continue:
        return Continue()

    definition = registry.get("audit", "1")
    assert definition.handler is audit and definition.observation
    assert not definition.replay_safe  # the default


@pytest.mark.parametrize("hook_id, version", [("", "1"), ("h", ""), ("h", 1)])
def test_identity_is_checked(hook_id: Any, version: Any) -> None:
    with pytest.raises(HookConfigError):
        HookDefinition(hook_id, version, handler)


def test_builtin_points_cannot_be_redefined() -> None:
    registry = HookPointRegistry.builtin(2)
    with pytest.raises(HookConfigError, match="already defined"):
        registry.register(HookPointRegistry.builtin(2).get("tool.before"))
    with pytest.raises(HookConfigError, match="unknown point contract version"):
        HookPointRegistry(3)


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "x.before", "stage": "after"}, "must end with"),
    ({"results": frozenset({Continue, Reject})}, "not allowed at the after stage"),
    ({"writable": frozenset({"html"}), "results": frozenset({Continue})}, "without a patch"),
    ({"schema": {"type": "nonsense"}}, "invalid schema"),
])
def test_point_definitions_are_checked(kwargs: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {"name": "report.after", "stage": "after",
                              "schema": {"type": "object"}}
    with pytest.raises(HookConfigError, match=message):
        HookPoint(**{**fields, **kwargs})


def test_a_point_with_cross_field_rules_is_validated_whole_after_a_patch() -> None:
    point = HookPoint(
        name="report.after", stage="after",
        schema={"type": "object", "properties": {"html": {"type": "string"},
                                                 "limit": {"type": "integer"}},
                "if": {"properties": {"limit": {"const": 0}}},
                "then": {"properties": {"html": {"const": ""}}}},
        writable=frozenset({"html"}), results=frozenset({Continue, PatchOutput}),
        rules=(PointRule("no-script/v1",
                         lambda old, new: "no scripts" if "<script" in new["html"] else None),))
    assert point.apply({"html": "", "limit": 5}, PatchOutput({"html": "<p>"}),
                       hook_id="h") == {"html": "<p>", "limit": 5}
    with pytest.raises(HookContractError, match="invalid payload"):
        point.apply({"html": "", "limit": 0}, PatchOutput({"html": "<p>"}), hook_id="h")
    with pytest.raises(HookContractError, match="no scripts") as info:
        point.apply({"html": "", "limit": 5}, PatchOutput({"html": "<script>"}), hook_id="h")
    assert info.value.details["rule"] == "no-script/v1"


def test_deep_validation_checks_what_the_entry_check_skips() -> None:
    point = HookPointRegistry.builtin(2).get("model.chat.before")
    data = payload("model.chat.before")
    data["messages"] = [{"content": "no role"}]
    point.validate(data, deep=False)  # not writable by hooks: checked by type only
    with pytest.raises(HookContractError, match="role"):
        point.validate(data)
    data = payload("model.chat.before")
    data["extra_messages"] = [{"role": "system", "content": "x"}]
    with pytest.raises(HookContractError):  # writable fields are always checked in full
        point.validate(data, deep=False)
