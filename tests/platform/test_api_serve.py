"""``python -m agentloom.api.serve`` as a user runs it: bootstrap prints a token, serve
prints its URL on 127.0.0.1, a question runs to its answer through the client, SIGTERM
stops it cleanly; a non-loopback host is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentloom.api.client import Client
from agentloom.api.serve import main

CONFIG = {"prompt": "Demo.", "model": {"model": "demo"}}


def _serve(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentloom.api.serve", *args]


def test_bootstrap_serve_ask_and_stop(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out = subprocess.run(_serve("bootstrap", "--home", home, "--user", "alice", "--space",
                                "Team"), capture_output=True, text=True, env=env,
                         timeout=120, check=True)
    boot = json.loads(out.stdout)
    assert boot["token"].startswith("agl_") and boot["space_id"].startswith("spc_")
    assert boot["token"] not in (tmp_path / "home" / "agentloom.sqlite3").read_bytes().decode(
        "utf-8", "replace")
    log = (tmp_path / "serve.log").open("w")
    with log, subprocess.Popen(_serve("--home", home, "--port", "0", "--model-factory",
                                      "agentloom.api.demo:echo"), stdout=subprocess.PIPE,
                               stderr=log, text=True, env=env) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "agentloom serve: http://127.0.0.1:" in line, line
            url = line.split()[2].removesuffix("/api/v1")
            with Client(url, boot["token"]) as client:
                agent = client.create_agent(boot["space_id"], "Demo", CONFIG).agent
                client.publish(boot["space_id"], agent.agent_id)
                session = client.create_session(boot["space_id"], agent.agent_id)
                run = client.ask(session.session_id, "hello there")
                events = list(client.follow(session.session_id, run.run_id, wait=5))
                assert events[-1].type == "run.status"
                view = client.run(session.session_id, run.run_id)
                assert view.status == "completed"
                assert view.answer == "[demo model] You asked: hello there"
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(30)
    assert code == 0


def test_serve_refuses_a_host_that_is_not_loopback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--home", str(tmp_path / "h"), "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "loopback" in capsys.readouterr().err
