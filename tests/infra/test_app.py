"""infra/app.py run the way the CDK CLI runs it: the ``app`` command of infra/cdk.json in
infra/, with the CLI's environment (``CDK_OUTDIR``, ``CDK_CONTEXT_JSON``,
``CDK_DEFAULT_REGION``); bundling skipped as in every infra test."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

INFRA = Path(__file__).resolve().parents[2] / "infra"


def test_cdk_json_app_synthesizes_a_stage_into_the_cli_outdir(tmp_path):
    command = json.loads((INFRA / "cdk.json").read_text())["app"]
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path), "CDK_DEFAULT_REGION": "eu-central-1",
           "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
           "CDK_CONTEXT_JSON": json.dumps({"aws:cdk:bundling-stacks": [], "stage": "cli"})}
    done = subprocess.run(shlex.split(command), cwd=INFRA, env=env, capture_output=True,
                          text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    template = json.loads((tmp_path / "AgentLoom-cli.template.json").read_text())
    assert template["Description"] == "AgentLoom (cli)"
    assets = json.loads((tmp_path / "AgentLoom-cli.assets.json").read_text())
    (image,) = assets["dockerImages"].values()
    context = tmp_path / image["source"]["directory"]
    # The sandbox image context holds the distribution's sources and its Dockerfile only.
    assert sorted(p.name for p in context.iterdir()) == [
        "README.md", "functions", "infra", "pyproject.toml", "runtime"]
    assert [p.name for p in (context / "infra").iterdir()] == ["sandbox"]
    assert image["source"]["dockerFile"] == "infra/sandbox/Dockerfile"
