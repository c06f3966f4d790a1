"""Deterministic replay of a recorded run (docs/api.md#replay-a-run).

A run records every model response (the assistant source records, and ``ops`` for
summaries and reviews, each with its call's metadata and ``request_digest``) and every
tool result (the ``tool_result`` source records, by call id). A replay starts the run
again on a throwaway in-memory store with a model that answers from those responses
(``ReplayModel``) and tools that answer from those results (``ReplayTools``): no real
model, no workspace, no command, no MCP or other tool handler is ever called, so no side
effect is re-executed. With the run's own snapshot it reproduces the same records, text
for text; with another configuration (a prompt, hook or compaction policy changed)
``evaluate`` reports the first step whose model request differs from the recorded run's,
with a diff::

    recording = Recording.read(checkpoints, run_id)
    report = await replay_run(recording, snapshot, tools=host_tool_definitions)
    report.identical, report.records.equal, report.diverged_at

What runs for real: the engine, its policies and hooks (trusted Python: a hook with its
own side effects has them again), and the engine's own tools (``update_plan``,
``read_result``, ``delegate_task``), which touch nothing outside the run.
"""

from ._doubles import (
    Divergence,
    RecordingEnded,
    ReplayDiverged,
    ReplayModel,
    ReplayTools,
    diff_requests,
)
from ._driver import RecordsReport, ReplayReport, compare_records, evaluate, replay_run
from ._recording import RecordedCall, RecordedTool, Recording, records_digest, stored_records

__all__ = ["Divergence", "RecordedCall", "RecordedTool", "Recording", "RecordingEnded",
           "RecordsReport", "ReplayDiverged", "ReplayModel", "ReplayReport", "ReplayTools",
           "compare_records", "diff_requests", "evaluate", "records_digest", "replay_run",
           "stored_records"]
