"""``bench_bundle.py --host --baseline REF``: the same first invocations, from the bundle
of another commit built the way that commit builds it, interleaved with this checkout's
(one fresh process each, in turn), so a shared machine's load falls on both alike.

The baseline's code bundle is built by its own ``bundling.bundle`` from ``git archive``
of REF; its Powertools is its ``powertools_layer`` when it has one, else the pinned wheel
installed as it is (no bytecode: what the public layer's modules cost then).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

from support.lambda_bundle import first_invocation

ROOT = Path(__file__).resolve().parents[2]
BUILD = """
import sys
from pathlib import Path
root, out, platform, python = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.path.insert(0, str(root / "infra"))
from agentloom_infra import bundling
bundling.bundle(out / "code", platforms=(platform,), python_version=python)
if hasattr(bundling, "powertools_layer"):
    bundling.powertools_layer(out / "powertools", platforms=(platform,), python_version=python)
else:
    wheel = [r for r in bundling.requirements() if r.startswith("aws-lambda-powertools")]
    bundling.pip_install(out / "powertools" / "python", wheel, (platform,), python, "--no-deps")
"""


def build_baseline(ref: str, tmp: Path, platform: str, python: str) -> tuple[Path, Path]:
    """(code bundle, Powertools folder) of ``ref``, built under ``tmp``."""
    source, out = tmp / "baseline-src", tmp / "baseline"
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True,
                             check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(source, filter="data")
    subprocess.run([sys.executable, "-c", BUILD, str(source), str(out), platform, python],
                   check=True, capture_output=True)
    return out / "code", out / "powertools" / "python"


def compare(ref: str, baseline: list[Path], ours: list[Path], home: Path, repeat: int) -> None:
    print(f"\nthe same, interleaved with {ref}'s bundle (CPU of import + _wire(), median of "
          f"{repeat} each):")
    for function in ("step", "api", "trigger"):
        cpu: dict[str, list[float]] = {"base": [], "ours": []}
        modules = {}
        for _ in range(repeat):
            for side, path in (("base", baseline), ("ours", ours)):
                wiring = first_invocation(path, function, home=home)
                cpu[side].append(wiring.cpu_ms)
                modules[side] = wiring.modules
        base, now = statistics.median(cpu["base"]), statistics.median(cpu["ours"])
        print(f"  {function:8s} {ref}: {base:6.0f} ms ({modules['base']} modules)   this "
              f"checkout: {now:6.0f} ms ({modules['ours']} modules)   {now / base - 1:+.0%}")
