"""Every point's writable scope, allowed results and re-validation (docs/contract.md#hooks)."""

from __future__ import annotations

from typing import Any

import pytest
from unit.hooks.hook_fixtures import POINTS, payload, returning, scope, single

from agentloom_runtime.hooks import (
    Continue,
    HookContractError,
    HookPointRegistry,
    PatchInput,
    PatchOutput,
    Reject,
)

# The table of docs/hooks.md#points-and-what-each-may-change: writable fields, allowed results.
WRITABLE = {
    "model.chat.before": {"extra_messages", "options"},
    "model.chat.after": {"content", "annotations"},
    "model.embedding.before": {"texts"},
    "model.embedding.after": set(),
    "tool.before": {"arguments"},
    "tool.after": {"value", "annotations"},
    "context.prepare.before": {"extra_messages"},
    "context.prepare.after": set(),
    "context.compact.before": set(),
    "context.compact.after": {"summary"},
    "run.before": set(),
    "run.after": {"annotations"},
    "subagent.before": set(),
    "subagent.after": {"annotations"},
    "operation.error": set(),
    "operation.finally": set(),
}
REJECTABLE = {"tool.before", "context.compact.before", "run.before", "subagent.before"}

# A valid patch for every writable field.
ALLOWED: dict[str, dict[str, Any]] = {
    "model.chat.before": {"extra_messages": [{"role": "user", "content": "extra"}],
                          "options": {"temperature": 0.7, "top_p": 0.9,
                                      "max_output_tokens": 500}},
    "model.chat.after": {"content": "rewritten", "annotations": {"lang": "en"}},
    "model.embedding.before": {"texts": ["A", "B"]},
    "tool.before": {"arguments": {"text": "y"}},
    "tool.after": {"value": {"text": "redacted"}, "annotations": {"redacted": True}},
    "context.prepare.before": {"extra_messages": [
        {"role": "user", "content": "note", "source": "crm"}]},
    "context.compact.after": {"summary": "shorter"},
    "run.after": {"annotations": {"cost": 1}},
    "subagent.after": {"annotations": {"checked": True}},
}
# A patch of a writable field that breaks the point schema.
SCHEMA_INVALID: dict[str, dict[str, Any]] = {
    "model.chat.before": {"options": {"temperature": 5}},
    "model.chat.after": {"content": 42},
    "model.embedding.before": {"texts": [1, 2]},
    "tool.before": {"arguments": "not an object"},
    "tool.after": {"annotations": "x"},
    "context.prepare.before": {"extra_messages": [{"role": "system", "content": "x",
                                                   "source": "crm"}]},
    "context.compact.after": {"summary": 3},
    "run.after": {"annotations": []},
    "subagent.after": {"annotations": 1},
}


def patch_type(point: str) -> type[PatchInput] | type[PatchOutput]:
    return PatchInput if point.endswith(".before") else PatchOutput


async def run(point: str, result: Any, data: dict[str, Any] | None = None) -> Any:
    mgr = single(point, returning(result))
    return await mgr.run(point, payload(point) if data is None else data, scope(point))


def test_builtin_table_matches_the_seed() -> None:
    registry = HookPointRegistry.builtin(2)
    assert {p.name for p in registry} == set(WRITABLE)
    for point in registry:
        assert set(point.writable) == WRITABLE[point.name], point.name
        expected: set[type] = {Continue}
        if WRITABLE[point.name]:
            expected.add(patch_type(point.name))
        if point.name in REJECTABLE:
            expected.add(Reject)
        assert set(point.results) == expected, point.name


@pytest.mark.parametrize("point", POINTS)
def test_fixture_payloads_are_valid_in_both_contracts(point: str) -> None:
    for version in (1, 2):
        HookPointRegistry.builtin(version).get(point).validate(payload(point))


@pytest.mark.parametrize("point", POINTS)
async def test_a_patch_outside_the_writable_scope_is_refused(point: str) -> None:
    outside = next(k for k in payload(point) if k not in WRITABLE[point])
    if point.startswith("operation."):
        return  # diagnostic-only points: see test_error_finally_* in the observation tests
    with pytest.raises(HookContractError, match=r"may not write|not allowed"):
        await run(point, patch_type(point)({outside: payload(point)[outside]}))


