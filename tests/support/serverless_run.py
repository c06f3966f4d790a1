"""One run on the synthesized state machine with every AWS call metered — what
tests/benchmarks/bench_serverless.py prints, and tests/infra/test_serverless_meter.py
checks.

``measure(synthesized, cycles)`` asks a run of exactly ``cycles`` model requests (one of
them a ``workspace_command``) through the real API handler on moto, lets moto's Step
Functions interpreter execute the synthesized definition (its Lambda tasks reach the
real step service in-process through ``LambdaEndpoint``; ``casing_shim`` plays the
Fargate container, unmetered), waits until every execution of the run has settled, and
returns ``Figures``: the states entered (``*StateEntered`` events of every execution's
GetExecutionHistory) and task retries, each step invocation's in-process wall and CPU
time and model requests, the functions' MemorySize from the template, the command's
registered task definition, and the ``Meter`` with every call. ``cold=True`` gives every
invocation a new step container.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from support.aws_meter import Meter

# a context window no 100-cycle history reaches (the scripted model answers no summary
# call: a compaction would block the run, and a real 100-cycle run fits a 128k window)
AGENT = {"prompt": "You write files.",
         "model": {"model": "scripted-model", "context_window": 1_000_000},
         "tools": ["workspace", "workspace_command"], "mode": "plan"}
PLAN_OPEN = {"steps": [{"id": "1", "title": "write", "status": "in_progress"}]}
PLAN_DONE = {"steps": [{"id": "1", "title": "write", "status": "completed"}]}


def script(cycles: int) -> tuple[dict[str, Any], list[Any]]:
    """The agent and its scripted model: exactly ``cycles`` model requests, one of them
    a ``workspace_command`` (plan mode: plan, files and the command, plan, answer,
    verdict; at least 5)."""
    from agentloom_runtime.testing import ScriptedModel

    def writes(count: int) -> list[Any]:
        calls = [ScriptedModel.call("workspace_write", {"path": f"f{i}.txt",
                                                        "content": f"line {i}\n"},
                                    id=f"w{i}") for i in range(count)]
        command = ScriptedModel.call("workspace_command", {"command": "ls | wc -l"}, id="c")
        return [*calls[:count // 2], command, *calls[count // 2:]]

    if cycles < 5:
        raise ValueError("a run needs at least 5 cycles (plan, command, plan, answer, "
                         "verdict)")
    steps = [ScriptedModel.call("update_plan", PLAN_OPEN, id="p0"), *writes(cycles - 5),
             ScriptedModel.call("update_plan", PLAN_DONE, id="p1"),
             ScriptedModel.answer("Wrote the files."), ScriptedModel.verdict("complete")]
    calls = min(10_000, max(96, 2 * cycles + 10))  # the run is not cut short by its limits
    return {**AGENT, "limits": {"max_model_calls": calls, "max_iterations": calls}}, steps


@dataclass
class Invocation:
    seconds: float  # wall time of the handler, in-process
    cpu_seconds: float  # CPU time of the thread that ran it
    model_requests: int
    container: str
    aws_cpu_seconds: float = 0.0  # of which inside AWS calls (moto's backends, botocore)
    aws_calls: int = 0


@dataclass
class Figures:
    cycles: int
    status: str
    executions: list[dict[str, Any]]
    entered: Counter[str]
    retries: int
    invocations: list[Invocation]
    api_seconds: float
    memory_mb: dict[str, int]
    task: dict[str, Any]
    run_tasks: int
    meter: Meter
    elapsed: float
    unexpected: list[int] = field(default_factory=list)
    load: float = 0.0  # this machine's 1-minute load average when the run ended

    @property
    def transitions(self) -> int:
        return sum(self.entered.values()) + self.retries


def history(sfn: Any, arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
    while True:
        page = sfn.get_execution_history(**kwargs)
        events += page["events"]
        if not page.get("nextToken"):
            return events
        kwargs["nextToken"] = page["nextToken"]


def billed_transitions(events: list[dict[str, Any]]) -> tuple[Counter[str], int]:
    """States entered (by name) and task retries (a Task scheduled again within one
    entry) of one execution's history."""
    entered: Counter[str] = Counter()
    retries, scheduled = 0, 0
    for event in events:
        kind = event["type"]
        if kind.endswith("StateEntered"):
            retries += max(0, scheduled - 1)
            scheduled = 0
            entered[event["stateEnteredEventDetails"]["name"]] += 1
        elif kind in ("TaskScheduled", "LambdaFunctionScheduled", "ActivityScheduled"):
            scheduled += 1
    return entered, retries + max(0, scheduled - 1)


def function_memory(synthesized: Any) -> dict[str, int]:
    out = {}
    for resource in synthesized.of_type("AWS::Lambda::Function").values():
        props = resource.get("Properties", {})
        handler = str(props.get("Handler", ""))
        if handler.startswith("agentloom.handlers."):
            out[handler.split(".")[2]] = int(props.get("MemorySize", 128))
    return out


