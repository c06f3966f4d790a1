"""Lambda artifacts and cold start: builds the code bundle and the tokenizer layer exactly as
``cdk deploy`` does (infra/agentloom_infra/bundling.py: manylinux aarch64 / CPython 3.12
wheels, bytecode compiled for the runtime's Python) into a temp dir and prints, per
artifact, its unzipped and zipped size, its files and ``.pyc`` count, then the total per
function (code + its layers; Lambda's limit is 250 MB unzipped for the function and all
its layers together). Targets (issue 18): code <= 25 MB, code + layers <= 50 MB.

Bytecode is compiled by a Python of the runtime's version (``bytecode.target_python``);
without one on this machine the aarch64 build is compiled by this Python for its sizes
only (labelled so: such a bundle would not load on Lambda; ``cdk deploy`` refuses it).

The Powertools layer is built as ``cdk deploy`` builds it (``bundling.powertools_layer``:
the pinned wheel, compiled like the code bundle); a ``powertoolsLayerArn`` layer is
not measured here.

    .venv/bin/python tests/benchmarks/bench_bundle.py [--host [--baseline REF]] [--repeat N]

``--host`` builds for this machine's platform and Python instead, and then runs each
function's first invocation from its own artifacts alone (``support.lambda_bundle``:
``python -S``, the code bundle, its layers and boto3/botocore as the Lambda runtime
provides them; no source tree), N fresh processes each (default 5), printing the medians
of the ``-X importtime`` total (target <= 300 ms), the wall and CPU time of import +
``_wire()``, and the modules loaded; then ``import agentloom_runtime.engine`` from the
bundle (target <= 150 ms) and, from this checkout, ``agentloom run`` on the demo model
until its first model request (target <= 0.5 s; interpreter start included).
``--baseline REF`` then measures the wiring again interleaved with the bundle of commit
REF (``benchmarks/_baseline.py``): the change's effect under the same load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: support
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "infra"))

from agentloom_infra.bundling import (
    ELSEWHERE,
    LAYER_PREFIX,
    PLATFORMS,
    PYTHON_VERSION,
    bundle,
    powertools_layer,
    tokenizer_layer,
)
from agentloom_infra.bytecode import NoTargetPython, target_python
from agentloom_infra.functions import LAYERS
from support.lambda_bundle import (
    importtime_total,
    lambda_runtime,
    median_wiring,
    run,
)

ROOT = Path(__file__).resolve().parents[2]


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _top(root: Path, n: int = 8) -> list[tuple[str, int]]:
    sizes = [(p.name, _size(p) if p.is_dir() else p.stat().st_size) for p in root.iterdir()]
    return sorted(sizes, key=lambda item: -item[1])[:n]


def _zipped(root: Path, tmp: Path) -> tuple[int, int]:
    archive = Path(shutil.make_archive(str(tmp / root.name), "zip", root))
    with zipfile.ZipFile(archive) as zipped:
        return len(zipped.namelist()), archive.stat().st_size


def _build(tmp: Path, host: bool) -> tuple[dict[str, Path], str]:
    platforms: tuple[str, ...] = PLATFORMS
    python = PYTHON_VERSION
    label = f"{', '.join(PLATFORMS)} / cp{python.replace('.', '')}"
    if host:
        import sysconfig

        plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        platforms = (f"manylinux2014_{plat.split('_', 1)[1]}",)
        python = f"{sys.version_info.major}.{sys.version_info.minor}"
        label = f"host platform ({plat}, py{python})"
    compiler = None
    try:
        target_python(python)
    except NoTargetPython as exc:
        print(f"note: {exc}\n  -> compiled by Python {sys.version_info.major}."
              f"{sys.version_info.minor} FOR THE SIZES ONLY (that bytecode would not load "
              f"on Python {python})")
        compiler = sys.executable
    code = bundle(tmp / "code", platforms=platforms, python_version=python,
                  compiler=compiler)
    paths = {"code": code,
             "tokenizers": tokenizer_layer(tmp / "tokenizers", platforms=platforms,
                                           python_version=python,
                                           compiler=compiler) / LAYER_PREFIX}
    paths["powertools"] = powertools_layer(tmp / "powertools", platforms=platforms,
                                           python_version=python,
                                           compiler=compiler) / LAYER_PREFIX
    return paths, label


def _sizes(paths: dict[str, Path], tmp: Path) -> None:
    sizes = {name: _size(path) for name, path in paths.items()}
    for name, path in paths.items():
        files, zipped = _zipped(path, tmp)
        pycs = sum(1 for _ in path.rglob("*.pyc"))
        target = " (target <= 25 MB)" if name == "code" else ""
        print(f"{name}: unzipped {sizes[name] / 1e6:.1f} MB{target}, "
              f"zipped {zipped / 1e6:.1f} MB, {files} files, {pycs} .pyc")
        for item, size in _top(path, 8 if name == "code" else 3):
            print(f"  {size / 1e6:7.2f} MB  {item}")
    bytecode = paths["code"] / "BYTECODE.txt"
    print(f"code bytecode: {bytecode.read_text().strip()}")
    for function, layers in LAYERS.items():
        total = sizes["code"] + sum(sizes[layer] for layer in layers)
        print(f"function {function}: code + {' + '.join(layers)} = "
              f"{total / 1e6:.1f} MB unzipped (target <= 50 MB; Lambda limit 250 MB)")


def _cold_start(paths: dict[str, Path], tmp: Path, repeat: int) -> None:
    path = [paths["code"], paths["powertools"], paths["tokenizers"], lambda_runtime(tmp)]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nfirst invocation from the built bundle alone (median of {repeat} fresh "
          f"processes; import = -X importtime total, target <= 300 ms; this machine: "
          f"{os.cpu_count()} cores, load average {load}):")
    for function in ("step", "api", "trigger"):
        median, last = median_wiring(path, function, home=tmp, repeat=repeat)
        print(f"  {function:8s} import {median.import_ms:6.0f} ms   import+_wire() wall "
              f"{median.wall_ms:6.0f} ms, CPU {median.cpu_ms:6.0f} ms   {last.modules} "
              f"modules")
    engine = []
    for _ in range(repeat):
        done = run(path, "import agentloom_runtime.engine", importtime=True)
        assert done.returncode == 0, done.stderr[-2000:]
        engine.append(importtime_total(done.stderr))
    print(f"  import agentloom_runtime.engine: {statistics.median(engine):6.0f} ms "
          f"(-X importtime total, from the bundle; target <= 150 ms)")


def _against(ref: str, paths: dict[str, Path], tmp: Path, repeat: int) -> None:
    import sysconfig

    from benchmarks._baseline import build_baseline, compare

    platform = "manylinux2014_" + sysconfig.get_platform().split("-", 1)[1].replace("-", "_")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    code, powertools = build_baseline(ref, tmp, platform, python)
    runtime = lambda_runtime(tmp)
    compare(ref, [code, powertools, paths["tokenizers"], runtime],
            [paths["code"], paths["powertools"], paths["tokenizers"], runtime], tmp, repeat)


HOOK = """
import os, sys, time
from agentloom_runtime.testing import keyed
async def first_request(self, request):
    print(f"FIRST {time.time():.6f} {time.process_time():.6f}", flush=True)
    os._exit(0)
