"""The console's one-time login links from the command line: ``serve --login USER``
prints one at start (a user in no space gets one of their own), ``serve login --user``
prints another for the running server, and with no server names the command that starts
one. A link's code is traded once; the console token it gives reads the API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from agentloom.cli import main


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentloom.cli", *args]


def _code(link: str) -> str:
    assert "#login=agl_" in link, link
    return link.split("#login=", 1)[1]


def test_login_links_from_the_cli(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    no_server = subprocess.run(_cli("--home", home, "serve", "login", "--user", "ann"),
                               capture_output=True, text=True, timeout=120)
    assert no_server.returncode == 2
    assert "no server is running" in no_server.stderr
    assert "bin/agentloom serve --login ann" in no_server.stderr
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = (tmp_path / "serve.log").open("w")
    with log, subprocess.Popen(_cli("--home", home, "serve", "--port", "0", "--login", "ann"),
                               stdout=subprocess.PIPE, stderr=log, text=True,
                               env=env) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().split()[2].removesuffix("/api/v1")
            assert proc.stdout.readline().startswith(f"console: {url}/")
            first = proc.stdout.readline().strip()
            assert first.startswith("console login link for ann (one use, 10 minutes): ")
            link = first.rsplit(" ", 1)[1]
            assert link.startswith(f"{url}/#login=")
            with httpx.Client(trust_env=False) as http:
                traded = http.post(f"{url}/console/session", json={"code": _code(link)})
                assert traded.status_code == 200, traded.text
                token = traded.json()["token"]
                me = http.get(f"{url}/api/v1/me", headers={"Authorization": f"Bearer {token}"})
                assert me.json()["user_id"] == "ann"
                assert [s["space"]["name"] for s in me.json()["spaces"]] == ["ann's space"]
                again = http.post(f"{url}/console/session", json={"code": _code(link)})
                assert again.status_code == 401
                assert again.json()["error"]["code"] == "login_link_invalid"
                assert "serve login --user" in again.json()["error"]["message"]
                bad = http.post(f"{url}/console/session", content=b"[1]",
                                headers={"Content-Type": "application/json"})
                assert bad.status_code == 400
                printed = subprocess.run(
                    _cli("--home", home, "serve", "login", "--user", "ann"),
                    capture_output=True, text=True, timeout=120, check=True)
                second = json.loads(printed.stdout)
                assert second["login_link"].startswith(f"{url}/#login=")
                assert http.post(f"{url}/console/session",
                                 json={"code": _code(second["login_link"])}).status_code == 200
                out = http.delete(f"{url}/console/session",
                                  headers={"Authorization": f"Bearer {token}"})
                assert out.status_code == 204
                assert http.get(f"{url}/api/v1/me", headers={
                    "Authorization": f"Bearer {token}"}).status_code == 401
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
    assert main(["--home", home, "serve", "token", "--user", "ann", "--list"]) == 0
