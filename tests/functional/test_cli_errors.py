"""Issue 9: what a person gets wrong gets a clear error (exit 2, ``error (code): message``),
never a traceback, and nothing is stored or created on the way."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from e2e.cli_harness import HELLO, cli

AGENT = str(HELLO / "agent.yaml")


def _refused(proc: object, *needles: str) -> str:
    rc, err = proc.returncode, proc.stderr  # type: ignore[attr-defined]
    assert rc == 2, (rc, err, proc.stdout)  # type: ignore[attr-defined]
    assert err.startswith("error ("), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return str(err)


def test_a_non_utf8_agent_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "agent.yaml"
    bad.write_bytes(b"agent_id: x\nname: caf\xe9\n")
    _refused(cli(tmp_path / "home", "run", "--agent", str(bad), "hi"),
             "error (invalid_snapshot)", "not UTF-8")
    assert not (tmp_path / "home").exists()


def test_a_device_as_agent_file_is_a_clear_error(tmp_path: Path) -> None:
    _refused(cli(tmp_path / "home", "run", "--agent", "/dev/zero", "hi"),
             "/dev/zero is not a regular file")


def test_a_fifo_as_agent_file_is_a_clear_error_and_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "agent.yaml"
    os.mkfifo(fifo)
    _refused(cli(tmp_path / "home", "run", "--agent", str(fifo), "hi", timeout=20),
             "is not a regular file")


def test_unknown_tool_group_names_are_a_clear_error(tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text("agent_id: x\nmodel: {model: m}\ntools: [workspaces, shell]\n")
    _refused(cli(tmp_path / "home", "run", "--agent", str(agent), "hi"),
             "unknown tool group or tool 'workspaces', 'shell'", "allowed: ")


def test_a_home_that_is_a_file_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("not a directory")
    _refused(cli(home, "run", "--agent", AGENT, "hi"), "error (state_dir_unusable)",
             "is not a directory")
    _refused(cli(home / "below", "run", "--agent", AGENT, "hi"), "is not a directory")
    _refused(cli(home, "show", "abc"), "is not a directory")


def test_an_unwritable_home_is_refused(tmp_path: Path) -> None:
    if os.geteuid() == 0:  # root writes anywhere the kernel lets it: use a place it cannot
        home = Path("/proc/agentloom-test/home")
        _refused(cli(home, "run", "--agent", AGENT, "hi"), "error (state_dir_unusable)",
                 "cannot be")
        return
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    _refused(cli(locked / "home", "run", "--agent", AGENT, "hi"), "not writable")
    _refused(cli(locked, "run", "--agent", AGENT, "hi"), "is not writable")


@pytest.mark.parametrize("command", [["resume", "abc"], ["show", "abc"],
                                     ["resolve", "abc"], ["resolve", "abc", "--ran"]])
def test_commands_on_a_missing_home_refuse_and_create_nothing(tmp_path: Path,
                                                              command: list[str]) -> None:
    home = tmp_path / "missing"
    _refused(cli(home, *command), "error (state_dir_unusable)", "does not exist",
             "the run was started with")
    assert not home.exists()


def test_a_home_without_runs_is_refused_without_creating_a_database(tmp_path: Path) -> None:
    _refused(cli(tmp_path, "resume", "abc"), "holds no runs")
    assert list(tmp_path.iterdir()) == []


def test_a_question_over_the_limit_is_refused_before_anything_is_stored(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    err = _refused(cli(home, "run", "--agent", AGENT, "x" * 100_001),
                   "error (input_too_large)", "100,001 characters", "the limit is 100,000")
    assert "Traceback" not in err
    big = tmp_path / "question.txt"
    big.write_text("y" * 100_001)
    _refused(cli(home, "run", "--agent", AGENT, "--question-file", str(big)),
             "question file has 100,001 characters")
    _refused(cli(home, "run", "--agent", AGENT, "--question-file", "-",
                 stdin="z" * 250_000), "question from stdin")
    assert not home.exists()  # nothing was stored, not even the state directory


def test_an_unbounded_question_file_is_refused_after_the_limit(tmp_path: Path) -> None:
    _refused(cli(tmp_path / "home", "run", "--agent", AGENT, "--question-file", "/dev/zero"),
             "is not a regular file or a pipe")


def test_question_input_mistakes_are_clear(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _refused(cli(home, "run", "--agent", AGENT), "no question")
    _refused(cli(home, "run", "--agent", AGENT, "   "), "the question is empty")
    _refused(cli(home, "run", "--agent", AGENT, "--question-file", str(tmp_path / "nope")),
             "does not exist")
    _refused(cli(home, "run", "--agent", AGENT, "--question-file", str(tmp_path)),
             "is a directory")
    latin = tmp_path / "latin1.txt"
    latin.write_bytes(b"caf\xe9?")
    _refused(cli(home, "run", "--agent", AGENT, "--question-file", str(latin)),
             "is not UTF-8 text")
    (tmp_path / "q.txt").write_text("hi")
    _refused(cli(home, "run", "--agent", AGENT, "--question-file", str(tmp_path / "q.txt"),
                 "also an argument"), "not both")
    assert not home.exists()


def test_verdict_details_go_with_ran_only(tmp_path: Path) -> None:
    _refused(cli(tmp_path, "resolve", "abc", "--did-not-run", "--output", "x"),
             "error (usage)", "go with --ran")


def test_a_broken_demo_script_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text((HELLO / "agent.yaml").read_text())
    script = tmp_path / "demo-script.yaml"
    for text, needle in ((b"replies: [1, 2]\n", "needs 'answer' or 'call'"),
                         (b"replies: {a: [\n", "not valid YAML"),
                         (b"\xff\xfe", "not UTF-8"), (b"[]\n", "no replies")):
        script.write_bytes(text)
        _refused(cli(tmp_path / "home", "run", "--agent", str(tmp_path / "agent.yaml"), "hi"),
                 needle)


def test_hooks_without_a_package_are_a_clear_error(tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text((HELLO / "agent.yaml").read_text() + "hooks:\n  - {hook_id: audit, "
                     "version: '1', point: tool.before}\n")
    (tmp_path / "demo-script.yaml").write_text((HELLO / "demo-script.yaml").read_text())
    _refused(cli(tmp_path / "home", "run", "--agent", str(agent), "hi"),
             "binds hooks (audit@1) but lists no hook_packages")
    agent.write_text(agent.read_text() + "hook_packages: [missing]\n")
    _refused(cli(tmp_path / "home", "run", "--agent", str(agent), "hi"),
             f"hook package {tmp_path / 'missing'} does not exist")
    assert not (tmp_path / "home").exists()


def test_an_exit_code_that_is_no_exit_status_or_signal_is_refused(tmp_path: Path) -> None:
    """Issue 17: `--exit-code` is 0..255 or -1..-64 (a signal); anything else is refused
    before anything is read, sent or recorded — embedded and against a deployment."""
    for code in ("99999999999999999999", "256", "-65"):
        _refused(cli(tmp_path / "home", "resolve", "abc", "--ran", "--exit-code", code),
                 "error (invalid_exit_code): ", f"exit code {code}: an exit status 0..255, "
                 "or -1..-64 for a process killed by that signal")
        assert not (tmp_path / "home").exists()
        remote = cli(tmp_path, "--api", "http://127.0.0.1:9", "resolve", "s", "r", "--ran",
                     "--exit-code", code)
        _refused(remote, "error (invalid_exit_code): ")  # not `unreachable`: never sent
