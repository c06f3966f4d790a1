"""The stage loop: before / after callbacks, cursors, crash and resume at every cursor,
replay."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from unit.hooks.hook_fixtures import payload, scope

from agentloom_runtime.hooks import (
    HookBinding,
    HookConfigError,
    HookDefinition,
    HookManager,
    HookRegistry,
    PatchInput,
)

P = "model.chat.before"
HOOKS = ("a", "b", "c", "d")


class Crash(Exception):
    """Stands for the process dying right after a save."""


def build(calls: list[str], *, replay_safe: frozenset[str] = frozenset()) -> HookManager:
    def appender(name: str) -> Any:
        async def handler(ctx: Any, data: dict[str, Any]) -> PatchInput:
            calls.append(name)
            extra = [*data.get("extra_messages", []), {"role": "user", "content": name}]
            return PatchInput({"extra_messages": extra})
        return handler

    registry = HookRegistry([HookDefinition(n, "1", appender(n), replay_safe=n in replay_safe)
                             for n in HOOKS])
    return HookManager(registry, [HookBinding(n, "1", P) for n in HOOKS])


async def test_after_follows_every_completed_binding() -> None:
    calls: list[str] = []
    saved: list[tuple[str, int, list[str]]] = []

    async def after(binding: Any, cursor: int, data: dict[str, Any]) -> None:
        saved.append((binding.hook_id, cursor, [m["content"] for m in data["extra_messages"]]))

    outcome = await build(calls).run(P, payload(P), scope(P), after=after)
    assert saved == [("a", 1, ["a"]), ("b", 2, ["a", "b"]), ("c", 3, ["a", "b", "c"]),
                     ("d", 4, ["a", "b", "c", "d"])]
    assert outcome.cursor == 4 and calls == list(HOOKS)


async def test_before_and_after_wrap_each_binding_in_order() -> None:
    events: list[str] = []

    async def before(binding: Any, data: dict[str, Any]) -> None:
        seen = [m["content"] for m in data.get("extra_messages", [])]
        events.append(f"before {binding.hook_id} #{binding.index} {seen}")

    async def after(binding: Any, cursor: int, data: dict[str, Any]) -> None:
        events.append(f"after {binding.hook_id} {cursor}")

    mgr = HookManager(HookRegistry([HookDefinition(n, "1", _logging(events, n)) for n in HOOKS]),
                      [HookBinding(n, "1", P) for n in HOOKS])
    outcome = await mgr.run(P, payload(P), scope(P), start=1, before=before, after=after)
    assert events == ["before b #1 []", "run b", "after b 2",
                      "before c #2 ['b']", "run c", "after c 3",
                      "before d #3 ['b', 'c']", "run d", "after d 4"]
    assert outcome.cursor == 4


def _logging(events: list[str], name: str) -> Any:
    async def handler(ctx: Any, data: dict[str, Any]) -> PatchInput:
        events.append(f"run {name}")
        extra = [*data.get("extra_messages", []), {"role": "user", "content": name}]
        return PatchInput({"extra_messages": extra})
    return handler


@pytest.mark.parametrize("crash_at", [1, 2, 3, 4])
async def test_crash_and_resume_at_every_cursor(crash_at: int) -> None:
    reference = await build([]).run(P, payload(P), scope(P))
    store: dict[str, Any] = {}

    async def save_then_crash(binding: Any, cursor: int, data: dict[str, Any]) -> None:
        store.update(cursor=cursor, payload=json.loads(json.dumps(data)))  # a real save
        if cursor == crash_at:
            raise Crash

    first: list[str] = []
    with pytest.raises(Crash):
        await build(first).run(P, payload(P), scope(P), after=save_then_crash)
    assert first == list(HOOKS[:crash_at])

    resumed: list[str] = []  # a fresh manager, as after a restart
    outcome = await build(resumed).run(P, copy.deepcopy(store["payload"]), scope(P),
                                       start=store["cursor"])
    assert resumed == list(HOOKS[crash_at:])  # completed hooks never run again
    assert outcome.payload == reference.payload and outcome.cursor == len(HOOKS)


async def test_a_crash_announced_before_a_binding_leaves_it_unrun() -> None:
    calls: list[str] = []

    async def announce_then_crash(binding: Any, data: dict[str, Any]) -> None:
        if binding.hook_id == "c":
            raise Crash

    with pytest.raises(Crash):
        await build(calls).run(P, payload(P), scope(P), before=announce_then_crash)
    assert calls == ["a", "b"]


async def test_an_unfinished_hook_is_reported_for_the_replay_decision() -> None:
    started = asyncio.Event()

    async def side_effect(ctx: Any, data: dict[str, Any]) -> PatchInput:
        started.set()
        await asyncio.sleep(5)
        raise AssertionError("unreachable")

    registry = HookRegistry([HookDefinition("effect", "1", side_effect),
                             HookDefinition("pure", "1", side_effect, replay_safe=True)])
    mgr = HookManager(registry, [HookBinding("effect", "1", P), HookBinding("pure", "1", P)])
    task = asyncio.ensure_future(mgr.run(P, payload(P), scope(P)))
    await started.wait()
    task.cancel()  # the process dies while "effect" runs; the saved cursor is 0
    with pytest.raises(asyncio.CancelledError):
        await task
    effect, pure = mgr.stage(P, scope(P))
    assert mgr.replay_required(effect) is True  # replay_safe defaults to False
    assert mgr.replay_required(pure) is False


async def test_cursor_bounds() -> None:
    mgr = build([])
    done = await mgr.run(P, payload(P), scope(P), start=4)
    assert done.cursor == 4 and done.payload == payload(P)
    with pytest.raises(HookConfigError, match="cursor"):
        await mgr.run(P, payload(P), scope(P), start=5)
    with pytest.raises(HookConfigError, match="cursor"):
        await mgr.run(P, payload(P), scope(P), start=-1)


async def test_an_empty_chain_returns_the_payload_untouched() -> None:
    mgr = HookManager(HookRegistry(), [])
    data = payload(P)
    outcome = await mgr.run(P, data, scope(P))
    assert outcome.payload is data and outcome.cursor == 0 and outcome.rejected is None


async def test_a_closed_manager_runs_nothing() -> None:
    mgr = build([])
    await mgr.aclose()
    with pytest.raises(HookConfigError, match="closed"):
        await mgr.run(P, payload(P), scope(P))
