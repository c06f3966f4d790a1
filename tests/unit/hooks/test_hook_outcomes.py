"""Reject where allowed, observation hooks, and error / finally diagnostics."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from unit.hooks.hook_fixtures import POINTS, payload, returning, scope, single

from agentloom_runtime.hooks import (
    Continue,
    HookBinding,
    HookContractError,
    HookDefinition,
    HookFailure,
    HookManager,
    HookRegistry,
    PatchInput,
    PatchOutput,
    Reject,
)

REJECTABLE = ["tool.before", "context.compact.before", "run.before", "subagent.before"]


def counting(log: list[str], name: str, result: Any = None) -> Any:
    async def handler(ctx: Any, data: dict[str, Any]) -> Any:
        log.append(name)
        return Continue() if result is None else result
    return handler


def failing(exc: BaseException) -> Any:
    async def handler(ctx: Any, data: dict[str, Any]) -> Any:
        raise exc
    return handler


async def hang(ctx: Any, data: dict[str, Any]) -> Any:
    await asyncio.sleep(5)
    return Continue()


@pytest.mark.parametrize("point", REJECTABLE)
async def test_reject_stops_the_stage_where_the_point_allows_it(point: str) -> None:
    log: list[str] = []
    cursors: list[int] = []
    registry = HookRegistry([
        HookDefinition("first", "1", counting(log, "first")),
        HookDefinition("guard", "1", counting(log, "guard", Reject("not today", "spoofed"))),
        HookDefinition("never", "1", counting(log, "never")),
    ])
    mgr = HookManager(registry, [HookBinding(h, "1", point) for h in ("first", "guard", "never")])

    async def after(binding: Any, cursor: int, data: dict[str, Any]) -> None:
        cursors.append(cursor)

    outcome = await mgr.run(point, payload(point), scope(point), after=after)
    assert outcome.rejected == Reject("not today", "guard")  # the manager names the hook
    assert outcome.cursor == 2 and cursors == [1]
    assert log == ["first", "guard"]
    assert outcome.payload == payload(point)
    assert outcome.rejected.to_dict() == {"reason": "not today", "hook_id": "guard"}
    assert Reject.from_dict(outcome.rejected.to_dict()) == outcome.rejected


@pytest.mark.parametrize("point", [p for p in POINTS if p not in REJECTABLE
                                   and not p.startswith("operation.")])
async def test_reject_is_refused_where_the_point_does_not_allow_it(point: str) -> None:
    with pytest.raises(HookContractError, match="Reject is not allowed"):
        await single(point, returning(Reject("no"))).run(point, payload(point), scope(point))


# ---------------------------------------------------------------- observation hooks


@pytest.mark.parametrize("broken", [failing(RuntimeError("x")), hang])
async def test_an_observation_hook_failure_is_a_diagnostic(broken: Any) -> None:
    log: list[str] = []
    registry = HookRegistry([HookDefinition("watch", "1", broken, observation=True),
                             HookDefinition("next", "1", counting(log, "next"))])
    mgr = HookManager(registry, [HookBinding("watch", "1", "tool.before", timeout=0.05),
                                 HookBinding("next", "1", "tool.before")])
    outcome = await mgr.run("tool.before", payload("tool.before"), scope("tool.before"))
    assert log == ["next"] and outcome.rejected is None and outcome.cursor == 2
    [diag] = outcome.diagnostics
    assert diag.hook_id == "watch" and diag.kind in ("error", "timeout")
    assert set(diag.to_dict()) == {"hook_id", "version", "point", "kind", "message",
                                   "error_type"}


@pytest.mark.parametrize("result", [PatchInput({"arguments": {}}), Reject("no")])
async def test_an_observation_hook_may_only_continue(result: Any) -> None:
    mgr = single("tool.before", returning(result), observation=True)
    with pytest.raises(HookContractError, match="may only return Continue"):
        await mgr.run("tool.before", payload("tool.before"), scope("tool.before"))


async def test_an_ordinary_hook_failure_stops_the_operation() -> None:
    mgr = single("tool.before", failing(ValueError("secret detail")))
    with pytest.raises(HookFailure) as info:
        await mgr.run("tool.before", payload("tool.before"), scope("tool.before"))
    assert info.value.details["error_type"] == "ValueError"
    assert "secret detail" not in str(info.value.to_dict())


# ---------------------------------------------------------------- error / finally


class OriginalError(Exception):
    pass


@pytest.mark.parametrize("point", ["operation.error", "operation.finally"])
@pytest.mark.parametrize("broken", [failing(RuntimeError("hook bug")), hang,
                                    returning(PatchOutput({"error": None})),
                                    returning(PatchInput({"error": None})),
                                    returning(Reject("no")), returning(None)])
async def test_error_and_finally_hooks_never_replace_the_original_error(
        point: str, broken: Any) -> None:
    log: list[str] = []
    registry = HookRegistry([HookDefinition("bad", "1", broken),
                             HookDefinition("after", "1", counting(log, "after"))])
    mgr = HookManager(registry, [HookBinding("bad", "1", point, timeout=0.05),
                                 HookBinding("after", "1", point)])
    outcomes = []

    async def operation() -> None:
        try:
            raise OriginalError("the real failure")
        except OriginalError:
            outcomes.append(await mgr.run(point, payload(point), scope(point)))
            raise
        finally:
            outcomes.append(await mgr.run(point, payload(point), scope(point)))

    with pytest.raises(OriginalError, match="the real failure"):
        await operation()
    assert log == ["after", "after"]
    for outcome in outcomes:
        assert outcome.payload == payload(point) and outcome.rejected is None
        assert [d.hook_id for d in outcome.diagnostics] == ["bad"]


async def test_error_hooks_still_see_an_outside_cancellation() -> None:
    mgr = single("operation.error", hang)
    task = asyncio.ensure_future(mgr.run("operation.error", payload("operation.error"),
                                         scope("operation.error")))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
