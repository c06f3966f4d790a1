"""update_plan: whole-plan submissions, its rules, and reasons for real changes only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentloom_runtime.contracts import ToolRequest
from agentloom_runtime.errors import ConfigError, ToolArgumentsError
from agentloom_runtime.planning import plan_is_open, plan_tool, validate_plan
from agentloom_runtime.tool_contracts import ToolContext
from agentloom_runtime.tools import PreparedCall, ToolRegistry, ToolRuntime


class MemoryPlan:
    """A PlanAccess over a list, as the engine's frame plan would be."""

    def __init__(self, steps: list[dict[str, Any]] | None = None) -> None:
        self.steps = list(steps or [])
        self.writes = 0

    def get(self) -> list[dict[str, Any]]:
        return [dict(s) for s in self.steps]

    def replace(self, steps: list[dict[str, Any]]) -> None:
        self.steps = [dict(s) for s in steps]
        self.writes += 1


def step(step_id: str, status: str = "pending", title: str | None = None) -> dict[str, str]:
    return {"id": step_id, "title": title or f"do {step_id}", "status": status}


@pytest.fixture
async def runtime() -> Any:
    rt = ToolRuntime(ToolRegistry([plan_tool()]), config={})
    yield rt
    await rt.aclose()


async def submit(runtime: ToolRuntime, plan: MemoryPlan | None, **arguments: Any) -> Any:
    def context_for(prepared: PreparedCall) -> ToolContext:
        return ToolContext(config={}, instance="main", run_id="r", call_id="c",
                           request_id="q", plan=plan)

    request = ToolRequest(call_id="c", name="update_plan", arguments=json.dumps(arguments),
                          request_id="q")
    return await runtime.execute(request, context_for)


def test_definition() -> None:
    definition = plan_tool()
    assert definition.name == "update_plan"
    assert definition.implementation_id == "update-plan/v1"
    assert definition.before_plan and definition.resume_inflight
    ToolRegistry([definition])  # a valid Draft 2020-12 object schema


async def test_creates_then_progresses_without_a_reason(runtime: ToolRuntime) -> None:
    plan = MemoryPlan()
    outcome = await submit(runtime, plan, steps=[step("a", "in_progress"), step("b")])
    assert outcome.status == "ok"
    assert plan.steps == [step("a", "in_progress"), step("b")]
    assert json.loads(outcome.value)["open"] is True
    # Forward progress of the same steps is not a change.
    outcome = await submit(runtime, plan, steps=[step("a", "completed"), step("b", "completed")])
    assert outcome.status == "ok"
    assert json.loads(outcome.value) == {"plan": plan.steps, "open": False}


@pytest.mark.parametrize("new_steps", [
    [step("a"), step("b"), step("c")],  # added
    [step("a")],  # removed
    [step("a", title="something else"), step("b")],  # renamed
    [step("b"), step("a")],  # reordered
    [step("a", "cancelled"), step("b")],  # cancelled
])
async def test_changing_an_existing_plan_needs_a_reason(runtime: ToolRuntime,
                                                        new_steps: list[Any]) -> None:
    plan = MemoryPlan([step("a"), step("b")])
    for reason in (None, "   "):
        arguments = {"steps": new_steps} | ({"reason": reason} if reason is not None else {})
        refused = await submit(runtime, plan, **arguments)
        assert (refused.status, refused.error_code) == ("error", "tool_arguments_invalid")
        assert "non-empty 'reason'" in refused.value["error"]["message"]
        assert plan.writes == 0
    accepted = await submit(runtime, plan, steps=new_steps, reason="the tests revealed more")
    assert accepted.status == "ok" and plan.steps == new_steps


async def test_reopening_a_completed_step_is_a_change(runtime: ToolRuntime) -> None:
    plan = MemoryPlan([step("a", "completed")])
    refused = await submit(runtime, plan, steps=[step("a", "in_progress")])
    assert refused.error_code == "tool_arguments_invalid"


async def test_resubmitting_the_same_plan_is_idempotent(runtime: ToolRuntime) -> None:
    # resume_inflight: a replay after an interruption must succeed without a reason.
    plan = MemoryPlan([step("a", "in_progress")])
    outcome = await submit(runtime, plan, steps=[step("a", "in_progress")])
    assert outcome.status == "ok"


@pytest.mark.parametrize(("steps", "fragment"), [
    ([], "$.steps: [] should be non-empty"),
    ([step(str(i)) for i in range(13)], "is too long"),
    ([step("a"), step("a")], "ids must be unique; repeated: a"),
    ([step("a", "in_progress"), step("b", "in_progress")], "at most one step"),
    ([step("a", "done")], "is not one of"),
    ([{"id": "a", "title": "t"}], "'status' is a required property"),
    ([{"id": " ", "title": "t", "status": "pending"}], "steps[0].id must be a non-empty"),
    ([step("a") | {"extra": 1}], "Additional properties"),
])
async def test_invalid_plans_are_clear_error_results(runtime: ToolRuntime, steps: list[Any],
                                                     fragment: str) -> None:
    plan = MemoryPlan()
    outcome = await submit(runtime, plan, steps=steps)
    assert (outcome.status, outcome.error_code) == ("error", "tool_arguments_invalid")
    message = outcome.value["error"]["message"]
    assert fragment in message
    assert plan.writes == 0


async def test_missing_plan_access_is_a_host_error(runtime: ToolRuntime) -> None:
    with pytest.raises(ConfigError, match=r"ToolContext\.plan"):
        await submit(runtime, None, steps=[step("a")])


def test_validate_plan_is_pure_and_normalizes() -> None:
    steps = [{"id": " a ", "title": "  write tests ", "status": "pending", "note": "x"}]
    assert validate_plan(steps) == [{"id": "a", "title": "write tests", "status": "pending"}]
    assert steps[0]["id"] == " a "  # input untouched
    with pytest.raises(ToolArgumentsError) as info:
        validate_plan([step("a", "in_progress"), step("a", "in_progress"), "x"])
    message = info.value.message
    assert "steps[2] must be an object" in message
    assert "repeated: a" in message and "at most one step may be in_progress" in message
    with pytest.raises(ToolArgumentsError, match="steps must be a list"):
        validate_plan("not a list")
    with pytest.raises(ToolArgumentsError, match="reason must be a string"):
        validate_plan([step("a")], [], reason=5)
    assert validate_plan([step("b")], [step("a")], reason="replanned") == [step("b")]


def test_plan_is_open() -> None:
    assert not plan_is_open([])
    assert plan_is_open([step("a", "completed"), step("b", "pending")])
    assert plan_is_open([step("a", "in_progress")])
    assert not plan_is_open([step("a", "completed"), step("b", "cancelled")])
