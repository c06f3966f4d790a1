"""Hook overhead per model call: a model.chat.before + model.chat.after pair.

Run: python tests/benchmarks/bench_hooks.py
Measures ``HookManager.run`` for both stages around a model call (the model itself is
not called), with an empty chain and with a 5-hook chain per stage (three Continue, one
patch, one annotation / option change), at 20, 200 and 5,000 context messages (target:
<= 2 ms per step for 5 hooks per stage at 5,000). Handlers get a private copy of the
writable fields only and read-only views of the rest, and patches are validated field
by field, so the cost should not grow with the history. Figures only; nothing is
asserted.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from agentloom_runtime.hooks import (
    Continue,
    HookBinding,
    HookDefinition,
    HookHandler,
    HookManager,
    HookRegistry,
    HookScope,
    PatchInput,
    PatchOutput,
)

CALLS = 300
REPEATS = 5
SCOPE = HookScope(run_id="bench", instance="main", purpose="action")


async def keep(ctx: Any, payload: dict[str, Any]) -> Continue:
    return Continue()


async def add_material(ctx: Any, payload: dict[str, Any]) -> PatchInput:
    extra = [*payload.get("extra_messages", []), {"role": "user", "content": "policy note"}]
    return PatchInput({"extra_messages": extra})


async def cool_down(ctx: Any, payload: dict[str, Any]) -> PatchInput:
    return PatchInput({"options": {**payload["options"], "temperature": 0.1}})


async def rewrite(ctx: Any, payload: dict[str, Any]) -> PatchOutput:
    return PatchOutput({"content": payload["content"].replace("secret", "******")})


async def annotate(ctx: Any, payload: dict[str, Any]) -> PatchOutput:
    return PatchOutput({"annotations": {"checked": True}})


def chain(size: int) -> HookManager:
    handlers: list[tuple[str, HookHandler]] = [
        ("keep", keep), ("add_material", add_material), ("cool_down", cool_down),
        ("rewrite", rewrite), ("annotate", annotate)]
    registry = HookRegistry([HookDefinition(name, "1", h) for name, h in handlers])
    if size == 0:
        return HookManager(registry, [])
    before = ["keep", "add_material", "keep", "cool_down", "keep"]
    after = ["keep", "rewrite", "keep", "annotate", "keep"]
    bindings = [HookBinding(h, "1", "model.chat.before", order=i) for i, h in enumerate(before)]
    bindings += [HookBinding(h, "1", "model.chat.after", order=10 + i)
                 for i, h in enumerate(after)]
    return HookManager(registry, bindings)


def payloads(messages: int) -> tuple[dict[str, Any], dict[str, Any]]:
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": "x" * 400}
               for i in range(messages)]
    before = {"messages": history, "tools": [{"type": "function", "function": {
        "name": "workspace_read", "description": "read", "parameters": {"type": "object"}}}],
        "purpose": "action", "instance": "main",
        "options": {"temperature": 0.7, "max_output_tokens": 4096}}
    after = {"purpose": "action", "instance": "main", "content": "the secret answer",
             "tool_calls": [], "usage": {"total_tokens": 1234}}
    return before, after


async def per_pair(manager: HookManager, messages: int) -> float:
    before, after = payloads(messages)
    runs = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        for _ in range(CALLS):
            await manager.run("model.chat.before", before, SCOPE)
            await manager.run("model.chat.after", after, SCOPE)
        runs.append((time.perf_counter() - started) / CALLS)
    return statistics.median(runs)


async def main() -> None:
    print(f"hook overhead per model call (before + after), median of {REPEATS} x {CALLS}")
    for messages in (20, 200, 5_000):
        empty = await per_pair(chain(0), messages)
        five = await per_pair(chain(5), messages)
        print(f"  {messages:>5} messages: empty chain {empty * 1e6:8.1f} us | "
              f"5 hooks per stage {five * 1e6:8.1f} us "
              f"({five / 10 * 1e6:.1f} us per hook call)")


if __name__ == "__main__":
    asyncio.run(main())
