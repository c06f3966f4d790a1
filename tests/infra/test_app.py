"""infra/app.py run the way the CDK CLI runs it: the ``app`` command of infra/cdk.json in
infra/, with the CLI's environment (``CDK_OUTDIR``, ``CDK_CONTEXT_JSON``,
``CDK_DEFAULT_REGION``); bundling skipped as in every infra test. Without the virtual
environment (a fresh clone), or with one that lacks the infra extra, the command says to
run bin/setup-infra."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

INFRA = Path(__file__).resolve().parents[2] / "infra"
COMMAND = shlex.split(json.loads((INFRA / "cdk.json").read_text())["app"])
VENV = str(Path(sys.prefix))  # the environment running the tests (bin/test: .venv)


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(COMMAND, cwd=INFRA, env={**os.environ, **env},
                          capture_output=True, text=True, check=False, timeout=120)


def test_cdk_json_app_synthesizes_a_stage_into_the_cli_outdir(tmp_path):
    done = _run({"CDK_OUTDIR": str(tmp_path), "CDK_DEFAULT_REGION": "eu-central-1",
                 "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "AGENTLOOM_VENV": VENV,
                 "CDK_CONTEXT_JSON": json.dumps({"aws:cdk:bundling-stacks": [],
                                                 "stage": "cli"})})
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


def test_without_the_virtual_environment_the_app_says_what_to_run(tmp_path):
    done = _run({"AGENTLOOM_VENV": str(tmp_path / "none"), "CDK_OUTDIR": str(tmp_path)})
    assert done.returncode == 1  # not the shell's 127
    assert "bin/setup-infra" in done.stderr and str(tmp_path / "none") in done.stderr
    assert not list(tmp_path.glob("*.template.json"))


def test_an_environment_without_the_infra_extra_says_what_to_run(tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True,
                   timeout=60)
    done = _run({"AGENTLOOM_VENV": str(bare), "PYTHONPATH": ""})
    assert done.returncode == 1, done.stderr[-2000:]
    assert "aws_cdk, constructs, cdk_nag (the infra extra)" in done.stderr
    assert "run bin/setup-infra" in done.stderr
