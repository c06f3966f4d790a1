"""The CLI transcript keys on the engine's typed event catalogue
(``agentloom_runtime.events``): a renamed topic fails here, not silently in a terminal."""

from __future__ import annotations

import io

from agentloom.cli import LINES, Transcript
from agentloom_runtime.events import TOPICS


def test_every_transcript_line_is_for_a_topic_of_the_catalogue() -> None:
    assert set(LINES) - TOPICS == set()
    assert "run.stopped" in TOPICS  # rendered by the transcript itself (its way out)


def test_resolve_names_no_resolve_commands_for_the_stop_it_is_settling() -> None:
    out = io.StringIO()
    transcript = Transcript(out, resolving=True)
    stop = {"run_id": "r1", "status": "blocked", "code": "tool_outcome_unknown",
            "message": "unknown", "way_out": "resolve"}
    transcript("run.stopped", stop)
    transcript("run.resolved", {"run_id": "r1", "verdict": "ran", "by": "ada"})
    transcript("run.stopped", stop)  # a later unknown outcome names its verdicts again
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["■ blocked (tool_outcome_unknown): unknown",
                         "✓ verdict --ran recorded (by ada)"]
    assert lines[3] == "  next: agentloom resolve r1   (shows what is unknown and what " \
                       "the host knows)"


def test_a_refusals_advice_is_shown_whole_in_the_live_transcript() -> None:
    """Issue 17: the sandbox's fix advice (past 200 characters) reaches the reader."""
    import json

    advice = ("commands run as uid 65534 on a root host, and that user cannot reach "
              "/srv/state/workspaces (/srv is private); run agentloom as a normal user or "
              "use a state directory under a traversable path (AGENTLOOM_HOME / --home)")
    assert len(advice) > 200
    out = io.StringIO()
    Transcript(out)("tool.completed", {
        "name": "workspace_command", "status": "error",
        "result": json.dumps({"error": {"code": "sandbox_unavailable", "message": advice}})})
    assert out.getvalue().splitlines() == [
        f"  ← workspace_command [error] sandbox_unavailable: {advice}"]


def test_a_command_without_an_exit_code_says_why() -> None:
    """Issue 17: a command stopped by Ctrl-C (its sandbox killed) is not `exit None`."""
    import json

    def line(**result: object) -> str:
        out = io.StringIO()
        Transcript(out)("tool.completed", {
            "name": "workspace_command", "status": "error",
            "result": json.dumps({"exit_code": None, "stdout_head": "", **result})})
        return out.getvalue().strip()

    assert line(signal=9, error="cancelled") == (
        "← workspace_command [error] no exit code: stopped when the run was interrupted "
        "or cancelled, killed by SIGKILL")
    assert line(timed_out=True, signal=9) == \
        "← workspace_command [error] no exit code: timed out, killed by SIGKILL"
    assert "None" not in line(error="skill_unavailable", stderr_head="skill 'x' is missing")
