"""Serverless figures: cold imports, and what one cycle of a run costs on AWS.

Run: PYTHONPATH=functions:runtime:tests .venv/bin/python tests/benchmarks/bench_serverless.py \
     | grep -v '^{'     (prints figures; asserts none; the grep drops the steps' JSON logs)

- **cold import** of each Lambda handler module, in a fresh interpreter (median of 5):
  ``agentloom.handlers.step`` (target ≤ 300 ms), ``api``, ``trigger``; and what the step
  function's first invocation imports to wire itself (``agentloom.aws.steps`` + boto3;
  the API's: ``agentloom.api.app``).
- **a ~100-cycle run** on moto (the real step service, driven as the state machine
  drives it; a scripted model on 127.0.0.1): per cycle, state transitions (Step + Next?
  per step, RunCommand + AfterCommand per command, Rollover + Succeed per rollover, one
  final Succeed), DynamoDB items read (GetItem/Query/BatchGetItem items, counted on the
  client), items written and write units (the adapters' counters: ceil(KB) per item, twice
  inside a transaction), KMS calls per run (GenerateDataKey + Decrypt, API and step
  functions together); items read per step with a warm container (the attached engine
  reused) and a cold one (a new container every step).
- **cost per 100-cycle run, model tokens excluded**, with the prices of docs/contract.md#aws-limits
  (us-east-1): Step Functions Standard $0.025 / 1,000 transitions; Lambda $0.20 / M
  requests + ARM64 $0.0000133334 / GB-s at an ASSUMED 1 GB × 0.3 s per step (time spent
  waiting for the model is not counted: it depends on the provider); DynamoDB on-demand
  $0.625 / M write units, $0.125 / M read units (1 read unit per item read: items are
  ≤ 4 KB here); KMS $0.03 / 10,000 requests.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[2]
PRICES = {"transition": 0.025 / 1000, "lambda_request": 0.20 / 1e6,
          "lambda_gb_s": 0.0000133334, "wru": 0.625 / 1e6, "rru": 0.125 / 1e6,
          "kms": 0.03 / 10_000}
STEP_GB_S = 1.0 * 0.3  # assumed: 1 GB for 0.3 s per step, model wait excluded
TOOL_CALLS = 48


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


class Counting:
    """A boto3 client whose calls (and DynamoDB items read) are counted."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: dict[str, int] = {}
        self.items_read = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr) or name.startswith(("get_waiter", "get_paginator")):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            out = attr(*args, **kwargs)
            if name == "get_item" and out.get("Item"):
                self.items_read += 1
            elif name == "query":
                self.items_read += len(out.get("Items", []))
            elif name == "batch_get_item":
                self.items_read += sum(len(v) for v in out.get("Responses", {}).values())
            elif name == "transact_get_items":
                self.items_read += sum(1 for r in out.get("Responses", []) if r.get("Item"))
            return out

        return call


def script() -> list[Any]:
    from agentloom_runtime.testing import ScriptedModel

    plan = {"steps": [{"id": "1", "title": "write", "status": "in_progress"}]}
    done = {"steps": [{"id": "1", "title": "write", "status": "completed"}]}
    steps: list[Any] = [ScriptedModel.call("update_plan", plan, id="p0")]
    for i in range(TOOL_CALLS):
        steps.append(ScriptedModel.call("workspace_write", {"path": f"f{i}.txt",
                                                            "content": f"line {i}\n"},
                                        id=f"w{i}"))
    steps.append(ScriptedModel.call("workspace_command", {"command": "ls | wc -l"}, id="c"))
    steps += [ScriptedModel.call("update_plan", done, id="p1"),
              ScriptedModel.answer("Wrote the files."), ScriptedModel.verdict("complete")]
    return steps


def transitions(replies: list[dict[str, Any]]) -> int:
    count = 0
    for reply in replies:
        count += 2  # Step + Next?
        if reply["next"] == "command":
            count += 2  # RunCommand + AfterCommand
        elif reply["next"] == "rollover":
            count += 2  # Rollover + Succeed (the next execution starts at Step)
    return count + 1  # the final Succeed


