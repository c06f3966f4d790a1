"""The supported Powertools range, both ends. ``pyproject.toml``'s ``aws`` and ``serve``
extras name one range and ``docs/deploy.md`` says it; the newest end is the one the test
environment installs (the whole suite runs on it); this module installs the lowest
(``pip install --no-deps --target``, once per machine, under the user's cache) and runs
a representative subset on it in a subprocess: the OpenAPI document, the Lambda handler's
gate and error envelopes, a real HTTP server round trip and concurrent asks, concurrent
requests keeping their own state, the trigger handler (idempotency, batch). It fails,
never skips, when the registry cannot be reached.

Also, on whichever version runs it: a request held inside its route while another request
is resolved still sees its own event, Lambda context and principal (``serve`` answers on
many threads)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, cast

import pytest
from aws_lambda_powertools.event_handler.openapi.params import Query
from packaging.requirements import Requirement
from packaging.version import Version

from agentloom.api.app import build_app
from agentloom.platform.identity import JwtClaims

ROOT = Path(__file__).resolve().parents[2]
DIST = "aws-lambda-powertools"
SUBSET = (
    "tests/platform/test_api_contract.py::test_the_committed_openapi_document_is_current",
    "tests/platform/test_api_contract.py::"
    "test_every_route_declares_its_errors_with_the_error_model",
    "tests/platform/test_api_contract.py::test_the_lambda_handler_takes_identity_from_jwt_claims",
    "tests/platform/test_api_contract.py::test_the_gate_and_the_error_shapes",
    "tests/platform/test_api_contract.py::test_a_question_too_long_is_413_and_a_bad_limit_is_422",
    "tests/platform/test_api_runs.py::test_ask_follow_events_and_read_the_answer",
    "tests/platform/test_api_request_errors.py::"
    "test_a_body_that_is_not_declared_json_is_415_on_every_route",
    "tests/platform/test_api_request_errors.py::test_a_method_no_route_has_is_405_with_allow",
    "tests/platform/test_api_runs.py::test_50_simultaneous_asks_make_exactly_one_run",
    "tests/functional/test_powertools_range.py::"
    "test_a_held_request_keeps_its_own_event_context_and_principal",
    "tests/functional/triggers/test_trigger_handler.py::"
    "test_the_handler_serves_each_shape_through_the_configured_service",
)
# One process: report the Powertools it imported, run the subset on it, count the outcomes.
RUNNER = """
import collections, sys
from importlib.metadata import version
import aws_lambda_powertools, pytest
from aws_lambda_powertools.shared.version import VERSION
print("powertools", VERSION, version("aws-lambda-powertools"), aws_lambda_powertools.__file__,
      flush=True)

class Count:
    outcomes = collections.Counter()

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            self.outcomes[report.outcome] += 1

code = pytest.main(["-p", "no:cacheprovider", "-rfEs", *sys.argv[1:]], plugins=[Count()])
print("outcomes", dict(Count.outcomes), flush=True)
sys.exit(code)
"""


def powertools_requirements() -> dict[str, Requirement]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    found: dict[str, Requirement] = {}
    for extra in ("aws", "serve"):
        for line in extras[extra]:
            requirement = Requirement(line)
            if requirement.name == DIST:
                found[extra] = requirement
    return found


def bounds() -> tuple[str, str]:
    """The extras' range as (lowest allowed, first excluded)."""
    by_operator = {s.operator: s.version for s in powertools_requirements()["aws"].specifier}
    assert set(by_operator) == {">=", "<"}, by_operator
    return by_operator[">="], by_operator["<"]


def test_the_extras_and_the_deploy_guide_name_one_range() -> None:
    found = powertools_requirements()
    assert set(found) == {"aws", "serve"}, found
    assert found["aws"].specifier == found["serve"].specifier, found
    low, high = bounds()
    assert f"`>={low},<{high}`" in (ROOT / "docs" / "deploy.md").read_text(), (
        f"docs/deploy.md does not state the extras' Powertools range >={low},<{high}")