@pytest.mark.parametrize("point", sorted(ALLOWED))
async def test_an_allowed_patch_is_applied_and_revalidated(point: str) -> None:
    original = payload(point)
    outcome = await run(point, patch_type(point)(ALLOWED[point]), original)
    assert outcome.rejected is None
    for key, value in ALLOWED[point].items():
        assert outcome.payload[key] == value
    assert original == payload(point)  # the engine's payload is never mutated
    HookPointRegistry.builtin(2).get(point).validate(outcome.payload)


@pytest.mark.parametrize("point", sorted(SCHEMA_INVALID))
async def test_a_schema_invalid_patch_is_refused(point: str) -> None:
    with pytest.raises(HookContractError, match="invalid payload"):
        await run(point, patch_type(point)(SCHEMA_INVALID[point]))


@pytest.mark.parametrize("point", [p for p in POINTS if not p.startswith("operation.")])
async def test_the_wrong_patch_kind_is_refused(point: str) -> None:
    wrong = PatchOutput if point.endswith(".before") else PatchInput
    field = next(iter(WRITABLE[point] or {"x"}))
    with pytest.raises(HookContractError, match="not allowed at"):
        await run(point, wrong({field: None}))


@pytest.mark.parametrize("result", [None, {"fields": {}}, "continue"])
async def test_a_non_result_is_refused(result: Any) -> None:
    with pytest.raises(HookContractError, match="not a HookResult"):
        await run("tool.before", result)


# ---------------------------------------------------------------- point rules


