"""The boto3 type stubs (``mypy_boto3_*``, the dev extra) are for mypy only: every module
that names a typed client imports it under ``TYPE_CHECKING``, so the Lambda bundle,
which does not ship the stubs, imports and wires the AWS adapters without them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MODULES = [
    "agentloom.aws.platform", "agentloom.aws.launcher", "agentloom.aws.sandbox",
    "agentloom.aws.steps", "agentloom.aws.step_input", "agentloom.aws.capabilities",
    "agentloom.crypto.kms_keyring", "agentloom.knowledge.s3vectors_index",
    "agentloom.platform.secrets", "agentloom.skills.dynamodb_store",
    "agentloom.stores.dynamodb_checkpoints", "agentloom.triggers.service",
    "agentloom.handlers.api", "agentloom.handlers.step", "agentloom.handlers.trigger",
]
SCRIPT = """
import importlib, importlib.abc, sys

class NoStubs(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0].startswith("mypy_boto3_"):
            raise ImportError(f"{name}: the boto3 stubs are not installed in a Lambda")
        return None

sys.meta_path.insert(0, NoStubs())
for module in sys.argv[1:]:
    importlib.import_module(module)
from agentloom.aws.platform import AwsClients
from agentloom.knowledge.s3vectors_index import S3VectorsIndex
clients = AwsClients.for_region("us-east-1")
S3VectorsIndex(clients.vectors("us-east-1"), "bucket")
print(type(clients.sfn.created()).__name__, type(clients.s3vectors).__name__)
"""


def test_the_aws_adapters_import_and_wire_without_the_stubs() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "runtime"), str(ROOT / "functions")]),
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, *MODULES], env=env,
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["SFN", "S3Vectors"]  # real botocore clients
