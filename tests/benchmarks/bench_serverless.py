"""What a run costs on AWS, measured on the synthesized state machine — and cold imports.

Run (prints figures, asserts none; the grep drops the functions' JSON logs):

    PYTHONPATH=functions:runtime .venv/bin/python tests/benchmarks/bench_serverless.py \\
        [--cycles 100] [--model-latency 1.0] [--aws-call-ms 8] [--command-seconds 10] \\
        [--cold-cycles 12] [--no-imports] | grep -v '^{'

- **a run of N model+tool cycles** (default 100, one ``workspace_command`` among them) on
  moto: the CDK app is synthesized as ``cdk synth`` does (bundling skipped), its state
  machine definition runs in moto's Step Functions interpreter
  (tests/support/state_machine.py: its Lambda tasks reach the real step service
  in-process, ``ecs:runTask.sync`` plays the Fargate container); the run is asked
  through the real API handler; the model is a scripted server on 127.0.0.1. A *cycle*
  is a model request the scripted server answered (not an engine step, not an
  invocation). The rollover interval is the synthesized step function's.
- **every AWS call counted by botocore event hooks** (tests/support/aws_meter.py), the
  interpreter's own lambda/ecs/states clients included, never the stores' counters:
  state transitions as Step Functions bills them (every ``*StateEntered`` event of
  every execution of the run, read back from GetExecutionHistory, plus every task
  retry); DynamoDB write and read units by item class with DynamoDB's rules (the larger
  of the item before and after, ×2 in a transaction, …); KMS calls by operation, per run
  and per container (a second, shorter run gives every invocation a new container).
- **Lambda**: requests; GB-s at the synthesized functions' MemorySize: each step
  invocation billed on the function's own CPU (its thread's CPU time less what moto's
  backends spent inside AWS calls, slowed to the vCPU share the memory buys), an ASSUMED
  round trip per AWS call (``--aws-call-ms``) and an ASSUMED model latency per model
  request (``--model-latency``); the GB-s each second of model latency adds.
  **Fargate**: the registered task definition's vCPU and memory at an ASSUMED command
  duration (``--command-seconds``; billed ≥ 1 minute), at the price of the architecture
  it registers (no ``cpuArchitecture``: X86_64).
- **$ per run** with the us-east-1 price table below (its date printed), per cycle too.
  Not counted: CloudWatch Logs (the state machine logs at level ALL), X-Ray traces, EFS
  storage and throughput, NAT/endpoint hours and data, KMS key-months, model tokens.
- **cold import** of each Lambda handler module in a fresh interpreter (median of 5),
  from the SOURCE TREE (functions/ and runtime/ on PYTHONPATH, bytecode cached as the
  tree has it); the deployed bundle's figures: tests/benchmarks/bench_bundle.py.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "infra")]

from support.serverless_run import Figures, Invocation, measure  # noqa: E402

PRICES_DATE = ("2026-03, AWS us-east-1 list prices as published then (not re-checked "
               "live from here)")
PRICES = {
    "transition": 0.025 / 1000,  # Step Functions Standard
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_s": 0.0000133334,  # ARM64
    "wru": 0.625 / 1e6, "rru": 0.125 / 1e6,  # DynamoDB on-demand
    "kms": 0.03 / 10_000,
}
FARGATE = {"ARM64": (0.03238, 0.00356), "X86_64": (0.04048, 0.004445)}  # vCPU-h, GB-h


# -- cold imports (source tree) ---------------------------------------------------------------


def cold_import(module: str, repeat: int = 5) -> float | None:
    code = ("import time; t = time.perf_counter(); import importlib; "
            f"importlib.import_module({module!r}); print(time.perf_counter() - t)")
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'functions'}:{ROOT / 'runtime'}")
    times = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, check=False)
        if done.returncode != 0:
            return None
        times.append(float(done.stdout.strip()))
    return statistics.median(times) * 1000


# -- the report ---------------------------------------------------------------------------------


FULL_VCPU_MB = 1769  # Lambda allocates CPU in proportion to memory: one vCPU at 1,769 MB


def billed_seconds(invocation: Invocation, memory_mb: int, latency: float,
                   call_seconds: float) -> float:
    """What Lambda bills for one step invocation, in whole milliseconds: the function's
    own CPU (the handler thread's, less what moto's backends did inside AWS calls),
    slowed to the vCPU share its memory buys; an ASSUMED round trip per AWS call; an
    ASSUMED model latency per model request."""
    own = max(0.0, invocation.cpu_seconds - invocation.aws_cpu_seconds)
    share = min(1.0, memory_mb / FULL_VCPU_MB)
    seconds = own / share + invocation.aws_calls * call_seconds + \
        invocation.model_requests * latency
    return math.ceil(seconds * 1000) / 1000


def lambda_gb_s(figures: Figures, latency: float, call_seconds: float
                ) -> tuple[float, float]:
    """(GB-s of the step invocations at ``latency`` s per model request, GB-s of the API
    invocation — the latter on its measured wall time)."""
    step_mb = figures.memory_mb.get("step", 1024)
    api_gb = figures.memory_mb.get("api", 1024) / 1024
    step = sum(billed_seconds(i, step_mb, latency, call_seconds)
               for i in figures.invocations) * step_mb / 1024
    return step, math.ceil(figures.api_seconds * 1000) / 1000 * api_gb


def fargate(figures: Figures, command_seconds: float) -> tuple[float, str]:
    if not figures.run_tasks:
        return 0.0, "no command ran"
    cpu = int(figures.task.get("cpu", 1024)) / 1024
    memory = int(figures.task.get("memory", 2048)) / 1024
    arch = str(figures.task.get("runtimePlatform", {}).get("cpuArchitecture", "X86_64"))
    per_vcpu, per_gb = FARGATE.get(arch, FARGATE["X86_64"])
    billed = max(60.0, command_seconds) / 3600
    cost = figures.run_tasks * billed * (cpu * per_vcpu + memory * per_gb)
    arm = figures.run_tasks * billed * (cpu * FARGATE["ARM64"][0] + memory * FARGATE["ARM64"][1])
    return cost, (f"{figures.run_tasks} task(s) × {cpu:g} vCPU / {memory:g} GB {arch} "
                  "(the registered task definition) × "
                  f"{max(60.0, command_seconds):g} s billed (assumed {command_seconds:g} s, "
                  f"1-minute minimum): ${cost:.5f} (on ARM64: ${arm:.5f})")


def costs(figures: Figures, latency: float, command_seconds: float,
          call_seconds: float) -> dict[str, float]:
    """$ per run by line."""
    meter = figures.meter
    writes = sum(meter.units("write").values())
    reads = sum(meter.units("read").values())
    kms = sum(meter.operations("kms").values())
    invokes = len(figures.invocations) + 1  # the steps + the API request that asked
    step, api = lambda_gb_s(figures, latency, call_seconds)
    idle, _ = lambda_gb_s(figures, 0.0, call_seconds)
    farg, _ = fargate(figures, command_seconds)
    return {
        "step functions transitions": figures.transitions * PRICES["transition"],
        "dynamodb writes": writes * PRICES["wru"],
        "dynamodb reads": reads * PRICES["rru"],
        "kms requests": kms * PRICES["kms"],
        "lambda requests": invokes * PRICES["lambda_request"],
        "lambda compute (own CPU + AWS round trips)": (idle + api) * PRICES["lambda_gb_s"],
        f"lambda model wait ({latency:g} s per model request)":
            (step - idle) * PRICES["lambda_gb_s"],
        "fargate": farg,
    }


def report(figures: Figures, cold: Figures | None, args: argparse.Namespace) -> None:
    meter, n = figures.meter, figures.cycles
    print(f"\nrun: {n} cycles (model requests answered) of {args.cycles} scripted, "
          f"status {figures.status}, "
          f"{len(figures.invocations)} step invocations, {len(figures.executions)} "
          f"execution(s), {figures.run_tasks} command task(s); wall {figures.elapsed:.1f} s")
    if figures.unexpected:
        print(f"  !! the model was asked {len(figures.unexpected)} time(s) past its script")
    sources = Counter(c.source for c in meter.calls)
    print("  AWS calls by caller: " + ", ".join(f"{k} {v}" for k, v in sources.most_common())
          + "; by operation: " + ", ".join(f"{svc}:{op} {v}" for (svc, op), v
                                           in meter.operations().most_common()))
    print(f"\n{'':44s}{'per run':>12s}{'per cycle':>12s}")

    def row(name: str, value: float, fmt: str = ",.0f") -> None:
        print(f"  {name:42s}{value:>12{fmt}}{value / n:>12.2f}")

    row("state transitions (billed)", figures.transitions)
    for state, count in figures.entered.most_common():
        row(f"  {state}", count)
    row("  task retries", figures.retries)
    writes, reads = meter.units("write"), meter.units("read")
    row("DynamoDB write units", sum(writes.values()))
    for name, units in writes.items():
        row(f"  {name}", units)
    row("DynamoDB read units", sum(reads.values()), ",.1f")
    for name, units in reads.items():
        row(f"  {name}", units, ",.1f")
    failed = sum(1 for c in meter.calls if c.service == "dynamodb" and c.error)
    transact = sum(1 for c in meter.calls if c.operation == "TransactWriteItems")
    print(f"  (DynamoDB calls {sum(meter.operations('dynamodb').values())}, "
          f"TransactWriteItems {transact}, failed {failed})")
    kms_ops = meter.operations("kms")
    row("KMS calls", sum(kms_ops.values()))
    for (_, op), count in kms_ops.most_common():
        row(f"  {op}", count)
    print("  KMS calls per container (this run):",
          _per_container(meter, figures.invocations))
    if cold is not None:
        print(f"  KMS with a new container every invocation ({cold.cycles} cycles, "
              f"{len(cold.invocations)} invocations): {_kms_total(cold.meter)} calls, "
              f"per container {_per_container(cold.meter, cold.invocations)}; DynamoDB read "
              f"units {sum(cold.meter.units('read').values()) / cold.cycles:.1f} per cycle "
              f"(warm {sum(reads.values()) / n:.1f})")
    call_s = args.aws_call_ms / 1000
    step_gb, api_gb = lambda_gb_s(figures, args.model_latency, call_s)
    idle, _ = lambda_gb_s(figures, 0.0, call_s)
    handler = [i.seconds for i in figures.invocations]
    step_mb = figures.memory_mb.get("step", 1024)
    print(f"\nLambda (memory from the template: {figures.memory_mb})")
    row("requests (step + the API request)", len(figures.invocations) + 1)
    row("step handler CPU (its thread), s", sum(i.cpu_seconds for i in figures.invocations),
        ",.2f")
    row("  of which inside AWS calls (moto, botocore), s",
        sum(i.aws_cpu_seconds for i in figures.invocations), ",.2f")
    row("AWS calls by the steps", sum(i.aws_calls for i in figures.invocations))
    row("model requests", sum(i.model_requests for i in figures.invocations))
    row(f"GB-s at {args.model_latency:g} s per model request", step_gb + api_gb, ",.1f")
    row("GB-s without the model wait", idle + api_gb, ",.1f")
    wait = sum(i.model_requests for i in figures.invocations) * step_mb / 1024
    print(f"  billed: own CPU at {min(1.0, step_mb / FULL_VCPU_MB):.2f} vCPU "
          f"({step_mb} MB) + {args.aws_call_ms:g} ms ASSUMED per AWS call + the model "
          f"latency; each second of model latency adds {wait / n:.2f} GB-s per cycle "
          f"({step_mb / 1024:.2f} GB-s per second of model wait; "
          f"${wait * PRICES['lambda_gb_s']:.4f} per run)")
    print(f"  in-process wall time (moto for the network, load average {figures.load:.1f} "
          f"on {os.cpu_count()} cores): {sum(handler):,.1f} s, invocation median "
          f"{statistics.median(handler) * 1000:.0f} ms, max {max(handler) * 1000:.0f} ms")
    _, note = fargate(figures, args.command_seconds)
    print(f"Fargate: {note}")
    bill = costs(figures, args.model_latency, args.command_seconds, call_s)
    print(f"\n$ per run, model tokens excluded (prices {PRICES_DATE}):")
    for name, value in bill.items():
        print(f"  {name:50s} ${value:9.5f}   per cycle ${value / n:.7f}")
    total = sum(bill.values())
    no_wait = total - next(v for k, v in bill.items() if k.startswith("lambda model wait"))
    print(f"  {'total':50s} ${total:9.5f}   per cycle ${total / n:.7f}")
    print(f"  {'total without the model wait':50s} ${no_wait:9.5f}   "
          f"per 100 cycles ${no_wait / n * 100:.5f}")
    print("  not counted: CloudWatch Logs, X-Ray, EFS, NAT/endpoints, KMS key-months")


def _kms_total(meter: Any) -> int:
    return sum(meter.operations("kms").values())


def _per_container(meter: Any, invocations: list[Invocation]) -> str:
    calls = Counter(c.container for c in meter.calls if c.service == "kms")
    steps = {i.container for i in invocations}
    counts = [calls.get(c, 0) for c in steps]
    return (f"api {calls.get('api', 0)}, step containers {len(steps)}: "
            f"max {max(counts, default=0)}, total {sum(counts)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--model-latency", type=float, default=1.0,
                        help="ASSUMED seconds per model request (billed Lambda wait)")
    parser.add_argument("--aws-call-ms", type=float, default=8.0,
                        help="ASSUMED round trip of one AWS call from the function "
                             "(DynamoDB single-digit ms; KMS, ECS slower)")
    parser.add_argument("--command-seconds", type=float, default=10.0,
                        help="ASSUMED duration of a command's Fargate task")
    parser.add_argument("--cold-cycles", type=int, default=12,
                        help="cycles of the run with a new container per invocation "
                             "(0: skip it)")
    parser.add_argument("--no-imports", action="store_true", help="skip the cold imports")
    args = parser.parse_args(argv)
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"bench_serverless {now}: --cycles {args.cycles} --model-latency "
          f"{args.model_latency:g} --aws-call-ms {args.aws_call_ms:g} "
          f"--command-seconds {args.command_seconds:g} "
          f"--cold-cycles {args.cold_cycles}")
    if not args.no_imports:
        print("\ncold import from the source tree (median of 5, fresh interpreter; the "
              "bundle's: bench_bundle.py):")
        for module in ("agentloom.handlers.step", "agentloom.handlers.api",
                       "agentloom.handlers.trigger", "agentloom.aws.steps", "boto3",
                       "agentloom.api.app"):
            ms = cold_import(module)
            shown = "not importable here" if ms is None else f"{ms:7.1f} ms"
            print(f"  {module:32s} {shown}")
    from support.state_machine import synthesized_app

    synthesized = synthesized_app()
    figures = measure(synthesized, args.cycles)
    cold = measure(synthesized, args.cold_cycles, cold=True) if args.cold_cycles else None
    report(figures, cold, args)


if __name__ == "__main__":
    main()