def measure(synthesized: Any, cycles: int, *, cold: bool = False,
            settle_timeout: float | None = None) -> Figures:
    """One run of ``cycles`` cycles on the synthesized state machine, every AWS call
    metered. ``cold``: a new step container for every invocation."""
    import boto3
    import pytest
    from functional.aws.harness import (
        REGION,
        Container,
        clients,
        fake_credentials,
        mock_config,
        open_bench,
    )
    from moto import mock_aws

    from agentloom.handlers import api as api_handler
    from agentloom_runtime.testing.openai_server import OpenAICompatibleServer
    from support.state_machine import (
        MACHINE,
        MACHINE_ARN,
        STEP_HANDLER,
        Deployment,
        LambdaEndpoint,
        casing_shim,
        resource_values,
    )

    agent, steps = script(cycles)
    patch = pytest.MonkeyPatch()
    meter = Meter()
    meter.install(patch)
    fake_credentials(patch)
    patch.setattr("moto.stepfunctions.parser.asl.component.common.retry.retrier_decl.time",
                  SimpleNamespace(sleep=lambda seconds: None))
    original_run = Container.run

    def run_unmetered(self: Any, command: Any) -> int:  # the container is a test double
        with meter.paused():
            return original_run(self, command)

    patch.setattr(Container, "run", run_unmetered)
    rollover = int(synthesized.function_env(STEP_HANDLER).get("AGENTLOOM_ROLLOVER_CYCLES",
                                                              500))
    model = OpenAICompatibleServer(steps).start()
    invocations: list[Invocation] = []
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as tmp, \
                mock_aws(config=mock_config()):  # type: ignore[call-overload]
            aws = clients()
            bench = open_bench(aws, Path(tmp), model.base_url,
                               state_machine_arn=MACHINE_ARN, rollover=rollover)
            bench.agent(agent)
            containers = iter(range(1, 1_000_000))
            current = {"name": f"c{next(containers)}"}

            def invoke(event: dict[str, Any]) -> dict[str, Any]:
                if cold:
                    current["name"] = f"c{next(containers)}"
                asked = len(model.received)
                aws_cpu, aws_calls = meter.aws_cpu(), meter.aws_calls()
                began, cpu = time.perf_counter(), time.thread_time()
                try:
                    with Meter.source("step", current["name"]):
                        if cold:  # a new container: its wiring is part of the invocation
                            bench.new_step_service()
                        return bench.service.handle(event)
                finally:
                    invocations.append(Invocation(time.perf_counter() - began,
                                                  time.thread_time() - cpu,
                                                  len(model.received) - asked,
                                                  current["name"],
                                                  meter.aws_cpu() - aws_cpu,
                                                  meter.aws_calls() - aws_calls))

            endpoint = LambdaEndpoint(invoke)
            patch.setenv("AWS_ENDPOINT_URL_LAMBDA", endpoint.url)
            aws.sfn.create_state_machine(
                name=MACHINE, roleArn="arn:aws:iam::123456789012:role/sfn",
                definition=json.dumps(synthesized.definition(resource_values(synthesized,
                                                                             bench))))
            seen = casing_shim(patch, bench)
            poll = meter.ignore(boto3.client("stepfunctions", region_name=REGION))
            ecs = meter.ignore(boto3.client("ecs", region_name=REGION))
            deployment = Deployment(bench, endpoint, seen, model, sfn=poll)
            try:
                meter.counting = True
                began = time.perf_counter()
                with Meter.source("api", "api"):
                    run_id = deployment.ask("Write the files")
                api_seconds = time.perf_counter() - began
                executions = deployment.settle(
                    run_id, timeout=settle_timeout or 120 + 3.0 * cycles)
                meter.counting = False
                entered: Counter[str] = Counter()
                retries = 0
                for execution in executions:
                    found, again = billed_transitions(history(poll,
                                                              execution["executionArn"]))
                    entered += found
                    retries += again
                view = deployment.view(run_id)
                status = str(view["status"])
                if status != "completed":
                    status += f" ({view.get('error') or view.get('way_out')})"
                task: dict[str, Any] = {}
                if seen:
                    task = ecs.describe_task_definition(
                        taskDefinition=seen[0]["TaskDefinition"])["taskDefinition"]
                return Figures(len(model.received) - len(model.unexpected), status,
                               executions, entered, retries, invocations, api_seconds,
                               function_memory(synthesized), task, len(seen), meter,
                               time.perf_counter() - started, list(model.unexpected),
                               os.getloadavg()[0])
            finally:
                meter.counting = False
                api_handler.configure(None)
                endpoint.close()
                bench.service.close()
    finally:
        model.stop()
        patch.undo()
