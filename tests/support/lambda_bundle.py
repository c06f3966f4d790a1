"""The built Lambda bundle, run as Lambda runs it: a fresh ``python -S`` (no
site-packages, no source tree) whose ``sys.path`` is the code bundle, the function's
layers, and boto3/botocore beside them as the Lambda runtime provides them.

``WIRING[function]`` is a handler's first invocation up to its first request: import the
handler module and run its ``_wire()`` against a complete AWS environment (dummy names,
no network: creating boto3 clients sends nothing). ``first_invocation`` runs it once
under ``-X importtime`` and returns the import total and the wall time of the whole wiring;
tests/infra/test_bundle_imports.py and tests/benchmarks/bench_bundle.py use them.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# What the Lambda Python runtime has beside its standard library (boto3 and its deps)
LAMBDA_PROVIDES = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "six.py",
                   "urllib3")
ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:agentloom-test-runs"
AWS_ENV = {
    "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
    "AGENTLOOM_CHECKPOINT_TABLE": "checkpoints", "AGENTLOOM_PLATFORM_TABLE": "platform",
    "AGENTLOOM_KMS_KEY_ID": "alias/agentloom-test", "AGENTLOOM_STATE_MACHINE_ARN": ARN,
    "AGENTLOOM_STAGE": "test", "AGENTLOOM_WORKSPACE_ROOT": "/mnt/workspaces",
    "AGENTLOOM_EFS_FILE_SYSTEM_ID": "fs-0123456789abcdef0",
    "AGENTLOOM_STEP_FUNCTION_NAME": "agentloom-test-step",
    "AGENTLOOM_SANDBOX_CLUSTER": "agentloom-test",
    "AGENTLOOM_SANDBOX_FAMILY_PREFIX": "agentloom-test-sbx",
    "AGENTLOOM_SANDBOX_EXECUTION_ROLE_ARN": "arn:aws:iam::123456789012:role/sbx-exec",
    "AGENTLOOM_SANDBOX_TASK_ROLE_ARN": "arn:aws:iam::123456789012:role/sbx-task",
    "AGENTLOOM_SANDBOX_IMAGE": "123456789012.dkr.ecr.us-east-1.amazonaws.com/sbx:1",
    "AGENTLOOM_SANDBOX_SUBNETS": "subnet-0123", "AGENTLOOM_SANDBOX_SECURITY_GROUP": "sg-0123",
    "AGENTLOOM_SANDBOX_LOG_GROUP": "/agentloom/test/sandbox",
    "AGENTLOOM_SANDBOX_UID": "1000", "AGENTLOOM_SANDBOX_GID": "1000",
    "AGENTLOOM_IDEMPOTENCY_TABLE": "idempotency", "AGENTLOOM_TRIGGERS": "{}",
    "POWERTOOLS_SERVICE_NAME": "agentloom", "POWERTOOLS_METRICS_NAMESPACE": "AgentLoom",
}
HANDLERS = {name: f"agentloom.handlers.{name}" for name in ("step", "api", "trigger")}
# Run in the fresh interpreter: import the handler, wire it, report where each module
# came from (every project module must come from the bundle, never a source tree).
WIRING = """
import importlib, json, os, sys, time
started, cpu = time.perf_counter(), time.process_time()
handler = importlib.import_module({module!r})
handler._wire()
wall, cpu = time.perf_counter() - started, time.process_time() - cpu
ours = {{name: getattr(m, "__file__", None) or "" for name, m in list(sys.modules.items())
         if name.split(".")[0] in ("agentloom", "agentloom_runtime")}}
print(json.dumps({{"wall_ms": wall * 1000, "cpu_ms": cpu * 1000, "ours": ours,
                  "modules": len(sys.modules),
                  "loaded": sorted({{n.split(".")[0] for n in sys.modules}})}}))
"""


@dataclass(frozen=True)
class Wiring:
    """One fresh process's first invocation: -X importtime total (ms), wall and CPU
    time of import + ``_wire()`` (ms; CPU is steadier on a shared machine), modules
    loaded, top-level packages loaded, project module → its file."""

    import_ms: float
    wall_ms: float
    cpu_ms: float
    modules: int
    loaded: tuple[str, ...]
    files: Mapping[str, str]


def lambda_runtime(tmp: Path) -> Path:
    """A folder with this environment's boto3 and its dependencies (symlinks): what the
    Lambda runtime puts on ``sys.path`` after the code and the layers."""
    import boto3

    runtime = tmp / "lambda-runtime"
    runtime.mkdir(exist_ok=True)
    site = Path(boto3.__file__).resolve().parents[1]
    for name in LAMBDA_PROVIDES:
        if (site / name).exists() and not (runtime / name).exists():
            (runtime / name).symlink_to(site / name)
    return runtime


def importtime_total(stderr: str) -> float:
    """The sum of the self times ``-X importtime`` printed (ms): every import's own cost,
    each counted once."""
    total = 0
    for line in stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            total += int(line.split("|")[0].split(":")[1])
    return total / 1000


def run(paths: Sequence[Path], code: str, *, env: Mapping[str, str] | None = None,
        importtime: bool = False, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``code`` in ``python -S -I``-like isolation with ``paths`` alone on PYTHONPATH."""
    flags = ["-S", "-W", "ignore", *(["-X", "importtime"] if importtime else [])]
    environ = {**(env or {}), "PYTHONPATH": ":".join(str(p) for p in paths),
               "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
    return subprocess.run([sys.executable, *flags, "-c", code], capture_output=True,
                          text=True, env=environ, cwd=cwd or paths[0], check=False,
                          timeout=120)


def first_invocation(paths: Sequence[Path], function: str, *, home: Path) -> Wiring:
    done = run(paths, WIRING.format(module=HANDLERS[function]),
               env={**AWS_ENV, "HOME": str(home)}, importtime=True)
    if done.returncode != 0:
        raise AssertionError(f"{function} wiring failed from the bundle:\n"
                             f"{done.stderr.strip()[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return Wiring(import_ms=importtime_total(done.stderr), wall_ms=result["wall_ms"],
                  cpu_ms=result["cpu_ms"],
                  modules=result["modules"], loaded=tuple(result["loaded"]),
                  files=result["ours"])


def median_wiring(paths: Sequence[Path], function: str, *, home: Path,
                  repeat: int = 5) -> tuple[Wiring, Wiring]:
    """The medians (import total, wall, CPU) over ``repeat`` fresh processes, and the
    last run."""
    runs = [first_invocation(paths, function, home=home) for _ in range(repeat)]
    last = runs[-1]
    return Wiring(import_ms=statistics.median(r.import_ms for r in runs),
                  wall_ms=statistics.median(r.wall_ms for r in runs),
                  cpu_ms=statistics.median(r.cpu_ms for r in runs), modules=last.modules,
                  loaded=last.loaded, files=last.files), last
