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
