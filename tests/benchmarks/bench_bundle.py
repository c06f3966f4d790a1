"""Lambda artifact sizes: builds the code bundle and the tokenizer layer exactly as ``cdk
deploy`` does (infra/agentloom_infra/bundling.py: manylinux aarch64 / CPython 3.12
wheels) into a temp dir and prints, per artifact, its unzipped and zipped size, then the
total per function (code + its layers; Lambda's limit is 250 MB unzipped for the function
and all its layers together, 50 MB zipped per direct upload). The issue's target is
<= 25 MB unzipped for the code bundle.

The public Powertools layer is not downloadable offline: its figure here is the pinned
``aws-lambda-powertools`` wheel installed for the same platform (the published layer is
that package, built by AWS; its exact size is on the layer version, ``aws lambda
get-layer-version-by-arn``).

    .venv/bin/python tests/benchmarks/bench_bundle.py [--host]

``--host`` builds for this machine's platform instead (when the package index offers no
aarch64 wheels; the figures are then labelled so) and, per function, imports its handler
and wiring from its own artifacts alone (``python -S``: no site-packages; the code bundle,
the function's layers, and boto3/botocore beside them as the Lambda runtime provides
them), so a dependency missing from an artifact shows here; api and step also count
tokens with both vendor tokenizers from the layer.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "infra"))

from agentloom_infra.bundling import (
    ELSEWHERE,
    LAYER_PREFIX,
    PLATFORMS,
    PYTHON_VERSION,
    bundle,
    pip_install,
    requirements,
    tokenizer_layer,
)
from agentloom_infra.functions import LAYERS


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _top(root: Path, n: int = 8) -> list[tuple[str, int]]:
    sizes = [(p.name, _size(p) if p.is_dir() else p.stat().st_size) for p in root.iterdir()]
    return sorted(sizes, key=lambda item: -item[1])[:n]


def _zipped(root: Path, tmp: Path) -> tuple[int, int]:
    archive = Path(shutil.make_archive(str(tmp / root.name), "zip", root))
    with zipfile.ZipFile(archive) as zipped:
        return len(zipped.namelist()), archive.stat().st_size


LAMBDA_PROVIDES = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "six.py",
                   "urllib3")
COMMON = ("agentloom.aws.config", "agentloom.aws.platform", "agentloom.observability")
WIRING = {
    "api": ("agentloom.handlers.api", "agentloom.api.app", *COMMON),
    "step": ("agentloom.handlers.step", "agentloom.aws.steps", "agentloom.aws.sandbox",
             "agentloom.command_entry", *COMMON),
    "trigger": ("agentloom.handlers.trigger", "agentloom.triggers",
                "aws_lambda_powertools.utilities.idempotency",
                "aws_lambda_powertools.utilities.batch", "aws_lambda_powertools.metrics",
                *COMMON),
}
COUNT = ("from agentloom_runtime.context import estimator_for\n"
         "for c in ({'provider': 'openai', 'model': 'gpt-4o'},"
         " {'provider': 'deepseek', 'model': 'deepseek-chat'}):\n"
         "    assert estimator_for(c).estimate([{'role': 'user', 'content': 'hi'}], []) > 0\n")


def _check_imports(paths: dict[str, Path], tmp: Path) -> None:
    import boto3

    runtime = tmp / "lambda-runtime"
    runtime.mkdir()
    site = Path(boto3.__file__).resolve().parents[1]
    for name in LAMBDA_PROVIDES:
        if (site / name).exists():
            (runtime / name).symlink_to(site / name)
    for function, modules in WIRING.items():
        layers = [paths[layer] for layer in LAYERS[function]]
        code = f"import importlib\nfor m in {modules!r}: importlib.import_module(m)\n"
        if "tokenizers" in LAYERS[function]:
            code += COUNT
        path = ":".join(str(p) for p in (paths["code"], *layers, runtime))
        done = subprocess.run([sys.executable, "-S", "-W", "ignore", "-c", code], cwd=tmp,
                              text=True, capture_output=True, env={"PYTHONPATH": path},
                              check=False)
        verdict = "ok" if done.returncode == 0 else done.stderr.strip().splitlines()[-1]
        extra = " + exact token counts" if "tokenizers" in LAYERS[function] else ""
        print(f"{function}: {len(modules)} handler/wiring modules{extra} from code + "
              f"{', '.join(LAYERS[function])} alone: {verdict}")


def _build(tmp: Path, host: bool) -> tuple[dict[str, Path], str]:
    platforms: tuple[str, ...] = PLATFORMS
    python = PYTHON_VERSION
    label = f"{', '.join(PLATFORMS)} / cp312"
    if host:
        import sysconfig

        plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        platforms = (f"manylinux2014_{plat.split('_', 1)[1]}",)
        python = f"{sys.version_info.major}.{sys.version_info.minor}"
        label = f"host platform ({plat}, py{python})"
    paths = {"code": bundle(tmp / "code", platforms=platforms, python_version=python),
             "tokenizers": tokenizer_layer(tmp / "tokenizers", platforms=platforms,
                                           python_version=python) / LAYER_PREFIX}
    powertools = [r for r in requirements() if r.startswith("aws-lambda-powertools")]
    pip_install(tmp / "powertools", powertools, platforms, python, "--no-deps")
    paths["powertools"] = tmp / "powertools"
    return paths, label


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", action="store_true", help="build for this platform")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        started = time.perf_counter()
        paths, label = _build(tmp, args.host)
        print(f"artifacts for {label}, built in {time.perf_counter() - started:.1f} s; "
              f"left out of the code bundle: {', '.join(ELSEWHERE)}")
        sizes = {name: _size(path) for name, path in paths.items()}
        for name, path in paths.items():
            files, zipped = _zipped(path, tmp)
            target = " (target <= 25 MB)" if name == "code" else ""
            print(f"{name}: unzipped {sizes[name] / 1e6:.1f} MB{target}, "
                  f"zipped {zipped / 1e6:.1f} MB, {files} files")
            for item, size in _top(path, 8 if name == "code" else 3):
                print(f"  {size / 1e6:7.2f} MB  {item}")
        for function, layers in LAYERS.items():
            total = sizes["code"] + sum(sizes[layer] for layer in layers)
            print(f"function {function}: code + {' + '.join(layers)} = "
                  f"{total / 1e6:.1f} MB unzipped (Lambda limit 250 MB)")
        code = paths["code"]
        assert not (code / "boto3").exists() and not (code / "aws_cdk").exists()
        assert not (code / "numpy").exists() and not (code / "aws_lambda_powertools").exists()
        if args.host:
            _check_imports(paths, tmp)


if __name__ == "__main__":
    main()
