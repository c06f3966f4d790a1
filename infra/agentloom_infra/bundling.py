"""Lambda code bundled on this machine, without Docker (``ILocalBundling``).

The bundle is the ``agentloom`` distribution's two packages (``agentloom_runtime``,
``agentloom``) plus its runtime dependencies — the core ``dependencies`` of pyproject.toml
and the ``aws`` extra minus boto3/botocore (the Lambda runtime provides them) — installed
as manylinux aarch64 / CPython 3.12 wheels with ``pip install --platform … --only-binary
=:all: --target``. Nothing of CDK, the ``infra``/``dev`` extras or tests is included.
``bundle(out)`` is also what tests/benchmarks/bench_bundle.py measures.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"agentloom_runtime": REPO_ROOT / "runtime" / "agentloom_runtime",
            "agentloom": REPO_ROOT / "functions" / "agentloom"}
PROVIDED_BY_LAMBDA = frozenset({"boto3", "botocore"})
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64", "manylinux_2_34_aarch64")
PYTHON_VERSION = "3.12"
# Test suites shipped inside wheels that nothing imports at run time (numpy's: ~15 MB).
PRUNE = ("numpy/**/tests",)
# The asset's source fingerprint covers only what the bundle is built from (an allow-list:
# glob ignore with negations).
SOURCE_EXCLUDES = ["*", "!pyproject.toml", "!runtime", "!functions", "**/__pycache__",
                   "**/*.pyc"]


class BundleError(RuntimeError):
    """pip could not build the bundle; the message carries pip's last lines."""


def requirements(pyproject: Path = REPO_ROOT / "pyproject.toml") -> list[str]:
    """The distribution's runtime requirements: core + ``aws`` extra, minus what the
    Lambda runtime already has."""
    project = tomllib.loads(pyproject.read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["aws"]]
    return [r for r in wanted if _name(r) not in PROVIDED_BY_LAMBDA]


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    return (match.group(0) if match else requirement).lower().replace("_", "-")


def bundle(out: Path, *, platforms: tuple[str, ...] = PLATFORMS,
           python_version: str = PYTHON_VERSION) -> Path:
    """Install the dependencies and copy the packages into ``out``; returns ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile",
               "--target", str(out), "--only-binary=:all:", "--implementation", "cp",
               "--python-version", python_version, "--upgrade"]
    for platform in platforms:
        command += ["--platform", platform]
    done = subprocess.run([*command, *requirements()], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise BundleError(f"pip install failed ({done.returncode}): {tail}")
    for name, source in PACKAGES.items():
        shutil.rmtree(out / name, ignore_errors=True)
        shutil.copytree(source, out / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for pattern in PRUNE:
        for tests in list(out.glob(pattern)):
            shutil.rmtree(tests, ignore_errors=True)
    for junk in out.glob("**/__pycache__"):
        shutil.rmtree(junk, ignore_errors=True)
    return out


@jsii.implements(ILocalBundling)
class LocalBundler:
    """``try_bundle`` builds the bundle with this machine's pip (CDK then skips Docker)."""

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: Any) -> bool:
        bundle(Path(output_dir))
        return True


def lambda_code() -> lambda_.Code:
    """One asset for all three functions (they differ only by handler)."""
    return lambda_.Code.from_asset(
        str(REPO_ROOT), exclude=SOURCE_EXCLUDES,
        bundling=BundlingOptions(image=lambda_.Runtime.PYTHON_3_12.bundling_image,
                                 local=LocalBundler(),
                                 command=["bash", "-c", "echo local bundling only; exit 1"]))