keyed.KeyedScriptModel.invoke = first_request
from agentloom.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _first_model_request(tmp: Path, repeat: int) -> None:
    """``agentloom run`` on the demo example until the demo model is first asked: wall
    time from spawning the interpreter, and the process's CPU time, with bytecode (one
    unmeasured run compiles the checkout's modules first)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = f"{ROOT / 'runtime'}:{ROOT / 'functions'}"
    agent = ROOT / "docs" / "examples" / "hello" / "agent.yaml"
    walls, cpus = [], []
    for attempt in range(repeat + 1):
        home = tmp / f"home-{attempt}"
        started = time.time()
        done = subprocess.run([sys.executable, "-c", HOOK, "--home", str(home), "run",
                               "--agent", str(agent), "hi"], capture_output=True, text=True,
                              env=env, check=False, timeout=300)
        line = next((x for x in done.stdout.splitlines() if x.startswith("FIRST ")), None)
        assert line is not None, done.stdout[-1000:] + done.stderr[-2000:]
        if attempt:
            walls.append(float(line.split()[1]) - started)
            cpus.append(float(line.split()[2]))
    print(f"  agentloom run (demo model) to its first model request: "
          f"{statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU "
          f"(median of {repeat}; target <= 0.5 s)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", action="store_true", help="build for this platform")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline", help="a commit to compare the wiring with (--host)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        started = time.perf_counter()
        paths, label = _build(tmp, args.host)
        print(f"artifacts for {label}, built in {time.perf_counter() - started:.1f} s; "
              f"left out of the code bundle: {', '.join(ELSEWHERE)}")
        _sizes(paths, tmp)
        code = paths["code"]
        assert not (code / "boto3").exists() and not (code / "aws_cdk").exists()
        assert not (code / "numpy").exists() and not (code / "aws_lambda_powertools").exists()
        if args.host:
            _cold_start(paths, tmp, args.repeat)
            _first_model_request(tmp, args.repeat)
        if args.host and args.baseline:
            _against(args.baseline, paths, tmp, args.repeat)


if __name__ == "__main__":
    main()
