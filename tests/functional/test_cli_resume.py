"""Issue 9: ``agentloom resume`` of a run that already ended resumes nothing — a
completed run prints its outcome (exit 0), a failed or cancelled one says so and names
the way out, a new question (exit 3; see also ``test_cli_resolve`` and
``test_cli_signals``)."""

from __future__ import annotations

from e2e.cli_harness import HELLO, cli, state_dir

AGENT = str(HELLO / "agent.yaml")


def test_resume_of_a_completed_run_prints_its_outcome() -> None:
    with state_dir() as home:
        done = cli(home, "run", "--agent", AGENT, "Write release notes")
        assert done.returncode == 0, done.stdout + done.stderr
        run_id = done.stdout.split("▶ run ")[1].split()[0]
        again = cli(home, "resume", run_id)
        assert again.returncode == 0, again.stdout + again.stderr
        assert again.stdout.startswith(f"■ completed (run {run_id} had already completed; "
                                       "nothing to resume)")
        assert "I wrote notes/release.md in the workspace" in again.stdout  # the answer
        assert "▶ resuming" not in again.stdout and again.stderr == ""
        shown = cli(home, "show", run_id)
        assert shown.stdout.count("tool_result") == 4  # nothing ran again
