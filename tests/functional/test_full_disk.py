"""Issue 17, "Data and state": a full disk. Reading a home must work when nothing can be
written to it (``show``, ``runs``), and a command whose result cannot be saved stops the
CLI with the command that moves the run on once space is freed.

A full disk is simulated at the seams (every SQLite connection ``query_only``: any write
fails; the result writer raising ENOSPC); ``test_full_disk_real.py`` fills a real small
tmpfs where bubblewrap can mount one."""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.cli_harness import has_bwrap, state_dir, write_agent

from agentloom.cli import main
from agentloom_runtime.workspace import commands
from agentloom_runtime.workspace._paths import os_fail

needs_sandbox = pytest.mark.skipif(not has_bwrap(), reason="needs bubblewrap")


@pytest.fixture(autouse=True)
def _demo_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "DEEPSEEK_API_KEY", "AGENTLOOM_HOME", "AGENTLOOM_PROG"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def home() -> Iterator[Path]:
    with state_dir() as folder:  # traversable: as root, commands run as nobody
        yield folder / "home"


def _writes_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every SQLite connection opened from now on refuses to write (as a full disk
    does: SQLite answers a write it cannot make with an error)."""
    connect = sqlite3.connect

    def read_only(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.execute("PRAGMA query_only = ON")
        return conn

    monkeypatch.setattr(sqlite3, "connect", read_only)


def _run_id(out: str) -> str:
    return next(line.split()[2] for line in out.splitlines() if line.startswith("▶ run "))


def test_show_and_runs_read_a_home_where_nothing_can_be_written(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    agent = write_agent(tmp_path / "agent", agent_id="notes", tools=["workspace"],
                        demo_replies=[{"answer": "noted"}])
    assert main(["--home", str(home), "run", "--agent", str(agent), "note it"]) == 0
    run_id = _run_id(capsys.readouterr().out)
    _writes_fail(monkeypatch)
    assert main(["--home", str(home), "show", run_id]) == 0, capsys.readouterr().err
    shown = capsys.readouterr().out
    assert "status: completed" in shown and "note it" in shown
    assert main(["--home", str(home), "runs"]) == 0, capsys.readouterr().err
    assert run_id in capsys.readouterr().out


@needs_sandbox
def test_a_command_result_the_full_disk_cannot_hold_names_the_way_on(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    agent = write_agent(tmp_path / "agent", agent_id="fill", demo_replies=[
        {"call": {"name": "workspace_command", "arguments": {"command": "echo filled"}}},
        {"answer": "done"}])
    real = commands.write_result

    def disk_full(results_dir: str | Path, result: commands.CommandResult) -> None:
        os_fail(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), f"{result.request_id}.json")

    monkeypatch.setattr(commands, "write_result", disk_full)
    assert main(["--home", str(home), "run", "--agent", str(agent), "fill it"]) == 2
    captured = capsys.readouterr()
    run_id = _run_id(captured.out)
    assert f"error (no_space): command {run_id}.main." in captured.err
    assert "No space left on device" in captured.err
    assert f"next: agentloom --home {home} resume {run_id}" in captured.err
    # space freed: the resume stops on the command (its result is unknown), the verdict
    # records its output and the run goes on
    monkeypatch.setattr(commands, "write_result", real)
    assert main(["--home", str(home), "resume", run_id]) == 3
    resumed = capsys.readouterr().out
    assert "■ blocked (tool_outcome_unknown)" in resumed
    assert f"next: agentloom --home {home} resolve {run_id} --ran" in resumed
    assert main(["--home", str(home), "resolve", run_id, "--ran", "--output", "filled",
                 "--exit-code", "0"]) == 0, capsys.readouterr().err
    assert "■ completed" in capsys.readouterr().out


# -- a real full disk: a small tmpfs that bubblewrap mounts -------------------------------

DRIVER = r"""
import json, subprocess, sys
from pathlib import Path
home, agent, big = sys.argv[1], sys.argv[2], sys.argv[3]
def cli(*args):
    done = subprocess.run([sys.executable, "-m", "agentloom.cli", "--home", home, *args],
                          capture_output=True, text=True, timeout=120)
    print(json.dumps({"args": args, "rc": done.returncode, "out": done.stdout,
                      "err": done.stderr}), flush=True)
    return done
ran = cli("run", "--agent", agent, "fill the disk")
run_id = next(l.split()[2] for l in ran.stdout.splitlines() if l.startswith("▶ run "))
cli("show", run_id)
for path in Path(home).glob(big):
    path.unlink()  # space freed
