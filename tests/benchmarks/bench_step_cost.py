"""Engine v2 cost per step, at 10 / 500 / 5,000 messages of inherited history.

Run: .venv/bin/python tests/benchmarks/bench_step_cost.py   (prints figures; asserts none)

A cycle is one model+tool pair: an action step whose answer calls ``count_words`` and
the tool step that runs it. Figures (issue 8 targets in brackets):
- head bytes at steady state                                   [≤ 2 KB]
- SQLite WAL bytes per cycle (autocheckpoint off, WAL file growth)
- DynamoDB write units per cycle, from the item sizes the adapter writes (moto),
  transactional writes at 2 units per KB                       [≤ 20]
- warm step overhead (in-memory store, time inside the model subtracted)
- cold attach + first step on SQLite (a new engine on an existing run) [≤ 5 ms at 500]
- the budget policy's model-call step above no policy, at 10 / 1,000 / 10,000 messages
                                                                [≤ 1 ms at 10,000]
- 5 hooks per chat stage (before + after), extra per step       [≤ 2 ms at 5,000]
- ``import agentloom.cli`` in a fresh interpreter                [≤ 250 ms]
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
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

WINDOW = 10_000_000  # the budget policy measures every step but never triggers


class CountingModel:
    """Every action calls count_words; time inside the model is measured."""

    module_id = "bench-model/v1"

    def __init__(self) -> None:
        self.seconds = 0.0
        self.n = 0

    def checkpoint_config(self) -> dict[str, Any]:
        return {}

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        start = time.perf_counter()
        self.n += 1
        response = ScriptedModel.call("count_words", {"text": f"a b c {self.n}"},
                                      id=f"c{self.n}")
        self.seconds += time.perf_counter() - start
        return response

    async def aclose(self) -> None:
        return None


def history(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n // 2):
        out.append({"role": "user", "content": f"question {i}: " + "lorem ipsum " * 20})
        out.append({"role": "assistant", "content": f"answer {i}: " + "dolor sit amet " * 20})
    return out


def hooks(count: int) -> tuple[Any, list[dict[str, Any]]]:
    from agentloom_runtime.hooks import Continue, HookDefinition, HookRegistry

    async def noop(ctx: Any, payload: dict[str, Any]) -> Continue:
        return Continue()

    registry = HookRegistry([HookDefinition(f"h{i}", "1", noop, replay_safe=True)
                             for i in range(count)])
    bindings = [{"hook_id": f"h{i}", "version": "1", "point": point}
                for point in ("model.chat.before", "model.chat.after") for i in range(count)]
    return registry, bindings


def build(store: Any, *, budget: bool = False, hook_count: int = 0,
          run_id: str | None = None, model: Any = None) -> Any:
    registry, bindings = hooks(hook_count) if hook_count else (None, [])
    snapshot = make_snapshot(model={"model": "m", "context_window": WINDOW,
                                    "max_output_tokens": 4096},
                             limits={"max_model_calls": 10_000, "max_iterations": 10_000,
                                     "max_tokens": 10**12},  # 10,000 messages per call
                             hooks=bindings)
    kwargs: dict[str, Any] = {} if budget else {"compaction_policy": NoCompaction()}
    return create_engine(snapshot, save=store, model_gateway=model or CountingModel(),
                         tools=SideEffects().tools(), hook_registry=registry,
                         checkpoint=run_id, **kwargs)


async def cycles(engine: Any, count: int) -> None:
    for _ in range(2 * count):
        await engine.step()


def head_bytes(store: Any, run_id: str) -> int:
    head = store.load_head(run_id)
    return len(json.dumps(head.body, separators=(",", ":")).encode())


async def steady_head(n: int) -> int:
    store = InMemoryCheckpointStore()
    engine = build(store)
    run_id = await engine.start("benchmark", history=history(n))
    await cycles(engine, 30)
    return head_bytes(store, run_id)


async def sqlite_wal_per_cycle(n: int) -> float:
    from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite3"
        store = SqliteCheckpointStore(path)
        store._conn().execute("PRAGMA wal_autocheckpoint = 0")  # measure WAL growth
        engine = build(store)
        await engine.start("benchmark", history=history(n))
        await cycles(engine, 3)
        wal = str(path) + "-wal"
        before = os.stat(wal).st_size
        await cycles(engine, 20)
        grown = os.stat(wal).st_size - before
        store.close()
        return grown / 20


async def dynamodb_units_per_cycle(n: int) -> tuple[float, float]:
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    import boto3
    from moto import mock_aws

    from agentloom.stores.dynamodb_checkpoints import DynamoDbCheckpointStore, create_table

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "bench")
        store = DynamoDbCheckpointStore("bench", client=client)
        engine = build(store)
        await engine.start("benchmark", history=history(n))
        await cycles(engine, 2)
        units, items = store.write_units, store.items_written
        await cycles(engine, 10)
        return (store.write_units - units) / 10, (store.items_written - items) / 10


async def warm_overhead(n: int, **kwargs: Any) -> float:
    """Median wall time of a step minus the time inside the model (ms)."""
    model = CountingModel()
    engine = build(InMemoryCheckpointStore(), model=model, **kwargs)
    await engine.start("benchmark", history=history(n))
    await cycles(engine, 5)
    durations = []
    for _ in range(60):
        in_model = model.seconds
        start = time.perf_counter()
        result = await engine.step()
        if result.kind == "action":
            durations.append(time.perf_counter() - start - (model.seconds - in_model))
    return statistics.median(durations) * 1000


async def cold_attach(n: int) -> float:
    """A new engine attaches to a run on SQLite and performs one step (ms)."""
    from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore

    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteCheckpointStore(Path(tmp) / "bench.sqlite3", synchronous="NORMAL")
        engine = build(store)
        run_id = await engine.start("benchmark", history=history(n))
        await cycles(engine, 5)
        times = []
        for _ in range(9):
            start = time.perf_counter()
            fresh = build(store, run_id=run_id)
            await fresh.step()
            times.append(time.perf_counter() - start)
        store.close()
        return statistics.median(times) * 1000


def import_cli_ms() -> float:
    code = "import time; t=time.perf_counter(); import agentloom.cli; " \
           "print(time.perf_counter()-t)"
    runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                 text=True, check=True).stdout) for _ in range(5)]
    return statistics.median(runs) * 1000


async def main() -> None:
    sizes = (10, 500, 5_000)
    print("Engine v2 step cost (one cycle = action step + tool step)")
    for n in sizes:
        head = await steady_head(n)
        wal = await sqlite_wal_per_cycle(n)
        units, items = await dynamodb_units_per_cycle(n)
        warm = await warm_overhead(n)
        cold = await cold_attach(n)
        print(f"  {n:>5} messages: head {head} B [≤ 2048]; SQLite WAL {wal:,.0f} B/cycle; "
              f"DynamoDB {units:.1f} WCU/cycle [≤ 20] ({items:.1f} items); warm action "
              f"step {warm:.3f} ms; cold attach + step {cold:.2f} ms")
    print("budget policy, model-call step above no policy:")
    for n in (10, 1_000, 10_000):
        base = await warm_overhead(n)
        policy = await warm_overhead(n, budget=True)
        print(f"  {n:>6} messages: {policy:.3f} ms vs {base:.3f} ms → "
              f"+{policy - base:.3f} ms [≤ 1 ms at 10,000]")
    base = await warm_overhead(5_000)
    hooked = await warm_overhead(5_000, hook_count=5)
    print(f"5 hooks per chat stage at 5,000 messages: {hooked:.3f} ms vs {base:.3f} ms → "
          f"+{hooked - base:.3f} ms per step [≤ 2 ms]")
    print(f"import agentloom.cli: {import_cli_ms():.0f} ms [≤ 250 ms]")


if __name__ == "__main__":
    asyncio.run(main())
