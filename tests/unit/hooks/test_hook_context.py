"""What a handler sees: a HookContext with read-only config, scope and identity fields,
and a payload whose writable fields are a private copy and the rest read-only views."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest
from unit.hooks.hook_fixtures import payload, scope

from agentloom_runtime.hooks import (
    Continue,
    FrozenList,
    HookBinding,
    HookContext,
    HookContractError,
    HookDefinition,
    HookManager,
    HookRegistry,
    HookScope,
    PatchInput,
    PatchOutput,
    thaw,
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


# ---------------------------------------------------------------- the payload a handler sees


def chat_payload(messages: int = 3) -> dict[str, Any]:
    history = [{"role": "user", "content": f"m{i}", "meta": {"tags": ["a"]}}
               for i in range(messages)]
    return {**payload("model.chat.before"), "messages": history,
            "tools": [{"type": "function", "function": {"name": "read"}}],
            "extra_messages": [{"role": "user", "content": "earlier"}]}


async def run_chat(handler: Any, data: dict[str, Any]) -> Any:
    mgr = HookManager(HookRegistry([HookDefinition("h", "1", handler)]),
                      [HookBinding("h", "1", "model.chat.before")])
    return await mgr.run("model.chat.before", data, scope("model.chat.before"))


async def test_read_only_fields_are_uncopied_read_only_views() -> None:
    data = chat_payload()
    seen: dict[str, Any] = {}

    async def reader(ctx: HookContext, view: dict[str, Any]) -> Continue:
        messages = view["messages"]
        seen["type"] = type(messages)
        seen["shared"] = messages._data is data["messages"]  # a view, not a copy
        seen["len"], seen["last"] = len(messages), messages[-1]["content"]
        seen["tags"] = list(messages[0]["meta"]["tags"])
        seen["equal"] = messages == data["messages"] and messages[0] == data["messages"][0]
        seen["thawed"] = json.dumps(thaw(messages))  # plain data again, JSON-able
        for attempt in (lambda: messages.append({}),
                        lambda: messages.__setitem__(0, {}),
                        lambda: messages[0].__setitem__("content", "x"),
                        lambda: messages[0]["meta"]["tags"].append("b"),
                        lambda: view["tools"][0]["function"].pop("name")):
            with pytest.raises((AttributeError, TypeError)):
                attempt()
        return Continue()

    before = copy.deepcopy(data)
    outcome = await run_chat(reader, data)
    assert seen["type"] is FrozenList and seen["shared"] and seen["equal"]
    assert (seen["len"], seen["last"], seen["tags"]) == (3, "m2", ["a"])
    assert json.loads(seen["thawed"]) == data["messages"]
    assert data == before and outcome.payload == before


async def test_writable_fields_are_a_private_copy_and_a_patch_may_reuse_views() -> None:
    data = chat_payload()

    async def editor(ctx: HookContext, view: dict[str, Any]) -> PatchInput:
        assert type(view["extra_messages"]) is list  # writable: a private, mutable copy
        view["extra_messages"][0]["content"] = "changed in place"  # changes nothing
        view["options"]["temperature"] = 2.0  # likewise
        first = view["messages"][0]  # a read-only view used inside a patch
        return PatchInput({"extra_messages": [*data["extra_messages"],
                                              {"role": first["role"],
                                               "content": first["content"]}]})

    outcome = await run_chat(editor, data)
    assert data["extra_messages"] == [{"role": "user", "content": "earlier"}]
    assert data["options"]["temperature"] == 0.2
    assert outcome.payload["extra_messages"] == [{"role": "user", "content": "earlier"},
                                                 {"role": "user", "content": "m0"}]
    assert type(outcome.payload["extra_messages"][1]) is dict


async def test_a_patch_holding_a_view_is_stored_as_plain_data() -> None:
    data = {**payload("tool.after"), "raw_value": {"rows": [[1, 2]]}}

    async def copier(ctx: HookContext, view: dict[str, Any]) -> PatchOutput:
        return PatchOutput({"value": view["raw_value"]})  # a FrozenDict

    mgr = HookManager(HookRegistry([HookDefinition("h", "1", copier)]),
                      [HookBinding("h", "1", "tool.after")])
    outcome = await mgr.run("tool.after", data, scope("tool.after"))
    value = outcome.payload["value"]
    assert value == {"rows": [[1, 2]]} and type(value) is dict
    assert type(value["rows"]) is list and value["rows"] is not data["raw_value"]["rows"]


async def test_the_payload_is_validated_before_the_first_binding() -> None:
    events: list[str] = []

    async def handler(ctx: HookContext, view: dict[str, Any]) -> Continue:
        events.append("ran")
        return Continue()

    async def before(*args: Any) -> None:
        events.append("before")

    mgr = HookManager(HookRegistry([HookDefinition("h", "1", handler)]),
                      [HookBinding("h", "1", "model.chat.before")])
    broken = {k: v for k, v in payload("model.chat.before").items() if k != "messages"}
    with pytest.raises(HookContractError, match=r"payload at model\.chat\.before is invalid"):
        await mgr.run("model.chat.before", broken, scope("model.chat.before"), before=before)
    with pytest.raises(HookContractError, match="options"):
        await mgr.run("model.chat.before", {**payload("model.chat.before"), "options": []},
                      scope("model.chat.before"), before=before)
    assert events == []