cli("resume", run_id)
cli("resolve", run_id, "--ran", "--output", "filled", "--exit-code", "0")
"""


CLOSED_THEN_FULL = r"""
import json, subprocess, sys
from pathlib import Path
home, agent = sys.argv[1], sys.argv[2]
def cli(*args):
    done = subprocess.run([sys.executable, "-m", "agentloom.cli", "--home", home, *args],
                          capture_output=True, text=True, timeout=120)
    print(json.dumps({"args": args, "rc": done.returncode, "out": done.stdout,
                      "err": done.stderr}), flush=True)
    return done
ran = cli("run", "--agent", agent, "note it")
run_id = next(l.split()[2] for l in ran.stdout.splitlines() if l.startswith("▶ run "))
# the disk fills after the run; unbuffered, so no partial write is left to flush at close
# (whatever the free space is a multiple of)
with open(Path(home).parent / "fill", "wb", buffering=0) as fill:
    try:
        while True:
            fill.write(b"\0" * 65536)
    except OSError:
        pass
print(json.dumps({"wal": sorted(p.name for p in Path(home).glob("*-wal"))}), flush=True)
cli("show", run_id)
cli("runs")
"""


def _sized_tmpfs() -> bool:
    """Whether bubblewrap can mount a size-limited tmpfs here (root, or user namespaces)."""
    if not has_bwrap():
        return False
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        probe = subprocess.run(["bwrap", "--dev-bind", "/", "/", "--perms", "0711",
                                "--size", "1048576", "--tmpfs", folder, "true"],
                               capture_output=True, timeout=60)
    return probe.returncode == 0


@pytest.mark.skipif(not _sized_tmpfs(), reason="bubblewrap cannot mount a sized tmpfs here")
def test_a_disk_that_fills_during_a_command_is_read_by_show_and_recovered(
        tmp_path: Path) -> None:
    """The command fills a 8 MB tmpfs holding the home: its result cannot be saved. The
    CLI names the way on; ``show`` reads the full home; once space is freed ``resume``
    stops on the command and ``resolve --ran`` completes the run."""
    import json
    import subprocess
    import sys

    agent = write_agent(tmp_path / "agent", agent_id="fill", demo_replies=[
        {"call": {"name": "workspace_command", "arguments": {
            "command": "head -c 100000000 /dev/zero > big; echo filled"}}},
        {"answer": "done"}])
    with state_dir() as disk:
        home = disk / "home"
        done = subprocess.run(
            ["bwrap", "--dev-bind", "/", "/", "--perms", "0711", "--size", "8000000",
             "--tmpfs", str(disk), sys.executable, "-c", DRIVER, str(home), str(agent),
             "workspaces/spaces/*/agents/fill/sessions/cli/main/big"],
            capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    steps = [json.loads(line) for line in done.stdout.splitlines()]
    ran, shown, resumed, resolved = steps
    assert ran["rc"] == 2 and "error (no_space): command " in ran["err"], ran
    assert "No space left on device" in ran["err"]
    assert "  next: " in ran["err"] and " resume " in ran["err"]
    assert shown["rc"] == 0, shown["err"]
    assert "interrupted: no process drives it" in shown["out"]
    assert resumed["rc"] == 3 and "■ blocked (tool_outcome_unknown)" in resumed["out"]
    assert resolved["rc"] == 0 and "■ completed" in resolved["out"], resolved


@pytest.mark.skipif(not _sized_tmpfs(), reason="bubblewrap cannot mount a sized tmpfs here")
def test_show_reads_a_home_whose_disk_filled_after_it_was_closed(tmp_path: Path) -> None:
    """No process has the home open (SQLite removed its -wal and -shm at the last close):
    reading it must size a new -shm, which the full disk refuses; a reader then opens the
    database read-only without one."""
    import json
    import subprocess
    import sys

    agent = write_agent(tmp_path / "agent", agent_id="notes", tools=["workspace"],
                        demo_replies=[{"answer": "noted"}])
    with state_dir() as disk:
        done = subprocess.run(
            ["bwrap", "--dev-bind", "/", "/", "--perms", "0711", "--size", "8000000",
             "--tmpfs", str(disk), sys.executable, "-c", CLOSED_THEN_FULL,
             str(disk / "home"), str(agent)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    ran, closed, shown, listed = (json.loads(line) for line in done.stdout.splitlines())
    assert ran["rc"] == 0, ran
    assert closed["wal"] == []  # the last close checkpointed and removed it
    assert shown["rc"] == 0, shown["err"]
    assert "status: completed" in shown["out"] and "note it" in shown["out"]
    assert listed["rc"] == 0 and "completed" in listed["out"], listed
