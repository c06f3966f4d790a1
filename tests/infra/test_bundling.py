"""What the Lambda bundle is made of (building it needs the package index: see
tests/benchmarks/bench_bundle.py, which builds it and imports the handlers from it)."""

from __future__ import annotations

import tomllib

from agentloom_infra.bundling import PACKAGES, REPO_ROOT, SOURCE_EXCLUDES, requirements


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
        "!pyproject.toml", "!runtime", "!functions"}


def test_one_code_asset_serves_all_three_functions(synthesized):
    codes = {json_key(f["Properties"]["Code"]) for f in
             synthesized.of_type("AWS::Lambda::Function").values()
             if f["Properties"]["Handler"].startswith("agentloom.handlers.")}
    assert len(codes) == 1


def json_key(code):
    import json

    return json.dumps(code, sort_keys=True)