@pytest.mark.parametrize("extra, message", [
    ([{"role": "system", "content": "x"}], "invalid payload"),
    ([{"role": "user", "content": "x", "tool_calls": []}], "invalid payload"),
    ([{"role": "user", "content": "x" * 16_001}], "invalid payload"),
    ([{"role": "user", "content": "x"}] * 9, "invalid payload"),
])
async def test_chat_before_extra_messages_are_restricted_user_material(
        extra: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(HookContractError, match=message):
        await run("model.chat.before", PatchInput({"extra_messages": extra}))


async def test_extra_messages_are_append_only() -> None:
    data = payload("model.chat.before")
    data["extra_messages"] = [{"role": "user", "content": "first"}]
    with pytest.raises(HookContractError, match="appended"):
        await run("model.chat.before",
                  PatchInput({"extra_messages": [{"role": "user", "content": "other"}]}), data)
    outcome = await run("model.chat.before", PatchInput({"extra_messages": [
        {"role": "user", "content": "first"}, {"role": "user", "content": "second"}]}), data)
    assert [m["content"] for m in outcome.payload["extra_messages"]] == ["first", "second"]


@pytest.mark.parametrize("options, ok", [
    ({"temperature": 0.2, "max_output_tokens": 999}, True),
    ({"temperature": 1.0, "top_p": 0.5, "max_output_tokens": 1000}, True),
    ({"temperature": 0.2, "max_output_tokens": 1001}, False),
    ({"temperature": 0.2}, False),  # dropping the limit raises it to the default
    ({"temperature": 0.2, "max_output_tokens": 10, "stop": ["x"]}, False),
])
async def test_chat_before_options_stay_within_budget(options: dict[str, Any], ok: bool) -> None:
    if ok:
        outcome = await run("model.chat.before", PatchInput({"options": options}))
        assert outcome.payload["options"] == options
    else:
        with pytest.raises(HookContractError):
            await run("model.chat.before", PatchInput({"options": options}))


async def test_chat_before_cannot_add_a_limit_the_request_did_not_set() -> None:
    data = payload("model.chat.before")
    data["options"] = {"seed": 7}
    with pytest.raises(HookContractError, match="only decrease"):
        await run("model.chat.before", PatchInput({"options": {"seed": 7,
                                                               "max_output_tokens": 5}}), data)
    with pytest.raises(HookContractError, match="not adjustable"):
        await run("model.chat.before", PatchInput({"options": {"seed": 8}}), data)


async def test_chat_after_never_touches_the_tool_call_protocol() -> None:
    data = payload("model.chat.after")
    data["tool_calls"] = [{"id": "c1", "type": "function",
                           "function": {"name": "echo", "arguments": "{}"}}]
    data["content"] = None
    with pytest.raises(HookContractError, match="may not write"):
        await run("model.chat.after", PatchOutput({"tool_calls": []}), data)
    with pytest.raises(HookContractError, match="may not write"):
        await run("model.chat.after", PatchOutput({"reasoning_content": "x"}), data)
    outcome = await run("model.chat.after", PatchOutput({"content": "calling echo"}), data)
    assert outcome.payload["tool_calls"] == data["tool_calls"]


async def test_chat_after_keeps_an_answer() -> None:
    with pytest.raises(HookContractError, match="non-empty content"):
        await run("model.chat.after", PatchOutput({"content": None}))


async def test_embedding_before_keeps_the_count() -> None:
    with pytest.raises(HookContractError, match="count"):
        await run("model.embedding.before", PatchInput({"texts": ["a"]}))


@pytest.mark.parametrize("field", ["evidence_arguments", "raw_value", "has_raw_value",
                                   "status", "arguments"])
async def test_tool_after_never_changes_real_state_or_evidence(field: str) -> None:
    with pytest.raises(HookContractError, match="may not write"):
        await run("tool.after", PatchOutput({field: payload("tool.after")[field]}))


async def test_context_prepare_material_needs_a_source_label() -> None:
    with pytest.raises(HookContractError, match="invalid payload"):
        await run("context.prepare.before",
                  PatchInput({"extra_messages": [{"role": "user", "content": "x"}]}))


async def test_compact_after_only_rewrites_a_declared_summary() -> None:
    data = payload("context.compact.after")
    data["summary"] = None
    with pytest.raises(HookContractError, match="declared no summary"):
        await run("context.compact.after", PatchOutput({"summary": "invented"}), data)
    with pytest.raises(HookContractError, match="may not write"):
        await run("context.compact.after", PatchOutput({"messages": []}))


# ---------------------------------------------------------------- contract versions


def test_v2_refuses_unknown_fields_and_requires_declared_ones() -> None:
    point = HookPointRegistry.builtin(2).get("tool.before")
    with pytest.raises(HookContractError, match="Additional properties"):
        point.validate({**payload("tool.before"), "secret": 1})
    with pytest.raises(HookContractError, match="required"):
        point.validate({"call_id": "c1", "name": "echo", "instance": "main"})


def test_v2_keeps_usage_and_annotations_optional() -> None:
    point = HookPointRegistry.builtin(2).get("model.chat.after")
    point.validate(payload("model.chat.after"))
    point.validate({**payload("model.chat.after"), "usage": {"total_tokens": 3},
                    "annotations": {"a": 1}})


def test_v1_accepts_unknown_fields_and_missing_ones() -> None:
    point = HookPointRegistry.builtin(1).get("tool.before")
    point.validate({"name": "echo", "legacy": True})
    with pytest.raises(HookContractError):
        point.validate({"arguments": "still typed"})


async def test_the_engine_payload_is_checked_before_hooks_run() -> None:
    bad = payload("tool.before")
    del bad["arguments"]
    with pytest.raises(HookContractError, match=r"payload at tool\.before is invalid"):
        await run("tool.before", Continue(), bad)


def test_the_point_modules_do_not_import_each_other() -> None:
    """``_point`` ← ``_builtin_points`` ← ``points``: no import cycle."""
    import ast
    from pathlib import Path

    import agentloom_runtime.hooks as hooks

    def imported(module: str) -> set[str]:
        tree = ast.parse((Path(hooks.__file__).parent / f"{module}.py").read_text())
        return {node.module or "" for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.level == 1}

    assert "points" not in imported("_builtin_points") | imported("_point")
    assert "_builtin_points" not in imported("_point")
