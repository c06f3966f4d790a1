"""Ordering (priority, then publication order; per point) and default matching."""

from __future__ import annotations

from typing import Any

import pytest
from unit.hooks.hook_fixtures import payload, scope

from agentloom_runtime.hooks import (
    Continue,
    HookBinding,
    HookConfigError,
    HookDefinition,
    HookManager,
    HookRegistry,
    HookScope,
)


def recording(log: list[str], name: str) -> Any:
    async def handler(ctx: Any, data: dict[str, Any]) -> Continue:
        log.append(f"{ctx.point}:{name}")
        return Continue()
    return handler


def build(log: list[str], bindings: list[HookBinding]) -> HookManager:
    registry = HookRegistry()
    for hook_id in sorted({b.hook_id for b in bindings}):
        registry.register(HookDefinition(hook_id, "1", recording(log, hook_id)))
    return HookManager(registry, bindings)


async def test_priority_ascending_then_publication_order() -> None:
    log: list[str] = []
    mgr = build(log, [
        HookBinding("c", "1", "tool.before", priority=100),
        HookBinding("a", "1", "tool.before", priority=50),
        HookBinding("d", "1", "tool.before", priority=100),
        HookBinding("b", "1", "tool.before", priority=50),
        HookBinding("first", "1", "tool.before", priority=-1),
    ])
    await mgr.run("tool.before", payload("tool.before"), scope("tool.before"))
    assert log == ["tool.before:" + n for n in ["first", "a", "b", "c", "d"]]
    assert [r.index for r in mgr.stage("tool.before", scope("tool.before"))] == [0, 1, 2, 3, 4]


async def test_an_explicit_publication_order_wins_over_list_position() -> None:
    log: list[str] = []
    mgr = build(log, [HookBinding("late", "1", "tool.before", order=9),
                      HookBinding("early", "1", "tool.before", order=2)])
    await mgr.run("tool.before", payload("tool.before"), scope("tool.before"))
    assert log == ["tool.before:early", "tool.before:late"]


async def test_before_and_after_are_ordered_separately_without_reversal() -> None:
    log: list[str] = []
    mgr = build(log, [
        HookBinding("x", "1", "tool.before", priority=1),
        HookBinding("y", "1", "tool.before", priority=2),
        HookBinding("x", "1", "tool.after", priority=1),
        HookBinding("y", "1", "tool.after", priority=2),
        HookBinding("y", "1", "operation.finally", priority=0),
        HookBinding("x", "1", "operation.finally", priority=5),
    ])
    await mgr.run("tool.before", payload("tool.before"), scope("tool.before"))
    await mgr.run("tool.after", payload("tool.after"), scope("tool.after"))
    await mgr.run("operation.finally", payload("operation.finally"), scope("operation.finally"))
    assert log == ["tool.before:x", "tool.before:y", "tool.after:x", "tool.after:y",
                   "operation.finally:y", "operation.finally:x"]


def stage_ids(mgr: HookManager, point: str, **scope_fields: Any) -> list[str]:
    return [r.hook_id for r in mgr.stage(point, HookScope(run_id="r", **scope_fields))]


def test_chat_matches_only_action_by_default() -> None:
    mgr = build([], [HookBinding("default", "1", "model.chat.before"),
                     HookBinding("review", "1", "model.chat.before",
                                 match={"purposes": ["completion"]}),
                     HookBinding("both", "1", "model.chat.after",
                                 match={"purposes": ["action", "compaction"]})])
    assert stage_ids(mgr, "model.chat.before", purpose="action") == ["default"]
    assert stage_ids(mgr, "model.chat.before", purpose="compaction") == []
    # the internal purpose "verification" is matched as "completion"
    assert stage_ids(mgr, "model.chat.before", purpose="verification") == ["review"]
    assert stage_ids(mgr, "model.chat.after", purpose="compaction") == ["both"]
    assert stage_ids(mgr, "model.chat.after", purpose="verification") == []


def test_a_binding_written_with_verification_means_completion() -> None:
    mgr = build([], [HookBinding("v", "1", "model.chat.before",
                                 match={"purposes": ["verification"]})])
    assert mgr.stage("model.chat.before", HookScope(purpose="verification"))
    assert mgr.checkpoint_config()["bindings"][0]["match"] == {"purposes": ["completion"]}


def test_embedding_matches_document_and_query_by_default() -> None:
    mgr = build([], [HookBinding("e", "1", "model.embedding.before"),
                     HookBinding("q", "1", "model.embedding.before",
                                 match={"purposes": ["query"]})])
    assert stage_ids(mgr, "model.embedding.before", purpose="document") == ["e"]
    assert stage_ids(mgr, "model.embedding.before", purpose="query") == ["e", "q"]
    assert stage_ids(mgr, "model.embedding.before", purpose="action") == []
    assert stage_ids(mgr, "model.embedding.before") == []


def test_other_points_match_any_purpose_and_filter_instances_and_tools() -> None:
    mgr = build([], [HookBinding("all", "1", "tool.before"),
                     HookBinding("subs", "1", "tool.before", match={"instances": ["sub-*"]}),
                     HookBinding("files", "1", "tool.before",
                                 match={"tools": ["workspace_*", "mcp:*"]})])
    assert stage_ids(mgr, "tool.before", tool="echo") == ["all"]
    assert stage_ids(mgr, "tool.before", tool="echo", instance="sub-3") == ["all", "subs"]
    assert stage_ids(mgr, "tool.before", tool="workspace_read") == ["all", "files"]
    assert stage_ids(mgr, "tool.before", tool="mcp:kb:search") == ["all", "files"]
    assert stage_ids(mgr, "tool.before") == ["all"]


def test_publication_orders_are_distinct() -> None:
    with pytest.raises(HookConfigError, match="distinct publication orders"):
        build([], [HookBinding("a", "1", "tool.before", order=1),
                   HookBinding("b", "1", "tool.after")])  # position 1


@pytest.mark.parametrize("binding, message", [
    (HookBinding("h", "1", "run.before", match={"tools": ["x"]}), "only applies to tool"),
    (HookBinding("h", "1", "no.such.before"), "unknown hook point"),
    (HookBinding("h", "2", "run.before"), "not registered"),
])
def test_invalid_bindings_are_refused(binding: HookBinding, message: str) -> None:
    with pytest.raises(HookConfigError, match=message):
        HookManager(HookRegistry([HookDefinition("h", "1", recording([], "h"))]), [binding])


@pytest.mark.parametrize("kwargs, message", [
    ({"match": {"agents": ["x"]}}, "unknown match keys"),
    ({"match": {"tools": "echo"}}, "list of non-empty strings"),
    ({"timeout": 0}, "positive"),
    ({"timeout": float("nan")}, "positive"),
    ({"priority": 1.5}, "integer"),
    ({"config": {"x": object()}}, "JSON"),
])
def test_binding_fields_are_checked(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(HookConfigError, match=message):
        HookBinding("h", "1", "tool.before", **kwargs)
