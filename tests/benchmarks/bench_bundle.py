"""Lambda bundle size: builds the bundle exactly as ``cdk deploy`` does (infra/
agentloom_infra/bundling.py: manylinux aarch64 / CPython 3.12 wheels of the runtime
dependencies + the two packages) into a temp dir and prints its unzipped and zipped size
(target <= 25 MB unzipped; Lambda's limit is 250 MB unzipped, 50 MB zipped upload).

    .venv/bin/python tests/benchmarks/bench_bundle.py [--host]

``--host`` builds for this machine's platform instead (when the package index offers no
aarch64 wheels; the figure is then labelled so) and imports every handler and its wiring
from the bundle alone (``python -S``: no site-packages, only boto3/botocore beside it, as
the Lambda runtime provides them), so a dependency missing from the bundle shows here.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "infra"))

from agentloom_infra.bundling import PLATFORMS, bundle, requirements


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _top(root: Path, n: int = 8) -> list[tuple[str, int]]:
    sizes = [(p.name, _size(p) if p.is_dir() else p.stat().st_size) for p in root.iterdir()]
    return sorted(sizes, key=lambda item: -item[1])[:n]


LAMBDA_PROVIDES = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "six.py",
                   "urllib3")
WIRING = ("agentloom.handlers.api", "agentloom.handlers.step", "agentloom.handlers.trigger",
          "agentloom.aws.platform", "agentloom.api.app", "agentloom.triggers",
          "agentloom.observability", "agentloom.command_entry",
          "aws_lambda_powertools.utilities.idempotency",
          "aws_lambda_powertools.utilities.batch", "aws_lambda_powertools.metrics")


def _check_imports(out: Path, tmp: Path) -> None:
    import subprocess

    import boto3

    runtime = tmp / "lambda-runtime"
    runtime.mkdir()
    site = Path(boto3.__file__).resolve().parents[1]
    for name in LAMBDA_PROVIDES:
        if (site / name).exists():
            (runtime / name).symlink_to(site / name)
    code = f"import importlib\nfor m in {WIRING!r}: importlib.import_module(m)"
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp, text=True,
                          capture_output=True, env={"PYTHONPATH": f"{out}:{runtime}"},
                          check=False)
    verdict = "ok" if done.returncode == 0 else done.stderr.strip().splitlines()[-1]
    print(f"imports of {len(WIRING)} handler/wiring modules from the bundle alone: {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", action="store_true", help="build for this platform")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bundle"
        started = time.perf_counter()
        if args.host:
            import sysconfig

            plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
            bundle(out, platforms=(f"manylinux2014_{plat.split('_', 1)[1]}",),
                   python_version=f"{sys.version_info.major}.{sys.version_info.minor}")
            label = f"host platform ({plat}, py{sys.version_info.major}."\
                    f"{sys.version_info.minor})"
        else:
            bundle(out)
            label = f"{', '.join(PLATFORMS)} / cp312"
        took = time.perf_counter() - started
        archive = Path(shutil.make_archive(str(Path(tmp) / "bundle"), "zip", out))
        with zipfile.ZipFile(archive) as zipped:
            files = len(zipped.namelist())
        print(f"bundle for {label}: {len(requirements())} requirements, {files} files, "
              f"built in {took:.1f} s")
        print(f"unzipped {_size(out) / 1e6:.1f} MB (target <= 25 MB), "
              f"zipped {archive.stat().st_size / 1e6:.1f} MB")
        for name, size in _top(out):
            print(f"  {size / 1e6:7.2f} MB  {name}")
        assert not (out / "boto3").exists() and not (out / "aws_cdk").exists()
        if args.host:
            _check_imports(out, Path(tmp))


if __name__ == "__main__":
    main()
