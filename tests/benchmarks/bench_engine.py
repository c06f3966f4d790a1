"""Engine overhead per cycle and bytes persisted per step, at 10 and 500 messages.

Run: python tests/benchmarks/bench_engine.py
A cycle is one step (an action model call or a tool call). Overhead is the wall time of
``step()`` minus the time spent inside the model double, with the in-memory store.
Targets (issue 2): <= 2 ms per cycle at 500 messages; bytes/step at 500 / at 10 <= 1.5.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.engine import SideEffects, make_snapshot

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.context import NoCompaction
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.engine import create_engine
from agentloom_runtime.testing import ScriptedModel

CYCLES = 200


class TimedModel:
    """ScriptedModel, with the time spent inside it measured so it can be subtracted."""

    module_id = "scripted/v1"

    def __init__(self, steps: list[Any]) -> None:
        self.inner = ScriptedModel(steps)
        self.seconds = 0.0

    def checkpoint_config(self) -> dict[str, Any]:
        return {}

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        start = time.perf_counter()
        try:
            return await self.inner.invoke(request)
        finally:
            self.seconds += time.perf_counter() - start

    async def aclose(self) -> None:
        await self.inner.aclose()


def history(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n // 2):
        out.append({"role": "user", "content": f"question {i}: " + "lorem ipsum " * 20})
        out.append({"role": "assistant", "content": f"answer {i}: " + "dolor sit amet " * 20})
    return out


def five_hooks() -> tuple[Any, list[dict[str, Any]]]:
    """Five replay-safe hooks on each of model.chat.before and model.chat.after."""
    from agentloom_runtime.hooks import Continue, HookDefinition, HookRegistry

    async def noop(ctx: Any, payload: dict[str, Any]) -> Continue:
        return Continue()

    registry = HookRegistry([HookDefinition(f"h{i}", "1", noop, replay_safe=True)
                             for i in range(5)])
    bindings = [{"hook_id": f"h{i}", "version": "1", "point": point}
                for point in ("model.chat.before", "model.chat.after") for i in range(5)]
    return registry, bindings


async def measure(n: int, compaction: bool, hooks: bool = False) -> dict[str, float]:
    steps = []
    for i in range(CYCLES // 2 + 1):
        steps.append(ScriptedModel.call("count_words", {"text": f"a b c {i}"}, id=f"c{i}"))
    model = TimedModel(steps)
    store = InMemoryCheckpointStore()
    kwargs: dict[str, Any] = {} if compaction else {"compaction_policy": NoCompaction()}
    registry, bindings = five_hooks() if hooks else (None, [])
    snapshot = make_snapshot(model={"model": "m", "context_window": 10_000_000,
                                    "max_output_tokens": 4096},
                             context_policy={}, limits={"max_model_calls": 10_000,
                                                        "max_iterations": 10_000},
                             hooks=bindings)
    engine = create_engine(snapshot, save=store, model_gateway=model,
                           tools=SideEffects().tools(), hook_registry=registry, **kwargs)
    await engine.start("benchmark", history=history(n))
    durations, sizes = [], []
    for _ in range(CYCLES):
        written, in_model = store.bytes_written, model.seconds
        start = time.perf_counter()
        await engine.step()
        durations.append(time.perf_counter() - start - (model.seconds - in_model))
        sizes.append(store.bytes_written - written)
    return {"overhead_ms": statistics.median(durations) * 1000,
            "p90_ms": sorted(durations)[int(len(durations) * 0.9)] * 1000,
            "bytes_per_step": statistics.mean(sizes)}


async def main() -> None:
    variants = [(False, False, "no compaction policy"), (True, False, "budget compaction policy"),
                (False, True, "no compaction, 5 hooks on chat before + after")]
    for compaction, hooks, label in variants:
        rows = {n: await measure(n, compaction, hooks) for n in (10, 500)}
        print(f"engine, {label}, {CYCLES} cycles each (action and tool steps alternate)")
        for n, row in rows.items():
            print(f"  {n:>4} messages: overhead median {row['overhead_ms']:.3f} ms/cycle, "
                  f"p90 {row['p90_ms']:.3f} ms; {row['bytes_per_step']:.0f} bytes/step")
        ratio = rows[500]["bytes_per_step"] / rows[10]["bytes_per_step"]
        print(f"  bytes/step at 500 / at 10 = {ratio:.2f} (target <= 1.5); "
              f"overhead at 500 = {rows[500]['overhead_ms']:.3f} ms (target <= 2 ms)")


if __name__ == "__main__":
    asyncio.run(main())
