"""The engine's observation events: one typed catalogue (docs/contract.md#bus: notifications
are read-only; observers cannot change a step). Hosts key on these topics (the CLI
transcript, the platform's event stream); payloads carry ids and short, storable text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

Topic = Literal[
    "run.started",        # run_id, task
    "run.resumed",        # run_id, execution
    "run.finished",       # run_id, status, answer, reason
    "run.stopped",        # run_id, status, code, message, resume (a hint for the host)
    "run.cancelled",      # run_id
    "run.resolved",       # run_id, operation_id, verdict, by
    "model.started",      # run_id, op_id, purpose, instance
    "model.completed",    # run_id, op_id, purpose, instance, content, tool_calls (names)
    "tool.started",       # run_id, request_id, instance, name, arguments
    "tool.completed",     # run_id, request_id, instance, name, status, result
    "review.decided",     # run_id, instance, decision, reason, next_action
    "context.compacted",  # run_id, instance, scalar metrics
    "context.compaction_refused",  # instance, reason
    "subagent.started",   # run_id, instance, template
    "hook.diagnostic",    # hook_id, version, point, kind, message, error_type
]

TOPICS: frozenset[str] = frozenset(Topic.__args__)  # type: ignore[attr-defined]

Emit = Callable[[Topic, Mapping[str, Any]], None]
