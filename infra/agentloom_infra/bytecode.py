"""Bytecode compiled into the Lambda bundle at build time, for the runtime's own Python.

Lambda's ``/var/task`` is read-only: a module shipped without a matching ``.pyc`` is
compiled from source on every cold start, and the result cannot be cached. A ``.pyc`` is
read only by the Python whose magic number it carries, so the compiler must be an
interpreter of the Lambda runtime's version (``target_python``): this one when its
version is the target, else ``AGENTLOOM_BUNDLE_PYTHON``, else ``python3.12`` (the target)
on ``PATH``; without one the build stops (``BundleError``) rather than ship a bundle that
compiles itself on every cold start.

Every file is compiled with ``unchecked-hash`` invalidation: the bytecode is used without
looking at the source. Timestamp-checked bytecode would be stale whenever the zip
extraction does not keep the source's modification time, and re-checked-hash bytecode
reads and hashes the source on every import; the bundle is immutable, so neither check
can find anything. Third-party modules ship as bytecode alone (the legacy ``foo.pyc`` in
place of ``foo.py``; Python's sourceless loader imports it), which keeps the bundle
smaller than source plus bytecode; their tracebacks name file and line, without the
line's text. Our own packages keep their sources beside ``__pycache__`` so their
tracebacks show the code. A file the target Python cannot compile keeps its source.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ENV = "AGENTLOOM_BUNDLE_PYTHON"

# Run by the target interpreter: argv = root, then the top-level names whose sources stay.
_COMPILE = r"""
import json, os, py_compile, sys
from pathlib import Path
root, keep = Path(sys.argv[1]), set(sys.argv[2:])
mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
done = {"compiled": 0, "sourceless": 0, "failed": []}
for path in sorted(root.rglob("*.py")):
    relative = path.relative_to(root)
    if relative.parts[0].endswith((".dist-info", ".data")) or relative.parts[0] == "bin":
        continue
    ours = relative.parts[0] in keep
    target = None if ours else str(path) + "c"
    try:
        py_compile.compile(str(path), cfile=target, dfile=str(relative),
                           doraise=True, invalidation_mode=mode)
    except py_compile.PyCompileError:
        done["failed"].append(str(relative))
        continue
    done["compiled"] += 1
    if not ours:
        path.unlink()
        done["sourceless"] += 1
print(json.dumps({"magic": __import__("importlib.util").util.MAGIC_NUMBER.hex(),
                  "version": "%d.%d" % sys.version_info[:2], **done}))
"""


class NoTargetPython(RuntimeError):
    """No interpreter of the target version to compile the bundle's bytecode with."""


@dataclass(frozen=True)
class Compiled:
    """What ``compile_bundle`` did: the compiler's version and magic number, the files
    compiled, how many of them ship without their source, and those left as source."""

    version: str
    magic: str
    compiled: int
    sourceless: int
    failed: tuple[str, ...]


def _version_of(python: str) -> str | None:
    try:
        done = subprocess.run([python, "-I", "-c", "import sys; print('%d.%d' % "
                               "sys.version_info[:2])"], capture_output=True, text=True,
                              check=False, timeout=30)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def target_python(version: str, environ: dict[str, str] | None = None) -> str:
    """The interpreter that compiles bytecode for Python ``version`` ("3.12")."""
    environ = dict(os.environ) if environ is None else environ
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    tried = []
    for candidate in (environ.get(ENV), shutil.which(f"python{version}")):
        if not candidate:
            continue
        found = _version_of(candidate)
        if found == version:
            return candidate
        tried.append(f"{candidate} is {found or 'not runnable'}")
    raise NoTargetPython(
        f"the Lambda runtime is Python {version} and this build runs Python "
        f"{sys.version_info.major}.{sys.version_info.minor}: its bytecode would not load "
        f"there. Put python{version} on PATH or set {ENV} to one"
        + (f" ({'; '.join(tried)})" if tried else ""))


def compile_bundle(root: Path, python: str, keep_sources: tuple[str, ...]) -> Compiled:
    """Compile every module under ``root`` with ``python`` (see the module docstring)."""
    done = subprocess.run([python, "-I", "-c", _COMPILE, str(root), *keep_sources],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"compiling the bundle failed: {done.stderr.strip()[-500:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return Compiled(version=result["version"], magic=result["magic"],
                    compiled=result["compiled"], sourceless=result["sourceless"],
                    failed=tuple(result["failed"]))
