"""The floor on one machine: AgentLoom's cost per step beside its peers' (issue 18).

    python tests/benchmarks/bench_floor.py [--peers /tmp/peers/bin/python] [--steps 20]

A step is one tool call and its result: the model double answers at once with one call
(400-character arguments), the tool returns 400 characters (the texts:
``_floor_workload.py``). For AgentLoom that is two engine steps, the model step and the
tool step: three commits (the guard commits the model call before it is sent), four for a
side-effecting tool (its dispatch is committed before it runs: the ``guarded`` row).
History: L = 10 / 500 / 5,000 messages loaded first, 3 warm-up steps, then ``--steps``
measured. Per step: CPU (``time.process_time``), wall
(``time.perf_counter``), WAL bytes (growth of the ``-wal`` file, autocheckpoint off);
every SQLite file in ``synchronous=FULL``.

- ``memory``: the engine on ``InMemoryCheckpointStore``;
- ``sqlite``: on ``SqliteCheckpointStore`` (plaintext, no companion);
- ``guarded``: the same, the tool declared side-effecting;
- ``home``: the embedded mode as ``agentloom run`` wires it (``local.home.open_home``:
  encrypted checkpoints, the platform's ``SessionCommits`` companion in each commit, the
  engine's events through ``RunTracker.event``), with a session and a run;
- ``cold``: a new engine attaching to the run on ``sqlite`` and its first step, with
  the default budget policy (bytes estimator; ``o200k``: the OpenAI tokenizer), every
  text cache cleared first (as in a new process), median of 7 (wall, and CPU); model
  step / tool step. The main rows use the default budget policy too (it never triggers:
  a 10M window);
- ``fsync floor``: a bare SQLite commit of one small row (FULL, WAL) in the same
  directory; ``floor`` per step = that × AgentLoom's commits per step.

The peers (``_floor_peers.py``) run in a subprocess of ``--peers`` (an interpreter whose
environment has ``langgraph``, ``langgraph-checkpoint-sqlite``, ``openai-agents``; they are
no project dependency); without it: "peers not measured". Ratios are AgentLoom's CPU
over the best peer's (on a file: LangGraph's SQLite checkpointer or openai-agents'
SQLiteSession; in memory: LangGraph's ``DeltaChannel`` on ``InMemorySaver``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._floor_workload import RESULT, TEXT, argument, history
from support.engine import make_snapshot

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.context import NoCompaction
from agentloom_runtime.context.estimators import clear_text_caches
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.engine import create_engine
from agentloom_runtime.testing import ScriptedModel
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

SIZES = (10, 500, 5_000)
WARM = 3
KINDS = ("memory", "sqlite", "guarded", "home")
COLD_RUNS = 7
REPEAT = 3  # runs of each row; the least CPU and wall of them are printed (load noise)
PEERS = Path(__file__).with_name("_floor_peers.py")
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}},
          "required": ["text"], "additionalProperties": False}


class ToolModel:
    """Every answer is one ``lookup`` call with 400 characters of arguments."""

    module_id = "bench-floor/v1"

    def __init__(self) -> None:
        self.n = 0

    def checkpoint_config(self) -> dict[str, Any]:
        return {}

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        self.n += 1
        return ScriptedModel.call("lookup", {"text": argument(self.n)},
                                  id=f"c{self.n}")

    async def aclose(self) -> None:
        return None


async def lookup(context: ToolContext, arguments: dict[str, Any]) -> Any:
    return RESULT


# The lookup is declared as the platform's own read-only tools are (read_file, grep, the
# skill and knowledge tools: ``resume_inflight``, safe to run again), so a step is three
# commits; GUARDED is the same tool declared side-effecting: its dispatch is committed
# before it runs (a fourth commit), the ``guarded`` row.
TOOLS = [ToolDefinition(name="lookup", description="look the text up", parameters=SCHEMA,
                        handler=lookup, implementation_id="lookup/v1", read_only=True,
                        resume_inflight=True)]
GUARDED = [ToolDefinition(name="lookup", description="look the text up", parameters=SCHEMA,
                          handler=lookup, implementation_id="lookup/v1")]


def build(store: Any, *, policy: bool = False, run_id: str | None = None,
          estimator: str | None = None, emit: Any = None, guarded: bool = False) -> Any:
    model: dict[str, Any] = {"model": "m", "context_window": 10_000_000,
                             "max_output_tokens": 4096}
    if estimator:
        model["estimator"] = estimator
    snapshot = make_snapshot(model=model, limits={"max_model_calls": 10_000,
                                                  "max_iterations": 10_000})
    kwargs: dict[str, Any] = {} if policy else {"compaction_policy": NoCompaction()}
    return create_engine(snapshot, save=store, model_gateway=ToolModel(),
                         tools=GUARDED if guarded else TOOLS,
                         checkpoint=run_id, emit=emit, **kwargs)


def wal_size(path: Path | None) -> int:
    if path is None:
        return 0
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


async def measure(step: Callable[[], Awaitable[Any]], count: int,
                  path: Path | None) -> dict[str, float]:
    wal = wal_size(path)
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(count):
        await step()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"cpu_ms": cpu / count * 1000, "wall_ms": wall / count * 1000,
            "wal_bytes": (wal_size(path) - wal) / count if path else 0.0}


async def ours(kind: str, size: int, steps: int, tmp: Path) -> dict[str, float]:
    os.makedirs(tmp)
    path: Path | None = None
    emit = None
    if kind == "memory":
        store: Any = InMemoryCheckpointStore()
        run_id = None
    elif kind in ("sqlite", "guarded"):
        from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore

        path = tmp / f"sqlite-{size}.sqlite3"
        store = SqliteCheckpointStore(path)
        run_id = None
    else:
        store, run_id, emit, path, home = _home(tmp / f"home-{size}")
    engine = build(store, emit=emit, policy=True, guarded=kind == "guarded")
    await engine.start("benchmark", history=history(size), run_id=run_id)
    if kind == "home":
        home.tracker.started(*_session_run(home, engine.run_id))
    if path is not None:  # every connection writing the file: the WAL only grows
        store._conn().execute("PRAGMA wal_autocheckpoint = 0")
    if kind == "home":
        home.platform.items.inner._conn().execute("PRAGMA wal_autocheckpoint = 0")

    async def cycle() -> None:
        await engine.step()
        await engine.step()

    for _ in range(WARM):
        await cycle()
    if path is not None:  # an empty WAL, so that it grows from here (no restart)
        store._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    writers = [store] if kind != "home" else [store, home.platform.items.inner]
    commits = sum(_commits(w) for w in writers)
    figures = await measure(cycle, steps, path)
    figures["commits"] = (sum(_commits(w) for w in writers) - commits) / steps
    if kind == "home":
        home.close()
    elif path is not None:
        store.close()
    return figures


_COUNTS: dict[int, int] = {}


def _commits(store: Any) -> int:
    """Transactions so far (each one fsync in FULL), counted by wrapping the store's
    ``_write`` (checkpoints) or ``_transact`` (platform items) once."""
    name = "_write" if hasattr(store, "_write") else "_transact"
    if id(store) not in _COUNTS:
        _COUNTS[id(store)] = 0
        write = getattr(store, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            result = write(*args, **kwargs)
            _COUNTS[id(store)] += 1
            return result

        setattr(store, name, counted)
    return _COUNTS[id(store)]


_SESSIONS: dict[str, tuple[str, str]] = {}


def _home(directory: Path) -> tuple[Any, str, Any, Path, Any]:
    from agentloom.local.home import open_home
    from agentloom.platform.domain import Run, Session, new_id, now
    from agentloom.platform.redaction import Redactor

    home = open_home(directory, Redactor())
    session = Session(session_id=new_id("ses"), space_id="spc_bench", agent_id="agt_bench",
                      version=1, user_id="alice", created_at=now())
    home.platform.sessions.create(session)
    current = home.platform.sessions.get(session.session_id)
    assert current is not None
    run = Run(run_id=new_id("run"), session_id=session.session_id,
              space_id=session.space_id, agent_id=session.agent_id, version=1,
              user_id="alice", created_at=now(), updated_at=now())
    home.platform.runs.start(current, run)
    _SESSIONS[run.run_id] = (session.session_id, run.run_id)

    def emit(topic: Any, data: Any) -> None:
        home.tracker.event(run.run_id, topic, data)

    return home.checkpoints, run.run_id, emit, directory / "agentloom.sqlite3", home


def _session_run(home: Any, run_id: str) -> tuple[str, str]:
    return _SESSIONS[run_id]


async def cold(size: int, tmp: Path, estimator: str | None) -> dict[str, float]:
    """A new engine attaching to the run and its first step: median wall and CPU (ms)
    per kind of step."""
    from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore

    store = SqliteCheckpointStore(tmp / f"cold-{size}-{estimator}.sqlite3")
    engine = build(store, policy=True, estimator=estimator)
    run_id = await engine.start("benchmark", history=history(size))
    for _ in range(WARM):
        await engine.step()
        await engine.step()
    times: dict[str, list[float]] = {}
    for _ in range(2 * COLD_RUNS):
        clear_text_caches()
        cpu, start = time.process_time(), time.perf_counter()
        fresh = build(store, policy=True, run_id=run_id, estimator=estimator)
        result = await fresh.step()
        times.setdefault(result.kind, []).append((time.perf_counter() - start) * 1000)
        times.setdefault(f"{result.kind} cpu", []).append((time.process_time() - cpu) * 1000)
    store.close()
    return {kind: statistics.median(values) for kind, values in times.items()}


def fsync_floor(tmp: Path, count: int = 50) -> dict[str, float]:
    """A bare commit of one small row, FULL sync, WAL mode (wall and CPU per commit)."""
    tmp.mkdir(parents=True)
    conn = sqlite3.connect(tmp / "floor.sqlite3", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
    for i in range(5):
        conn.execute("INSERT INTO t (v) VALUES (?)", (f"warm {i}",))
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(count):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT OR REPLACE INTO t (k, v) VALUES (1, ?)", (f"row {i}",))
        conn.execute("COMMIT")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    conn.close()
    return {"wall_ms": wall / count * 1000, "cpu_ms": cpu / count * 1000}


def peers(python: str, steps: int) -> list[dict[str, Any]]:
    done = subprocess.run([python, str(PEERS), "--sizes", ",".join(map(str, SIZES)),
                           "--steps", str(steps), "--repeat", str(REPEAT)],
                          capture_output=True, text=True, check=False,
                          cwd=tempfile.gettempdir(), env={
                              k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    if done.returncode:
        print(f"peers failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def best(found: list[dict[str, Any]], size: int, on_file: bool) -> dict[str, Any] | None:
    rows = [r for r in found if r["size"] == size and r["file"] == on_file and "cpu_ms" in r]
    return min(rows, key=lambda r: r["cpu_ms"]) if rows else None


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--peers", help="an interpreter with the peers installed")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as name:
        tmp = Path(name)
        floors = [fsync_floor(tmp / f"floor-{i}") for i in range(REPEAT)]
        floor = {key: min(f[key] for f in floors) for key in floors[0]}
        print(f"fsync floor (one small row, FULL, WAL): {floor['wall_ms']:.3f} ms wall, "
              f"{floor['cpu_ms']:.3f} ms CPU per commit")
        rows = {}
        for kind in KINDS:
            for size in SIZES:
                runs = [await ours(kind, size, args.steps, tmp / f"{kind}-{size}-{i}")
                        for i in range(REPEAT)]
                rows[(kind, size)] = {key: min(run[key] for run in runs) for key in runs[0]}
        found = peers(args.peers, args.steps) if args.peers else []
        print(f"per step = one tool call + result ({TEXT}-char arguments and result), "
              f"{args.steps} steps after {WARM} warm-up; the least of {REPEAT} runs")
        if not args.peers:
            print("peers not measured (give --peers <python with langgraph, "
                  "langgraph-checkpoint-sqlite, openai-agents>)")
        for peer in found:
            figures = (f"CPU {peer['cpu_ms']:.3f} ms, wall {peer['wall_ms']:.3f} ms, WAL "
                       f"{peer['wal_bytes'] / 1024:.1f} KB" if "cpu_ms" in peer
                       else peer["error"])
            print(f"  peer {peer['peer']:<24} L={peer['size']:>5}: {figures}")
        for kind in KINDS:
            for size in SIZES:
                row = rows[(kind, size)]
                line = (f"  agentloom {kind:<7} L={size:>5}: CPU {row['cpu_ms']:.3f} ms, "
                        f"wall {row['wall_ms']:.3f} ms")
                if kind != "memory":
                    extra = row["wall_ms"] - row["commits"] * floor["wall_ms"]
                    line += (f" (floor {row['commits']:.0f} × {floor['wall_ms']:.3f} "
                             f"+ {extra:.3f} ms), WAL {row['wal_bytes'] / 1024:.1f} KB")
                top = best(found, size, kind != "memory")
                if top is not None:
                    line += (f"; CPU {row['cpu_ms'] / top['cpu_ms']:.2f}× {top['peer']}"
                             f" (WAL {row['wal_bytes'] / max(top['wal_bytes'], 1):.2f}×)"
                             if kind != "memory" else
                             f"; CPU {row['cpu_ms'] / top['cpu_ms']:.2f}× {top['peer']}")
                print(line)
        for estimator in (None, "openai-o200k"):
            for size in SIZES:
                found_cold = await cold(size, tmp, estimator)
                print(f"  cold attach + first step, {estimator or 'bytes'} estimator, "
                      f"L={size:>5}: model step {found_cold.get('action', 0):.2f} ms "
                      f"(CPU {found_cold.get('action cpu', 0):.2f}), tool step "
                      f"{found_cold.get('tool', 0):.2f} ms (CPU "
                      f"{found_cold.get('tool cpu', 0):.2f}) [≤ 5 ms at 500, ≤ 10 ms at "
                      "5,000]")


if __name__ == "__main__":
    asyncio.run(main())
