"""Issue 17, "Data and state": the files of an embedded home. Every file is its owner's
alone (0600; directories 0700, or 0711 on a root host whose commands run as ``nobody``
and must traverse to their workspace), whoever opened the home first (``agentloom
serve`` opens its capability stores before its checkpoint store); and a command's
output does not stay in the lock area once the run's commit holds it."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.cli_harness import has_bwrap, state_dir, write_agent

from agentloom.api.serve import open_platform
from agentloom.api.serve_options import parser
from agentloom.cli import main

needs_sandbox = pytest.mark.skipif(not has_bwrap(), reason="needs bubblewrap")
OUTPUT = "the-teal-command-output-5521"
REPLIES: list[dict[str, Any]] = [
    {"call": {"name": "workspace_write", "arguments": {"path": "notes/a.md",
                                                       "content": "written by a tool"}}},
    {"call": {"name": "workspace_command", "arguments": {
        "command": f"mkdir -p made && echo {OUTPUT} | tee made/by-command.txt"}}},
    {"answer": "done"}]


@pytest.fixture(autouse=True)
def _demo_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "DEEPSEEK_API_KEY", "AGENTLOOM_HOME", "AGENTLOOM_PROG"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def home() -> Iterator[Path]:
    with state_dir() as folder:  # traversable: as root, commands run as nobody
        yield folder / "home"


def _run(home: Path, tmp_path: Path) -> None:
    agent = write_agent(tmp_path / "agent", agent_id="files", demo_replies=REPLIES)
    assert main(["--home", str(home), "run", "--agent", str(agent), "make files"]) == 0


@needs_sandbox
def test_a_commands_output_is_not_left_in_the_lock_area_after_its_commit(
        home: Path, tmp_path: Path) -> None:
    _run(home, tmp_path)
    left = sorted(home.glob("workspaces/.agentloom-locks/*/results/*"))
    assert left == [], left
    for path in home.glob("workspaces/.agentloom-locks/**/*"):
        if path.is_file():
            assert OUTPUT.encode() not in path.read_bytes(), path


@needs_sandbox
def test_every_file_of_a_home_is_its_owners_alone(home: Path, tmp_path: Path) -> None:
    served = open_platform(parser().parse_args(["--home", str(home)]))  # serve's order
    served.close()
    _run(home, tmp_path)
    made = home / "workspaces" / "spaces" / "local" / "agents" / "files" / "sessions" / \
        "cli" / "main" / "made" / "by-command.txt"
    assert made.read_text().strip() == OUTPUT  # the command ran and wrote
    # as root the sandbox user must traverse (x) the directories to its workspace
    others = 0o066 if os.geteuid() == 0 else 0o077
    loose = []
    for path in [home, *home.rglob("*")]:
        found = path.lstat()
        if stat.S_ISDIR(found.st_mode) and found.st_mode & others:
            loose.append(f"{oct(found.st_mode & 0o777)} {path}")
        elif stat.S_ISREG(found.st_mode) and found.st_mode & 0o077:
            loose.append(f"{oct(found.st_mode & 0o777)} {path}")
    assert loose == [], "\n".join(loose)
    for name in ("agentloom.sqlite3", "agentloom.key"):
        assert (home / name).stat().st_mode & 0o777 == 0o600, name
