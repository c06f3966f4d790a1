"""The api function's first request from the built bundle: wiring plus the request's own
handling (its botocore client, a DynamoDB query, the Powertools resolver's routing and
validation, the response), CPU time of a fresh process, against a moto server in its
own process (so moto's CPU is not counted; the network round trips are loopback).

bench_bundle.py measures the wiring alone (import + ``_wire()``); this adds what the
first request pays on top of it: the client the wiring defers (``Deferred``: botocore
loads the service's model and endpoint rules then, ``aws/_botocore.py``) and the
resolver's first dispatch. The request is ``GET /api/v1/spaces`` of a user with one
space. The step and trigger functions' first requests need a run and a model (not
driven here).

    PYTHONPATH=tests .venv/bin/python tests/benchmarks/bench_first_request.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: support
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "infra"))

from agentloom_infra.bundling import LAYER_PREFIX, bundle, powertools_layer
from support.lambda_bundle import AWS_ENV, lambda_runtime, run

FIRST = """
import importlib, json, time
started = time.process_time()
api = importlib.import_module("agentloom.handlers.api")
api._wire()
wired = time.process_time()
reply = api.handler({event!r}, None)
done = time.process_time()
print(json.dumps({{"wire_ms": (wired - started) * 1000, "first_ms": (done - started) * 1000,
                  "status": reply["statusCode"], "body": reply["body"][:200]}}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _event(path: str) -> dict[str, object]:
    return {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
            "headers": {"content-type": "application/json"},
            "requestContext": {"http": {"method": "GET", "path": path,
                                        "sourceIp": "127.0.0.1"},
                               "authorizer": {"jwt": {"claims": {"sub": "alice"}}},
                               "requestId": "r", "stage": "$default"},
            "body": None, "isBase64Encoded": False}


def _seed(endpoint: str) -> dict[str, str]:
    """Tables, a KMS key and one space of alice on the moto server."""
    import botocore.session

    from agentloom.aws.config import AwsConfig
    from agentloom.aws.platform import AwsClients, AwsPlatform
    from agentloom.platform.identity import Principal
    from agentloom.platform.store.dynamodb import create_table as platform_table
    from agentloom.stores.dynamodb_checkpoints import create_table as checkpoint_table

    session = botocore.session.get_session()

    def client(name: str) -> Any:
        return session.create_client(name, region_name="us-east-1", endpoint_url=endpoint)

    dynamodb, kms = client("dynamodb"), client("kms")
    platform_table(dynamodb, "platform")
    checkpoint_table(dynamodb, "checkpoints")
    key = kms.create_key(Description="bench")["KeyMetadata"]["Arn"]
    env = {**AWS_ENV, "AGENTLOOM_KMS_KEY_ID": key}
    clients = AwsClients(dynamodb=dynamodb, kms=kms, sfn=client("stepfunctions"),
                         ecs=client("ecs"), efs=client("efs"))
    platform = AwsPlatform.open(AwsConfig.from_environ(env), clients)
    platform.admin.create_space(Principal("alice", "token"), "bench")
    return env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ[name] = value
    try:
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            plat = ("manylinux2014_" + os.uname().machine,)
            python = f"{sys.version_info.major}.{sys.version_info.minor}"
            started = time.perf_counter()
            code = bundle(tmp / "code", platforms=plat, python_version=python)
            powertools = powertools_layer(tmp / "powertools", platforms=plat,
                                          python_version=python) / LAYER_PREFIX
            built = time.perf_counter() - started
            env = {**_seed(endpoint), "AWS_ENDPOINT_URL": endpoint, "HOME": str(tmp)}
            path = [code, powertools, lambda_runtime(tmp)]
            runs = []
            for _ in range(args.repeat):
                done = run(path, FIRST.format(event=_event("/api/v1/spaces")), env=env)
                assert done.returncode == 0, done.stderr[-2000:]
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            assert all(r["status"] == 200 and '"bench"' in r["body"] for r in runs), runs[-1]
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            wire = statistics.median(r["wire_ms"] for r in runs)
            first = statistics.median(r["first_ms"] for r in runs)
            print(f"api first request from the built bundle (built in {built:.0f} s; median of "
                  f"{args.repeat} fresh processes, CPU; {os.cpu_count()} cores, load average "
                  f"{load}):\n  import + _wire() {wire:6.0f} ms\n  + GET /api/v1/spaces "
                  f"{first - wire:6.0f} ms (its DynamoDB client, one query, the resolver)\n"
                  f"  = first request {first:6.0f} ms")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
