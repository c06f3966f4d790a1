"""The peers' half of ``bench_floor.py``: run by the peers' interpreter (a venv holding
``langgraph``, ``langgraph-checkpoint-sqlite`` and ``openai-agents``; never a project
dependency), imports nothing of AgentLoom, prints one JSON object per line.

Each peer runs the same workload as AgentLoom's half, in its own leanest usual form:
a step is one model turn answering with one tool call (400-character arguments) and the
tool's result (400 characters), the model a double that answers at once, the history L
messages loaded first. Per step: CPU (``time.process_time``), wall, and WAL bytes (the
growth of the ``-wal`` file, autocheckpoint off) on a file in ``synchronous=FULL``.

- ``langgraph``: a ``StateGraph`` START → model → tools → END, messages in
  ``add_messages`` (``list``) or in a ``DeltaChannel`` (``delta``: only the new writes
  are stored per checkpoint); ``SqliteSaver`` on a file, or ``InMemorySaver``. One step
  is one ``graph.invoke``.
- ``openai-agents``: ``Runner.run`` with a double ``Model``, a ``function_tool``,
  ``tool_use_behavior="stop_on_first_tool"`` (the run ends with the tool's result) and
  ``SQLiteSession`` on a file, tracing off. One step is one ``Runner.run`` (its input:
  one short user message, which the session stores too).

    <peers python> tests/benchmarks/_floor_peers.py --sizes 10,500,5000 --steps 20 --repeat 3
"""

# no "from __future__ import annotations": the graphs' State classes are defined in
# functions and LangGraph reads their annotations at run time
import argparse
import asyncio
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared workload
from benchmarks._floor_workload import RESULT, argument, history


def wal_size(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def full_sync(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")


def measure(step: Any, count: int, path: Path | None,
            conn: sqlite3.Connection | None = None) -> dict[str, float]:
    if conn is not None:  # an empty WAL, so that it grows from here (no restart)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = wal_size(path) if path else 0
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(count):
        step()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"cpu_ms": cpu / count * 1000, "wall_ms": wall / count * 1000,
            "wal_bytes": (wal_size(path) - wal) / count if path else 0.0}


# -- LangGraph --------------------------------------------------------------------------

def langgraph_graph(delta: bool, saver: Any) -> Any:
    from typing import Annotated, TypedDict

    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import _messages_delta_reducer, add_messages

    if delta:
        from langgraph.channels.delta import DeltaChannel

        class State(TypedDict):
            messages: Annotated[list, DeltaChannel(_messages_delta_reducer)]
    else:
        class State(TypedDict):  # type: ignore[no-redef]
            messages: Annotated[list, add_messages]

    calls = [0]

    def model(state: Any) -> dict[str, Any]:
        calls[0] += 1
        n = calls[0]
        return {"messages": [AIMessage(content="", id=f"ai{n}", tool_calls=[
            {"name": "lookup", "args": {"text": argument(n)}, "id": f"c{n}"}])]}

    def tools(state: Any) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        return {"messages": [ToolMessage(content=RESULT, tool_call_id=call["id"],
                                         id=f"t{call['id']}")]}

    graph = StateGraph(State)
    graph.add_node("model", model)
    graph.add_node("tools", tools)
    graph.add_edge(START, "model")
    graph.add_edge("model", "tools")
    graph.add_edge("tools", END)
    return graph.compile(checkpointer=saver)


def langgraph_run(size: int, steps: int, *, delta: bool, on_file: bool) -> dict[str, float]:
    from langchain_core.messages import convert_to_messages
    from langgraph.checkpoint.memory import InMemorySaver

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lg.sqlite3"
        conn = None
        if on_file:
            from langgraph.checkpoint.sqlite import SqliteSaver

            conn = sqlite3.connect(path, check_same_thread=False)
            saver: Any = SqliteSaver(conn)
            saver.setup()
            full_sync(conn)
        else:
            saver = InMemorySaver()
        graph = langgraph_graph(delta, saver)
        config = {"configurable": {"thread_id": "bench"}}
        seed = convert_to_messages(history(size))
        for i, message in enumerate(seed):
            message.id = f"h{i}"
        graph.update_state(config, {"messages": seed}, as_node="tools")
        for _ in range(3):
            graph.invoke({"messages": []}, config)
        result = measure(lambda: graph.invoke({"messages": []}, config), steps,
                         path if on_file else None, conn)
        count = len(graph.get_state(config).values["messages"])
        assert count == size + 2 * (steps + 3), count
        if conn is not None:
            conn.close()
        return result


# -- openai-agents ----------------------------------------------------------------------

def agents_run(size: int, steps: int) -> dict[str, float]:
    from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall

    set_tracing_disabled(True)

    class ToolModel(Model):
        def __init__(self) -> None:
            self.n = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            self.n += 1
            call = ResponseFunctionToolCall(
                type="function_call", id=f"fc{self.n}", call_id=f"c{self.n}",
                name="lookup", arguments=json.dumps({"text": argument(self.n)}))
            return ModelResponse(output=[call], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def lookup(text: str) -> str:
        """Look the text up."""
        return RESULT

    agent = Agent(name="bench", instructions="You are a test agent.", model=ToolModel(),
                  tools=[lookup], tool_use_behavior="stop_on_first_tool")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "oa.sqlite3"
        session = SQLiteSession("bench", path)
        full_sync(session._get_connection())
        loop = asyncio.new_event_loop()
        loop.run_until_complete(session.add_items(history(size)))

        def step() -> None:
            loop.run_until_complete(Runner.run(agent, "go on", session=session))

        for _ in range(3):
            step()
        result = measure(step, steps, path, session._get_connection())
        items = loop.run_until_complete(session.get_items())
        assert len(items) == size + 3 * (steps + 3), len(items)
        session.close()
        loop.close()
        return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,500,5000")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=1, help="runs; the least is printed")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = [("langgraph sqlite delta", lambda n: langgraph_run(n, args.steps, delta=True,
                                                                on_file=True), True),
            ("langgraph sqlite list", lambda n: langgraph_run(n, args.steps, delta=False,
                                                               on_file=True), True),
            ("openai-agents sqlite", lambda n: agents_run(n, args.steps), True),
            ("langgraph memory delta", lambda n: langgraph_run(n, args.steps, delta=True,
                                                                on_file=False), False)]
    for name, run, on_file in runs:
        for size in sizes:
            figures: dict[str, Any]
            try:
                results = [run(size) for _ in range(args.repeat)]
                figures = {key: min(r[key] for r in results) for key in results[0]}
            except Exception as exc:  # a peer that breaks is reported, not fatal
                figures = {"error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps({"peer": name, "size": size, "file": on_file, **figures}),
                  flush=True)


if __name__ == "__main__":
    sys.path[:] = [p for p in sys.path if not p.endswith(os.path.join("tests", "benchmarks"))]
    main()
