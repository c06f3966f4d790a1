"""Issue 9: SIGTERM and SIGINT stop a run with the real resume command (the run's own
id), and a reader that goes away (``show … | head``) ends the CLI quietly."""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e.cli_harness import (
    HELLO,
    Live,
    argv,
    cli,
    cli_env,
    markers,
    state_dir,
    wait_until,
    workspace,
    write_agent,
)

AGENT = str(HELLO / "agent.yaml")


@pytest.mark.parametrize(("sig", "code", "name"), [(signal.SIGTERM, 143, "SIGTERM"),
                                                  (signal.SIGINT, 130, "SIGINT")])
def test_a_signal_prints_the_real_resume_command(sig: int, code: int, name: str) -> None:
    with state_dir() as home:
        live = Live(home, "run", "--agent", AGENT, "--pause", "0.5", "Write release notes")
        assert live.line("← update_plan"), live.lines
        live.kill(sig)
        rc, out, err = live.finish()
        run_id = live.run_id
        assert run_id
        assert rc == code, (rc, out, err)
        assert f"interrupted ({name}): continue with `agentloom --home {home} resume " \
               f"{run_id}`" in err
        assert "RUN_ID" not in err and "Traceback" not in err
        done = cli(home, "resume", run_id)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "■ completed" in done.stdout


def test_a_signal_during_resume_names_the_resumed_run() -> None:
    with state_dir() as home:
        first = Live(home, "run", "--agent", AGENT, "--pause", "0.5", "Write release notes")
        assert first.line("← update_plan"), first.lines
        first.kill()
        first.finish()
        assert first.run_id
        resumed = Live(home, "resume", first.run_id, "--pause", "0.5")
        assert resumed.line("▶ resuming"), resumed.lines
        resumed.kill(signal.SIGTERM)
        rc, _, err = resumed.finish()
        assert rc == 143
        assert f"resume {first.run_id}`" in err


def test_show_into_a_closed_pipe_exits_quietly() -> None:
    with state_dir() as home:
        done = cli(home, "run", "--agent", AGENT, "Write release notes")
        run_id = done.stdout.split("▶ run ")[1].split()[0]
        proc = subprocess.Popen(argv(home, "show", run_id), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=cli_env())
        assert proc.stdout is not None
        proc.stdout.close()  # the reader is gone before the first line
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert err == b""
        piped = subprocess.run(["bash", "-c", " ".join(argv(home, "show", run_id))
                                + " | head -1"], capture_output=True, text=True,
                               env=cli_env(), timeout=60)
        assert piped.stderr == "" and piped.stdout.startswith("[main #1 system]")


def test_a_run_into_a_closed_pipe_goes_on_to_completion(tmp_path: Path) -> None:
    with state_dir() as home:
        proc = subprocess.Popen(argv(home, "run", "--agent", AGENT, "Write release notes"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env())
        assert proc.stdout is not None
        proc.stdout.close()
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert err == b""
        notes = home / "workspaces/spaces/local/agents/hello/sessions/cli/main/notes/release.md"
        assert notes.exists()


def test_cancel_stops_a_driven_run_and_the_session_takes_a_new_question() -> None:
    with state_dir() as home:
        live = Live(home, "run", "--agent", AGENT, "--pause", "1", "Write release notes")
        assert live.line("← update_plan"), live.lines
        assert live.run_id
        busy = cli(home, "run", "--agent", AGENT, "another question")
        assert busy.returncode == 2
        assert f"run {live.run_id} is being driven by process {live.proc.pid}" in busy.stderr
        cancelled = cli(home, "cancel", live.run_id, "--reason", "wrong question")
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
        assert "■ cancelled: wrong question" in cancelled.stdout
        assert 'next: agentloom --home' in cancelled.stdout and "a new question" in \
            cancelled.stdout
        rc, out, err = live.finish()
        assert rc == 3, out + err
        assert f"■ cancelled (run {live.run_id} was cancelled" in out
        again = cli(home, "run", "--agent", AGENT, "the right question")
        assert again.returncode == 0, again.stdout + again.stderr
        ended = cli(home, "resume", live.run_id)  # cancelled is final: ask a new question
        assert ended.returncode == 3, ended.stdout + ended.stderr
        assert f"■ cancelled: wrong question (run {live.run_id} ended; it cannot be " \
               "resumed)" in ended.stdout
        assert 'run --agent AGENT.yaml "a new question"' in ended.stdout


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_a_command_stopped_by_ctrl_c_says_why_it_has_no_exit_code_on_resume(
        tmp_path: Path) -> None:
    """Issue 17: SIGINT while a command runs in the sandbox; the resume shows the
    command's result as stopped (by which signal), never `exit None`."""
    replies: list[dict[str, Any]] = [{"call": {"name": "workspace_command",
                         "arguments": {"command": "echo started >> log.txt; sleep 30"}}},
               {"answer": "done"}]
    with state_dir() as home:
        agent = write_agent(tmp_path, agent_id="ops", demo_replies=replies)
        live = Live(home, "run", "--agent", str(agent), "go")
        log = workspace(home, "ops") / "log.txt"
        assert wait_until(lambda: log.exists() and bool(markers(home)), 30), live.lines
        live.kill(signal.SIGINT)
        rc, _, _ = live.finish()
        assert rc == 130 and live.run_id
        resumed = cli(home, "resume", live.run_id)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        [result] = [ln for ln in resumed.stdout.splitlines() if "← workspace_command" in ln]
        assert result.startswith("  ← workspace_command [error] no exit code: stopped when "
                                 "the run was interrupted or cancelled"), result
        assert "None" not in result


def test_cancelling_a_live_run_prints_no_raw_log_line_on_the_drivers_stderr() -> None:
    """Issue 17: the driver's step that the cancel superseded (CheckpointConflict) is the
    fence working: the driver says "■ cancelled (…)", nothing else reaches its stderr."""
    with state_dir() as home:
        live = Live(home, "run", "--agent", AGENT, "--pause", "2", "Write release notes")
        assert live.line("← update_plan"), live.lines
        assert live.run_id
        cancelled = cli(home, "cancel", live.run_id, "--reason", "wrong question")
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
        rc, out, err = live.finish()
        assert rc == 3 and f"■ cancelled (run {live.run_id} was cancelled" in out, out + err
        assert err == "", err
