"""`agentloom serve …` is the platform's HTTP API entry, reached through the CLI, with the
options of `python -m agentloom.api.serve`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agentloom.cli import main


def test_serve_openapi_prints_the_committed_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "openapi"]) == 0
    printed = json.loads(capsys.readouterr().out)
    committed = json.loads((Path(__file__).parents[2] / "docs" / "openapi.json").read_text())
    assert printed == committed


def test_serve_bootstrap_uses_the_cli_home(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "state"
    assert main(["--home", str(home), "serve", "bootstrap", "--user", "alice",
                 "--space", "Team"]) == 0
    out = capsys.readouterr().out
    assert "agl_" in out, "a bearer token is printed once"
    assert (home / "agentloom.sqlite3").exists()


# -- `agentloom serve` takes the options of `python -m agentloom.api.serve` -------------


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentloom.cli", *args]


def _options(text: str) -> set[str]:
    return set(re.findall(r"--[a-z][a-z-]+", text))


def test_serve_help_lists_every_option_python_m_agentloom_api_serve_takes() -> None:
    ours = subprocess.run(_cli("serve", "--help"), capture_output=True, text=True,
                          timeout=60)
    theirs = subprocess.run([sys.executable, "-m", "agentloom.api.serve", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert ours.returncode == 0 and theirs.returncode == 0, ours.stderr + theirs.stderr
    assert ours.stdout.startswith("usage: agentloom serve ")
    assert _options(ours.stdout) == _options(theirs.stdout)
    assert {"--home", "--host", "--port", "--hook-root", "--key-env",
            "--allow-loopback-tools", "--model-factory"} <= _options(ours.stdout)


AGENT_FILE = """agent_id: ignored-by-the-platform
name: Demo agent
prompt: Demo.
model: {model: demo, input_price_per_million: 1.0, output_price_per_million: 1.0}
"""


def test_serve_on_any_port_answers_the_cli_then_stops(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """``agentloom --home H serve --port 0 --allow-loopback-tools --model-factory …``
    listens on 127.0.0.1; the CLI's remote mode creates an agent and a session from a
    file, asks, lists and shows against it; SIGTERM stops it with status 0."""
    home = str(tmp_path / "home")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("AGENTLOOM_PROG", None)
    boot = json.loads(subprocess.run(
        _cli("--home", home, "serve", "bootstrap", "--user", "alice", "--space", "Team"),
        capture_output=True, text=True, env=env, timeout=120, check=True).stdout)
    agent = tmp_path / "agent.yaml"
    agent.write_text(AGENT_FILE)
    log = (tmp_path / "serve.log").open("w")
    with log, subprocess.Popen(_cli("--home", home, "serve", "--port", "0",
                                    "--allow-loopback-tools", "--model-factory",
                                    "agentloom.api.demo:echo"),
                               stdout=subprocess.PIPE, stderr=log, text=True,
                               env=env) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("agentloom serve: http://127.0.0.1:"), line
            url = line.split()[2].removesuffix("/api/v1")
            with httpx.Client(trust_env=False) as http:
                refused = http.get(f"{url}/api/v1/spaces")  # a request answered
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] == "no_token"
            remote = ["--api", url, "--token", boot["token"]]

            assert main([*remote, "--json", "session", "create", "--agent-file",
                         str(agent), "--title", "Demo"]) == 0
            session = json.loads(capsys.readouterr().out)
            assert session["title"] == "Demo" and session["version"] == 1
            assert session["next"] == [f'agentloom --api {url} ask '
                                       f'{session["session_id"]} "a question"']
            assert main([*remote, "ask", session["session_id"], "hello"]) == 0
            assert capsys.readouterr().out.splitlines()[-1] == \
                "[demo model] You asked: hello"
            assert main([*remote, "runs", session["session_id"], "--json"]) == 0
            [run] = json.loads(capsys.readouterr().out)["items"]
            assert run["status"] == "completed" and run["cost"]["calls"] == 2
            assert main([*remote, "sessions"]) == 0
            rows = capsys.readouterr().out.splitlines()
            assert rows[1].split()[:5] == [session["session_id"], session["agent_id"],
                                           "v1", "1", "completed"]
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(30)
    assert code == 0