def _installed(version: str) -> Path:
    """``aws-lambda-powertools==version`` in a directory of its own, installed once (a
    finished install is renamed into place, so parallel workers never see half of one)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = cache / "agentloom" / "test-powertools" / version
    if (target / "aws_lambda_powertools").is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=target.parent))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--no-deps", "--no-compile", "--target", str(scratch), f"{DIST}=={version}"],
            capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            pytest.fail(f"could not install {DIST}=={version} from the package registry "
                        f"(the lowest version the extras allow must be tested, so this "
                        f"fails rather than skips):\n{done.stderr[-2000:]}")
        try:
            scratch.rename(target)
        except OSError:  # another worker finished first
            if not (target / "aws_lambda_powertools").is_dir():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def test_the_api_tests_pass_on_the_lowest_powertools_the_extras_allow() -> None:
    version = bounds()[0]
    target = _installed(version)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(target), os.environ.get("PYTHONPATH", "")) if p)}
    done = subprocess.run([sys.executable, "-c", RUNNER, *SUBSET], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    output = done.stdout + done.stderr
    seen = re.search(r"^powertools (\S+) (\S+) (\S+)$", done.stdout, re.MULTILINE)
    assert seen, output[-3000:]
    assert Version(seen.group(1)) == Version(seen.group(2)) == Version(version), seen.group(0)
    assert Path(seen.group(3)).is_relative_to(target), seen.group(0)
    assert done.returncode == 0, output[-6000:]
    counted = re.search(r"^outcomes (.*)$", done.stdout, re.MULTILINE)
    assert counted and counted.group(1) == repr({"passed": len(SUBSET)}), output[-3000:]


# -- concurrent requests keep their own state ------------------------------------------


def _event(path: str, user: str, query: dict[str, str] | None = None) -> dict[str, Any]:
    """An HTTP API payload 2.0 event behind the JWT authorizer."""
    return {"version": "2.0", "routeKey": "$default", "rawPath": path,
            "rawQueryString": "&".join(f"{k}={v}" for k, v in (query or {}).items()),
            "queryStringParameters": query, "headers": {"accept": "application/json"},
            "requestContext": {
                "accountId": "123456789012", "apiId": "api", "domainName": "api.example.com",
                "domainPrefix": "api", "requestId": f"req-{user}", "routeKey": "$default",
                "stage": "$default", "time": "01/Jan/2026:00:00:00 +0000", "timeEpoch": 0,
                "http": {"method": "GET", "path": path, "protocol": "HTTP/1.1",
                         "sourceIp": "192.0.2.1", "userAgent": "test"},
                "authorizer": {"jwt": {"claims": {"sub": user}, "scopes": None}}},
            "body": None, "isBase64Encoded": False}


def test_a_held_request_keeps_its_own_event_context_and_principal() -> None:
    entered, release = threading.Event(), threading.Event()

    def probe_routes(app: Any, admin: Any, sessions: Any) -> None:
        @app.get("/api/v1/probe/<name>")
        def probe(name: str, hold: Annotated[bool, Query()] = False) -> dict[str, Any]:
            if hold:
                entered.set()
                assert release.wait(20)
            return {"name": name, "path": app.current_event.path,
                    "user": app.principal().user_id,
                    "context": app.lambda_context.aws_request_id}

    app = build_app(cast(Any, None), cast(Any, None), JwtClaims(),
                    extra_routes=[probe_routes])
    held: dict[str, Any] = {}

    def ask_held() -> None:
        held.update(app.resolve(_event("/api/v1/probe/a", "alice", {"hold": "true"}),
                                SimpleNamespace(aws_request_id="ctx-a")))

    thread = threading.Thread(target=ask_held)
    thread.start()
    try:
        assert entered.wait(20), "the held request never reached its route"
        other = app.resolve(_event("/api/v1/probe/b", "bob"),
                            SimpleNamespace(aws_request_id="ctx-b"))
    finally:
        release.set()
        thread.join(20)
    assert other["statusCode"] == 200, other
    assert json.loads(other["body"]) == {"name": "b", "path": "/api/v1/probe/b",
                                         "user": "bob", "context": "ctx-b"}
    assert held["statusCode"] == 200, held
    assert json.loads(held["body"]) == {"name": "a", "path": "/api/v1/probe/a",
                                        "user": "alice", "context": "ctx-a"}
    assert app.context == {}  # nothing of a request is left for the next one
