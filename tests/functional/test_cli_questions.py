"""Issue 9: a large question comes from a file or stdin (up to the documented limit of
100,000 characters); the demo model's answer claims no result it could not see."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from e2e.cli_harness import HELLO, cli, run_records, state_dir

AGENT = str(HELLO / "agent.yaml")


def test_a_large_question_comes_from_stdin() -> None:
    question = ("Summarise this log. " + "line of the log\n" * 7_000)[:100_000]
    with state_dir() as home:
        done = cli(home, "run", "--agent", AGENT, "--question-file", "-", stdin=question)
        assert done.returncode == 0, done.stdout + done.stderr
        run_id = done.stdout.split("▶ run ")[1].split()[0]
        [task] = [r for r in run_records(home, run_id) if r["kind"] == "user"]
        assert task["message"]["content"] == question


def test_a_large_question_comes_from_a_file(tmp_path: Path) -> None:
    question = "Ünïcode question " + "é" * 90_000
    path = tmp_path / "question.md"
    path.write_text(question, encoding="utf-8")
    with state_dir() as home:
        done = cli(home, "run", "--agent", AGENT, "--question-file", str(path))
        assert done.returncode == 0, done.stdout + done.stderr
        run_id = done.stdout.split("▶ run ")[1].split()[0]
        tasks = [r for r in run_records(home, run_id) if r["kind"] == "user"]
        assert tasks[0]["message"]["content"] == question


def test_the_demo_answer_claims_no_command_result_it_did_not_see() -> None:
    """The scripted demo model never reads a tool result, so its answer must not state
    the word count (or that counting worked) as a fact."""
    script = yaml.safe_load((HELLO / "demo-script.yaml").read_text())
    answer = script["replies"][-1]["answer"]
    assert not re.search(r"\d", answer)  # no number it could not have seen
    assert "cannot tell you the" in answer and "count" in answer
    assert not re.search(r"\b(counted|has \w+ words|contains)\b", answer)
