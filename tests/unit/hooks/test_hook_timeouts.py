"""Cooperative budgets on the loop's monotonic clock: per binding and per stage."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from unit.hooks.hook_fixtures import payload, scope

from agentloom_runtime.errors import RunError, error_from_dict
from agentloom_runtime.hooks import (
    Continue,
    HookBinding,
    HookDefinition,
    HookExecutor,
    HookFailure,
    HookManager,
    HookRegistry,
    HookTimeout,
)

P = "tool.before"


def sleeper(seconds: float, log: list[str] | None = None, name: str = "") -> Any:
    async def handler(ctx: Any, data: dict[str, Any]) -> Continue:
        await asyncio.sleep(seconds)
        if log is not None:
            log.append(name)
        return Continue()
    return handler


def manager_of(*hooks: tuple[str, Any, float], stage_timeout: float = 10.0) -> HookManager:
    registry = HookRegistry([HookDefinition(name, "1", handler) for name, handler, _ in hooks])
    bindings = [HookBinding(name, "1", P, timeout=timeout) for name, _, timeout in hooks]
    return HookManager(registry, bindings, stage_timeout=stage_timeout)


def test_default_budgets() -> None:
    assert HookBinding("h", "1", P).timeout == 1.0
    assert HookManager(HookRegistry(), []).stage_timeout == 10.0


async def test_a_binding_over_its_budget_times_out() -> None:
    mgr = manager_of(("slow", sleeper(5), 0.05))
    started = time.monotonic()
    with pytest.raises(HookTimeout) as info:
        await mgr.run(P, payload(P), scope(P))
    assert time.monotonic() - started < 1.0
    assert info.value.details["budget"] == "binding"
    assert info.value.details["hook_id"] == "slow"
    assert isinstance(info.value, HookFailure) and isinstance(info.value, RunError)


async def test_the_stage_budget_is_shared_by_its_bindings() -> None:
    log: list[str] = []
    budget = 0.25
    mgr = manager_of(("one", sleeper(0.6 * budget, log, "one"), 1.0),
                     ("two", sleeper(0.6 * budget, log, "two"), 1.0),
                     ("three", sleeper(0.6 * budget, log, "three"), 1.0),
                     stage_timeout=budget)
    with pytest.raises(HookTimeout) as info:
        await mgr.run(P, payload(P), scope(P))
    assert log == ["one"]  # each binding is within its own timeout; the second is not
    assert info.value.details == {"hook_id": "two", "version": "1", "point": P,
                                  "budget": "stage"}


async def test_each_call_gets_a_fresh_stage_budget() -> None:
    log: list[str] = []
    mgr = manager_of(("one", sleeper(0.15, log, "one"), 1.0), stage_timeout=0.25)
    for _ in range(3):  # 0.45 s in all: the budget is per call of run, not per manager
        await mgr.run(P, payload(P), scope(P))
    assert log == ["one"] * 3


async def test_time_in_the_callbacks_does_not_count_against_the_stage_budget() -> None:
    log: list[str] = []
    mgr = manager_of(("one", sleeper(0.1, log, "one"), 1.0),
                     ("two", sleeper(0.1, log, "two"), 1.0), stage_timeout=0.25)

    async def slow_save(*args: Any) -> None:
        await asyncio.sleep(0.1)  # a slow checkpoint write, not the hooks' time

    outcome = await mgr.run(P, payload(P), scope(P), before=slow_save, after=slow_save)
    assert log == ["one", "two"] and outcome.cursor == 2


async def test_a_spent_stage_budget_stops_before_calling_the_handler() -> None:
    called: list[str] = []

    async def late(ctx: Any, data: dict[str, Any]) -> Continue:
        called.append("late")
        return Continue()

    executor = HookExecutor()
    deadline = asyncio.get_running_loop().time() - 0.001
    ctx = executor.context(hook_id="late", hook_version="1", config={}, scope=scope(P),
                           timeout=1.0, stage_deadline=deadline)
    with pytest.raises(HookTimeout, match="stage budget is spent"):
        await executor.call(late, ctx, payload(P), limit=1.0, stage_deadline=deadline)
    assert called == []


async def test_a_handler_that_swallows_cancellation_still_times_out() -> None:
    async def stubborn(ctx: Any, data: dict[str, Any]) -> Continue:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            pass  # ignores the cancellation and returns a (late) result
        return Continue()

    with pytest.raises(HookTimeout):
        await manager_of(("stubborn", stubborn, 0.05)).run(P, payload(P), scope(P))


async def test_a_blocking_handler_over_budget_is_a_timeout_after_the_fact() -> None:
    async def blocking(ctx: Any, data: dict[str, Any]) -> Continue:
        time.sleep(0.08)  # noqa: ASYNC251 - deliberately blocks the loop
        return Continue()

    with pytest.raises(HookTimeout):
        await manager_of(("blocking", blocking, 0.03)).run(P, payload(P), scope(P))


async def test_a_handler_raising_timeout_error_is_a_failure_not_a_timeout() -> None:
    async def raises(ctx: Any, data: dict[str, Any]) -> Continue:
        raise TimeoutError("the handler's own upstream timed out")

    with pytest.raises(HookFailure) as info:
        await manager_of(("own", raises, 1.0)).run(P, payload(P), scope(P))
    assert not isinstance(info.value, HookTimeout)
    assert info.value.details["error_type"] == "TimeoutError"
    assert "upstream" not in info.value.message  # the handler's message is not carried
    assert isinstance(info.value.__cause__, TimeoutError)


async def test_remaining_seconds_uses_the_earlier_of_binding_and_stage_deadline() -> None:
    seen: list[float] = []

    async def probe(ctx: Any, data: dict[str, Any]) -> Continue:
        seen.append(ctx.remaining_seconds())
        await asyncio.sleep(0.05)
        seen.append(ctx.remaining_seconds())
        seen.append(ctx.deadline - time.time())
        return Continue()

    await manager_of(("p", probe, 0.5)).run(P, payload(P), scope(P))
    assert 0.4 < seen[0] <= 0.5 and seen[1] < seen[0] - 0.04
    assert 0.3 < seen[2] <= 0.5  # wall clock, display only
    seen.clear()
    await manager_of(("p", probe, 5.0), stage_timeout=0.3).run(P, payload(P), scope(P))
    assert seen[0] <= 0.3


async def test_an_outside_cancellation_propagates_unchanged() -> None:
    mgr = manager_of(("slow", sleeper(5), 10.0))
    task = asyncio.ensure_future(mgr.run(P, payload(P), scope(P)))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_hook_errors_survive_a_durable_round_trip() -> None:
    with pytest.raises(HookTimeout) as info:
        await manager_of(("slow", sleeper(5), 0.02)).run(P, payload(P), scope(P))
    again = error_from_dict(info.value.to_dict())
    assert type(again) is HookTimeout and again.details == info.value.details
