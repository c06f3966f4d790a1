"""ToolRegistry / ToolRuntime: every failure path becomes a result the model can read;
the catalog is frozen and fingerprinted; outcomes are rendered in full (the one cap is
``cap_with_reference``), raw values kept and storable."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from agentloom_runtime.bus import Event, EventBus
from agentloom_runtime.contracts import ToolOutcome, ToolRequest
from agentloom_runtime.errors import (
    ConfigError,
    PersistenceError,
    ResumeMismatch,
    ToolArgumentsError,
    ToolNotFound,
)
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition
from agentloom_runtime.tools import (
    PreparedCall,
    RawResult,
    ToolRegistry,
    ToolRuntime,
    cap_with_reference,
    reference_marker,
)
from agentloom_runtime.tools import registry as registry_module

# -- the example of docs/contract.md#tool-example (untyped on purpose) ---------------------


async def count_words(context, arguments):
    return {"count": len(arguments["text"].split())}


def configure_tools(registry):
    registry.register(ToolDefinition(
        name="count_words", description="统计文本中的词数",
        parameters={
            "type": "object", "properties": {"text": {"type": "string"}},
            "required": ["text"], "additionalProperties": False,
        },
        handler=count_words, implementation_id="count-words/v1",
        tool_id="count_words", resume_inflight=True,
    ))


# -- helpers -------------------------------------------------------------------------------


def context_for(prepared: PreparedCall) -> ToolContext:
    r = prepared.request
    return ToolContext(config={}, instance=r.instance, run_id="run-1", call_id=r.call_id,
                       request_id=r.request_id)


def request(name: str, arguments: str, *, instance: str = "main") -> ToolRequest:
    return ToolRequest(call_id="call-1", name=name, arguments=arguments,
                       request_id="req-1", instance=instance)


async def returns(value: Any) -> Any:
    return value


def tool(name: str = "echo", handler: Any = None, **overrides: Any) -> ToolDefinition:
    async def echo(context: ToolContext, arguments: dict[str, Any]) -> Any:
        return arguments

    fields: dict[str, Any] = {
        "name": name, "description": f"{name} tool",
        "parameters": {"type": "object",
                       "properties": {"text": {"type": "string"}, "n": {"type": "integer"}},
                       "additionalProperties": False},
        "handler": handler or echo, "implementation_id": f"{name}/v1"}
    fields.update(overrides)
    return ToolDefinition(**fields)


def runtime_with(*definitions: ToolDefinition, **kwargs: Any) -> ToolRuntime:
    return ToolRuntime(ToolRegistry(definitions), config=kwargs.pop("config", {}), **kwargs)


def error_of(outcome: Any) -> dict[str, str]:
    assert isinstance(outcome, ToolOutcome)
    return dict(outcome.value["error"])


# -- the contract's tool example -----------------------------------------------------------


async def test_count_words_example_from_the_seed() -> None:
    registry = ToolRegistry()
    configure_tools(registry)
    runtime = ToolRuntime(registry, config={})
    outcome = await runtime.execute(request("count_words", '{"text": "one two  three"}'),
                                    context_for)
    assert outcome.status == "ok"
    assert json.loads(outcome.value) == {"count": 3}
    assert outcome.raw_value == {"count": 3} and outcome.has_raw_value
    assert runtime.schemas("main") == [{"type": "function", "function": {
        "name": "count_words", "description": "统计文本中的词数",
        "parameters": registry.resolve("count_words").parameters}}]
    await runtime.aclose()


# -- prepare: every failure is a readable result, never an exception ------------------------


@pytest.mark.parametrize(("arguments", "fragment"), [
    ('{"text": ', "not valid JSON"),
    ('{"n": NaN}', "not valid JSON"),
    ('["a", "b"]', "must be a JSON object, got list"),
    ('"text"', "must be a JSON object, got str"),
    ("null", "must be a JSON object, got NoneType"),
])
async def test_malformed_or_non_object_arguments(arguments: str, fragment: str) -> None:
    runtime = runtime_with(tool())
    outcome = runtime.prepare(request("echo", arguments))
    assert isinstance(outcome, ToolOutcome)
    assert outcome.status == "error" and outcome.error_code == "tool_arguments_invalid"
    assert fragment in error_of(outcome)["message"]
    assert not outcome.has_raw_value
    await runtime.aclose()


async def test_blank_arguments_mean_an_empty_object() -> None:
    runtime = runtime_with(tool())
    prepared = runtime.prepare(request("echo", "  "))
    assert isinstance(prepared, PreparedCall) and prepared.arguments == {}
    await runtime.aclose()


async def test_unknown_tool() -> None:
    runtime = runtime_with(tool())
    outcome = runtime.prepare(request("rm_rf", "{}"))
    assert isinstance(outcome, ToolOutcome) and outcome.error_code == "tool_not_found"
    assert error_of(outcome) == {"code": "tool_not_found", "message":
                                 "there is no tool named 'rm_rf'; use one of the listed tools"}
    await runtime.aclose()


async def test_unavailable_tool_is_hidden_and_refused() -> None:
    def main_only(config: Any, instance: str) -> bool:
        return instance == "main" and config["feature"]

    runtime = runtime_with(tool("limited", available=main_only), tool("planner",
                           before_plan=True), config={"feature": True})
    assert [d.name for d in runtime.visible("main")] == ["limited", "planner"]
    assert [d.name for d in runtime.visible("sub-1")] == ["planner"]
    assert [d.name for d in runtime.visible("main", before_plan_only=True)] == ["planner"]
    outcome = runtime.prepare(request("limited", "{}", instance="sub-1"))
    assert isinstance(outcome, ToolOutcome)
    assert (outcome.status, outcome.error_code) == ("rejected", "tool_not_available")
    assert isinstance(runtime.prepare(request("limited", "{}")), PreparedCall)
    with pytest.raises(TypeError):
        runtime.config["feature"] = False  # type: ignore[index]  # deep read-only
    await runtime.aclose()


async def test_schema_errors_are_listed_by_path_and_bounded() -> None:
    schema = {"type": "object", "properties": {f"f{i}": {"type": "integer"} for i in range(8)},
              "required": ["f0"], "additionalProperties": False}
    runtime = runtime_with(tool(parameters=schema))
    arguments = {f"f{i}": "x" * 500 for i in range(8)} | {"extra": 1}
    outcome = runtime.prepare(request("echo", json.dumps(arguments)))
    assert isinstance(outcome, ToolOutcome) and outcome.error_code == "tool_arguments_invalid"
    message = error_of(outcome)["message"]
    assert message.startswith("arguments for 'echo' do not match its schema: $: Additional")
    assert "$.f0: " in message and "is not of type 'integer'" in message
    assert "and 4 more" in message  # 9 errors, the first 5 shown
    assert len(message) <= 1_000
    missing = runtime.prepare(request("echo", "{}"))
    assert "$: 'f0' is a required property" in error_of(missing)["message"]
    await runtime.aclose()


async def test_unauthorized_call_is_rejected_with_the_reason() -> None:
    runtime = runtime_with(tool(), tool("planner", before_plan=True))

    def plan_first(definition: ToolDefinition) -> str | None:
        return None if definition.before_plan else "create a plan with update_plan first"

    outcome = runtime.prepare(request("echo", "{}"), authorize=plan_first)
    assert isinstance(outcome, ToolOutcome)
    assert (outcome.status, outcome.error_code) == ("rejected", "tool_not_authorized")
    assert error_of(outcome)["message"] == "create a plan with update_plan first"
    assert isinstance(runtime.prepare(request("planner", "{}"), authorize=plan_first),
                      PreparedCall)
    await runtime.aclose()


async def test_revalidate_after_a_hook_patch() -> None:
    runtime = runtime_with(tool())
    prepared = runtime.prepare(request("echo", '{"text": "a"}'))
    assert isinstance(prepared, PreparedCall)
    bad = runtime.revalidate(prepared, {"text": 5})
    assert isinstance(bad, ToolOutcome) and bad.error_code == "tool_arguments_invalid"
    assert isinstance(runtime.revalidate(prepared, ["x"]), ToolOutcome)
    refused = runtime.revalidate(prepared, {"text": "b"}, authorize=lambda d: "no")
    assert isinstance(refused, ToolOutcome) and refused.status == "rejected"
    patched = runtime.revalidate(prepared, {"text": "b"})
    assert isinstance(patched, PreparedCall)
    assert patched.arguments == {"text": "b"} and patched.request == prepared.request
    await runtime.aclose()


# -- invoke / outcome ----------------------------------------------------------------------


async def test_handler_exception_becomes_a_failure_result() -> None:
    async def broken(context: ToolContext, arguments: dict[str, Any]) -> Any:
        raise KeyError("x" * 5_000)

    runtime = runtime_with(tool(handler=broken))
    outcome = await runtime.execute(request("echo", "{}"), context_for)
    assert (outcome.status, outcome.error_code) == ("error", "tool_failed")
    message = error_of(outcome)["message"]
    assert message.startswith("KeyError: 'xxx") and len(message) <= 1_000
    assert not outcome.has_raw_value
    await runtime.aclose()


async def test_tool_error_keeps_its_code_and_run_errors_propagate() -> None:
    async def declines(context: ToolContext, arguments: dict[str, Any]) -> Any:
        raise ToolArgumentsError("line 40 is past the end of the file")

    async def save_fails(context: ToolContext, arguments: dict[str, Any]) -> Any:
        raise PersistenceError("checkpoint save failed")

    runtime = runtime_with(tool("declines", declines), tool("save_fails", save_fails))
    outcome = await runtime.execute(request("declines", "{}"), context_for)
    assert error_of(outcome) == {"code": "tool_arguments_invalid",
                                 "message": "line 40 is past the end of the file"}
    with pytest.raises(PersistenceError):  # must stop the run, not look like a tool failure
        await runtime.execute(request("save_fails", "{}"), context_for)
    await runtime.aclose()


async def test_timeout_cancels_the_handler_and_reports_it() -> None:
    cleaned: list[bool] = []

    async def stuck(context: ToolContext, arguments: dict[str, Any]) -> Any:
        try:
            await asyncio.sleep(60)
        finally:
            cleaned.append(True)

    runtime = runtime_with(tool(handler=stuck, timeout=0.02))
    outcome = await runtime.execute(request("echo", "{}"), context_for)
    assert (outcome.status, outcome.error_code) == ("error", "tool_timeout")
    assert "did not finish within 0.02 seconds" in error_of(outcome)["message"]
    assert cleaned == [True]
    await runtime.aclose()


async def test_the_outcome_is_rendered_in_full_and_the_raw_value_kept() -> None:
    big = "é" * 30_000
    runtime = runtime_with(tool(handler=lambda c, a: returns({"content": big})))
    outcome = await runtime.execute(request("echo", "{}"), context_for)
    assert outcome.value == json.dumps({"content": big}, ensure_ascii=False)  # not capped
    assert outcome.raw_value == {"content": big} and outcome.has_raw_value
    small = runtime_with(tool(handler=lambda c, a: returns("plain\ntext")))
    assert (await small.execute(request("echo", "{}"), context_for)).value == "plain\ntext"
    await runtime.aclose()
    await small.aclose()


def test_cap_with_reference_never_exceeds_the_limit_and_says_how_to_read_on() -> None:
    ref = "run-1/main#12"
    assert cap_with_reference("x" * 200, 200, ref) == "x" * 200
    for length in (201, 250, 999, 10_000, 123_456):
        text = "".join(chr(0x61 + i % 26) for i in range(length))
        capped = cap_with_reference(text, 200, ref)
        assert len(capped) <= 200
        kept = capped.index("\n…[truncated")
        assert capped[:kept] == text[:kept]
        assert capped[kept:] == reference_marker(ref, kept, length)
        assert capped.endswith(f'[truncated: showing {kept} of {length} characters. The full '
                               f'result is kept: call read_result with ref "{ref}" and '
                               f'offset {kept} to read on]')


async def test_tool_text_is_made_storable_at_the_boundary() -> None:
    value = {"text\ud800": ["ok", "lone \udc00 surrogate"], "n": 1}
    runtime = runtime_with(tool(handler=lambda c, a: returns(value)))
    outcome = await runtime.execute(request("echo", "{}"), context_for)
    assert outcome.raw_value == {"text\ufffd": ["ok", "lone \ufffd surrogate"], "n": 1}
    outcome.value.encode("utf-8")  # the rendered text encodes: it can be saved

    async def fails(context: Any, arguments: Any) -> Any:
        raise ValueError("bad \ud800 input")

    failing = runtime_with(tool(handler=fails))
    outcome = await failing.execute(request("echo", "{}"), context_for)
    assert error_of(outcome)["message"] == "ValueError: bad \ufffd input"
    await runtime.aclose()
    await failing.aclose()


async def test_outcome_uses_a_hook_visible_value_but_keeps_the_raw_result() -> None:
    runtime = runtime_with(tool())
    prepared = runtime.prepare(request("echo", '{"text": "a"}'))
    assert isinstance(prepared, PreparedCall)
    raw = await runtime.invoke(prepared, context_for(prepared))
    outcome = runtime.outcome(prepared, raw, visible_value={"text": "[redacted]"})
    assert json.loads(outcome.value) == {"text": "[redacted]"}
    assert outcome.raw_value == {"text": "a"}
    await runtime.aclose()


async def test_evidence_arguments_are_restricted_to_declared_fields() -> None:
    runtime = runtime_with(tool(evidence_fields=("text",)))
    outcome = await runtime.execute(request("echo", '{"text": "a.txt", "n": 3}'), context_for)
    assert outcome.evidence_arguments == {"text": "a.txt"}
    failed = runtime_with(tool(handler=lambda c, a: returns(object()), evidence_fields=("n",)))
    outcome = await failed.execute(request("echo", '{"n": 3}'), context_for)
    assert outcome.error_code == "tool_result_invalid"
    assert outcome.evidence_arguments == {"n": 3}
    await runtime.aclose()
    await failed.aclose()


async def test_handler_gets_a_detached_copy_of_the_arguments() -> None:
    async def mutates(context: ToolContext, arguments: dict[str, Any]) -> Any:
        arguments["text"] = "changed"
        return (1, 2)  # tuples come back as lists, like after a resume

    runtime = runtime_with(tool(handler=mutates, evidence_fields=("text",)))
    prepared = runtime.prepare(request("echo", '{"text": "orig"}'))
    assert isinstance(prepared, PreparedCall)
    raw = await runtime.invoke(prepared, context_for(prepared))
    assert raw == RawResult(ok=True, value=[1, 2])
    assert runtime.outcome(prepared, raw).evidence_arguments == {"text": "orig"}
    await runtime.aclose()


async def test_invoke_goes_over_the_bus_without_leaking_arguments() -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe("request.*", seen.append)
    runtime = runtime_with(tool(), bus=bus)
    await runtime.execute(request("echo", '{"text": "secret"}'), context_for)
    assert [e.topic for e in seen] == ["request.started", "request.completed"]
    assert seen[0].correlation_id == "req-1"
    assert dict(seen[0].payload["metadata"]) == {
        "tool": "echo", "tool_id": "echo", "instance": "main", "call_id": "call-1",
        "request_id": "req-1"}
    assert "secret" not in repr(seen)
    await runtime.aclose()
    await bus.aclose()


async def test_raw_result_and_prepared_call_round_trip() -> None:
    for raw in (RawResult(ok=True, value={"a": [1]}), RawResult.failure("tool_failed", "x")):
        data = json.loads(json.dumps(raw.to_dict()))
        assert RawResult.from_dict(data) == raw
    with pytest.raises(ConfigError):
        RawResult.from_dict({"format": 99, "ok": True})
    runtime = runtime_with(tool())
    prepared = runtime.prepare(request("echo", '{"text": "a"}'))
    assert isinstance(prepared, PreparedCall)
    data = json.loads(json.dumps(prepared.to_dict()))
    assert runtime.restore(data) == prepared
    with pytest.raises(ResumeMismatch):
        runtime.restore(data | {"name": "gone"})
    await runtime.aclose()


# -- registry and catalog ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "has space", "dot.name", "x" * 65, "trailing\n", "é"])
def test_tool_names_are_checked(name: str) -> None:
    with pytest.raises(ConfigError, match="must match"):
        ToolRegistry().register(tool(name))


@pytest.mark.parametrize(("overrides", "fragment"), [
    ({"parameters": {"type": "array"}}, "type object"),
    ({"parameters": {"type": "object", "properties": {"a": {"type": "nope"}}}},
     "invalid parameters schema"),
    ({"implementation_id": ""}, "implementation_id"),
    ({"timeout": 0}, "timeout"),
    ({"evidence_fields": ("missing",)}, "evidence_fields"),
])
def test_definitions_are_checked(overrides: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        ToolRegistry().register(tool(**overrides))


def test_duplicates_and_resolve() -> None:
    registry = ToolRegistry([tool("a")])
    with pytest.raises(ConfigError, match="already registered"):
        registry.register(tool("a"))
    with pytest.raises(ConfigError, match="tool_id"):
        registry.register(tool("b", tool_id="a"))
    with pytest.raises(ToolNotFound):
        registry.resolve("b")
    assert "a" in registry and len(registry) == 1


async def test_catalog_is_frozen_at_assembly_and_fingerprinted() -> None:
    registry = ToolRegistry()
    parameters: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string"}}}
    registry.register(tool("a", parameters=parameters))
    runtime = ToolRuntime(registry, config={})
    with pytest.raises(ConfigError, match="frozen"):
        registry.register(tool("b"))
    before = runtime.catalog()
    parameters["properties"]["text"]["type"] = "integer"  # the registry kept its own copy
    assert runtime.catalog() == before
    registry.check_catalog(before)
    with pytest.raises(ResumeMismatch) as info:
        registry.check_catalog({"a": "0" * 64, "gone": "1" * 64})
    assert info.value.details == {"missing": ["gone"], "added": [], "changed": ["a"]}
    assert "missing: gone; changed: a" in info.value.message
    with pytest.raises(ResumeMismatch, match=r"\(added: a\)"):
        registry.check_catalog({})
    await runtime.aclose()


def test_schema_checks_are_cached_by_content(monkeypatch: pytest.MonkeyPatch) -> None:
    checks: list[Any] = []
    original = Draft202012Validator.check_schema

    def counting(schema: Any, *args: Any, **kwargs: Any) -> None:
        checks.append(schema)
        original(schema, *args, **kwargs)

    monkeypatch.setattr(registry_module, "_CHECKED", {})
    monkeypatch.setattr(Draft202012Validator, "check_schema", counting)
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 7}}}
    first, second = ToolRegistry([tool("a", parameters=schema)]), ToolRegistry()
    second.register(tool("a", parameters={**schema}))  # equal content, another dict
    second.register(tool("b", parameters=schema))
    assert len(checks) == 1
    assert first.validate("a", {"n": 3}) == second.validate("b", {"n": 3}) != []
    bad = {"type": "object", "properties": {"n": {"type": 12}}}
    for _ in range(2):  # an invalid schema is refused every time, never cached
        with pytest.raises(ConfigError, match="invalid parameters schema"):
            ToolRegistry([tool("c", parameters=bad)])
    assert len(checks) == 3


@pytest.mark.parametrize("change", [
    {"parameters": {"type": "object", "properties": {"text": {"type": "integer"}}}},
    {"description": "another description"},
    {"implementation_id": "echo/v2"},
    {"resume_inflight": True},
    {"evidence_fields": ("text",)},
])
def test_fingerprint_changes_with_contract_fields(change: dict[str, Any]) -> None:
    base = tool()
    assert dataclasses.replace(base, **change).fingerprint() != base.fingerprint()
    same_code_new_handler = dataclasses.replace(base, handler=lambda c, a: returns(None))
    assert same_code_new_handler.fingerprint() == base.fingerprint()


async def test_external_bus_releases_only_its_own_topic() -> None:
    bus = EventBus()

    async def other(event: Event) -> str:
        return "still here"

    bus.register("other", other)
    runtime = runtime_with(tool(), bus=bus)
    with pytest.raises(ConfigError, match="already has a handler"):
        runtime_with(tool(), bus=bus)  # one tool.execute handler per bus
    await runtime.aclose()
    await runtime.aclose()  # idempotent
    assert not bus.closed
    assert await bus.request("other", None) == "still here"
    runtime_with(tool(), bus=bus)  # the topic is free again
    await bus.aclose()
    own = runtime_with(tool())
    await own.aclose()
    assert own.bus.closed
    assert own.checkpoint_config() == {"catalog": own.catalog(), "max_visible_chars": 24_000}
