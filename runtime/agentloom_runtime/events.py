"""The events of a run: one typed catalogue (docs/contract.md#bus: notifications are
read-only; observers cannot change a step). Hosts key on these topics (the CLI
transcript, the platform's event stream); payloads carry ids and short, storable text.

Two kinds share a run's event stream:

- ``EngineTopic``: what the engine emits while it steps;
- ``HostTopic``: what the platform records about the run around the engine (its status,
  the usage of each call, a cancel it was asked for, a step its state machine gave up).

``Topic`` is either; the platform records only these (``RunTracker.event`` refuses any
other), and docs/api.md lists them for API users.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args

EngineTopic = Literal[
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

HostTopic = Literal[
    "run.status",            # run_id, status (the platform's), error {code, message} | None
    "model.usage",           # op_id, purpose, instance, input_tokens, output_tokens, cost
    "run.cancel_requested",  # run_id, by (the user who asked)
    "run.step_failed",       # run_id, generation, code (the state machine's error name),
                             # during (step | rollover)
]

Topic = Literal[EngineTopic, HostTopic]

ENGINE_TOPICS: frozenset[str] = frozenset(get_args(EngineTopic))
HOST_TOPICS: frozenset[str] = frozenset(get_args(HostTopic))
TOPICS: frozenset[str] = ENGINE_TOPICS | HOST_TOPICS

Emit = Callable[[Topic, Mapping[str, Any]], None]
"""A host's event callback (``create_engine(emit=...)``): the engine calls it with
``EngineTopic``s only (``StepContext.emit``); hosts pass the same sink their own topics."""
