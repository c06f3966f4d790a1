"""Issue 17, "Data and state": two processes on one home. ``agentloom serve`` keeps its
SQLite connections open for its whole life; the CLI (or ``serve token``) opens the same
file in another process and closes it again. The second process must leave the server's
WAL alone and the server working."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from agentloom.api.client import Client
from agentloom.api.serve import open_platform
from agentloom.api.serve_options import parser
from agentloom.local.served import serving
from agentloom.platform.identity import Principal

OPEN_AND_CLOSE = """
import sys
from pathlib import Path
from agentloom.local.app import LocalApp
app = LocalApp(Path(sys.argv[1]))
app.tracker.store.sessions.get("nothing")  # what `agentloom show` opens, then closes
app.host()
app.close()
"""


def test_a_cli_process_on_a_served_home_leaves_the_servers_wal_and_the_server_working(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    platform = open_platform(parser().parse_args(["--home", str(home)]))  # as `serve`
    alice = Principal("alice", "token")
    try:
        platform.admin.create_space(alice, "Team")
        wal, shm = home / "agentloom.sqlite3-wal", home / "agentloom.sqlite3-shm"
        assert wal.exists() and shm.exists()
        for _ in range(2):
            done = subprocess.run([sys.executable, "-c", OPEN_AND_CLOSE, str(home)],
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            # the last connection of the other process closed: it must not have found the
            # file unlocked (which lets SQLite checkpoint and delete the server's WAL)
            assert wal.exists() and shm.exists()
        platform.admin.create_space(alice, "Second")
        assert sorted(s.name for s, _ in platform.admin.spaces(alice)) == ["Second", "Team"]
    finally:
        platform.close()


# -- the CLI beside a running `agentloom serve` ------------------------------------------

CONFIG = {"prompt": "Demo.", "model": {"model": "demo"}}


def _cli(home: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTLOOM_PROG",
                                                             "AGENTLOOM_HOME")}
    return subprocess.run([sys.executable, "-m", "agentloom.cli", "--home", home, *args],
                          capture_output=True, text=True, env=env, timeout=120)


@contextlib.contextmanager
def _served(home: str, log: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """``agentloom serve`` on ``home`` (a demo model), its URL and bootstrap output."""
    boot = json.loads(_cli(home, "serve", "bootstrap", "--user", "alice").stdout)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("w") as errors, subprocess.Popen(
            [sys.executable, "-m", "agentloom.cli", "--home", home, "serve", "--port", "0",
             "--model-factory", "agentloom.api.demo:echo"], stdout=subprocess.PIPE,
            stderr=errors, text=True, env=env) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "agentloom serve: http://127.0.0.1:" in line, log.read_text()
            yield line.split()[2].removesuffix("/api/v1"), boot
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0, log.read_text()


def test_the_cli_reads_a_served_home_and_names_the_api_for_the_servers_runs(
        tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    with _served(home, tmp_path / "serve.log") as (url, boot):
        with Client(url, boot["token"]) as client:
            agent = client.create_agent(boot["space_id"], "Demo", CONFIG).agent
            client.publish(boot["space_id"], agent.agent_id)
            session = client.create_session(boot["space_id"], agent.agent_id).session_id
            run = client.ask(session, "hello there").run_id
            list(client.follow(session, run, wait=5))
            assert client.run(session, run).status == "completed"
            # reading works beside the server, and leaves it working
            shown = _cli(home, "show", run)
            assert shown.returncode == 0, shown.stderr
            assert "status: completed" in shown.stdout
            # the command a blocked run's message names, typed on the served home
            refused = _cli(home, "resolve", run, "--send-again")
            assert refused.returncode == 2, refused.stdout
            assert "error (home_served): " in refused.stderr
            assert "of agentloom serve (pid " in refused.stderr and url in refused.stderr
            assert f"`agentloom --home {home} serve token --user alice`" in refused.stderr
            assert f"  next: agentloom --api {url} resolve {session} {run} --send-again" \
                in refused.stderr
            assert _cli(home, "resume", run).returncode == 0  # ended: its answer, read
            assert (Path(home) / "agentloom.sqlite3-wal").exists()
            again = client.ask(session, "and again").run_id
            list(client.follow(session, again, wait=5))
            assert client.run(session, again).status == "completed"
        # a second server on the same home is refused, naming the first
        second = _cli(home, "serve", "--port", "0")
        assert second.returncode == 2
        assert "is served already by agentloom serve (pid " in second.stderr
        assert url in second.stderr
    # the server stopped: its lock file is no lock
    assert serving(Path(home)) is None