def run_once(cold: bool) -> dict[str, Any]:
    from functional.aws.harness import ALICE, clients, drive, open_bench
    from moto import mock_aws

    from agentloom_runtime.testing.openai_server import OpenAICompatibleServer

    for name, value in (("AWS_ACCESS_KEY_ID", "t"), ("AWS_SECRET_ACCESS_KEY", "t"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ[name] = value
    agent = {"prompt": "You write files.", "model": {"model": "scripted-model"},
             "tools": ["workspace", "workspace_command"], "mode": "plan"}
    with tempfile.TemporaryDirectory() as tmp, OpenAICompatibleServer(script()) as server, \
            mock_aws():
        aws = clients()
        dynamodb, kms = Counting(aws.dynamodb), Counting(aws.kms)
        aws.dynamodb, aws.kms = cast(Any, dynamodb), cast(Any, kms)  # stand-ins
        machine = aws.sfn.create_state_machine(
            name="m", roleArn="arn:aws:iam::123456789012:role/sfn",
            definition='{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}}'
        )["stateMachineArn"]
        bench = open_bench(aws, Path(tmp), server.base_url, state_machine_arn=machine)
        bench.agent(agent)
        run, _ = bench.api.sessions.ask(ALICE, bench.session_id, "Write the files")
        reads0, kms0 = dynamodb.items_read, sum(kms.calls.values())
        def counted() -> tuple[Any, ...]:  # the step's stores, both count their writes
            return bench.step_platform.checkpoints, bench.step_platform.store.items

        written0 = [(s.items_written, s.write_units) for s in counted()]

        def invoke(payload: dict[str, Any]) -> dict[str, Any]:
            service = bench.new_step_service() if cold else bench.service
            return service.handle(payload)

        replies = drive(bench, run.run_id, invoke=invoke, max_steps=500)
        stores = counted()
        items = sum(s.items_written for s in stores) - (0 if cold else
                                                        sum(w[0] for w in written0))
        units = sum(s.write_units for s in stores) - (0 if cold else
                                                      sum(w[1] for w in written0))
        result = {"steps": len(replies), "status": replies[-1]["status"],
                  "transitions": transitions(replies),
                  "items_read": dynamodb.items_read - reads0,
                  "items_written": items, "write_units": units,
                  "kms_calls": sum(kms.calls.values()),
                  "kms_calls_steps": sum(kms.calls.values()) - kms0,
                  "attaches": bench.service.attaches}
        bench.service.close()
        return result


def main() -> None:
    print("cold import (median of 5, fresh interpreter):")
    # the handler modules defer their wiring: the first invocation also imports
    # agentloom.aws.steps + boto3 (step) or agentloom.api.app + agentloom.aws.platform (api)
    for module in ("agentloom.handlers.step", "agentloom.handlers.api",
                   "agentloom.handlers.trigger", "agentloom.aws.steps", "boto3",
                   "agentloom.api.app"):
        ms = cold_import(module)
        shown = "not importable here" if ms is None else f"{ms:7.1f} ms"
        print(f"  {module:32s} {shown}")
    warm = run_once(cold=False)
    print(f"\nwarm container: {warm['steps']} steps, status {warm['status']}")
    cycles = warm["steps"]
    for key in ("transitions", "items_read", "items_written", "write_units"):
        print(f"  {key:14s} {warm[key]:6d} total  {warm[key] / cycles:6.2f} per step")
    print(f"  KMS calls per run: {warm['kms_calls']} (API + step; "
          f"{warm['kms_calls_steps']} by the steps); engine attachments: {warm['attaches']}")
    cold = run_once(cold=True)
    print(f"cold container every step: items read {cold['items_read'] / cold['steps']:.2f} "
          f"per step (warm {warm['items_read'] / cycles:.2f}); KMS calls by the steps "
          f"{cold['kms_calls_steps']}")
    per = 100 / cycles
    cost = {"step functions": warm["transitions"] * per * PRICES["transition"],
            "lambda requests": 100 * PRICES["lambda_request"],
            "lambda duration (assumed 0.3 GB-s/step)": 100 * STEP_GB_S * PRICES["lambda_gb_s"],
            "dynamodb writes": warm["write_units"] * per * PRICES["wru"],
            "dynamodb reads": warm["items_read"] * per * PRICES["rru"],
            "kms": warm["kms_calls"] * PRICES["kms"]}
    print("\ncost per 100-cycle run, model tokens excluded (us-east-1 prices):")
    for name, value in cost.items():
        print(f"  {name:40s} ${value:.6f}")
    print(f"  {'total':40s} ${sum(cost.values()):.6f}  (target <= $0.01)")


if __name__ == "__main__":
    main()
