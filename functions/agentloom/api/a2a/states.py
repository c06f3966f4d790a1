"""A run as an A2A task: its state, its status message, its answer as an artifact.

=================  =============================  ======================================
run status         task state                     status message
=================  =============================  ======================================
queued             TASK_STATE_SUBMITTED           —
running            TASK_STATE_WORKING             —
blocked            TASK_STATE_INPUT_REQUIRED      what stops it and the way out: the
interrupted        TASK_STATE_INPUT_REQUIRED      reply that moves it on (a data part)
completed          TASK_STATE_COMPLETED           the answer (also the ``answer`` artifact)
failed             TASK_STATE_FAILED              the error
cancelled          TASK_STATE_CANCELED            the reason
=================  =============================  ======================================

The task id is the run id, the context id the session id.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from agentloom.api.a2a.wire import Artifact, Message, Part, Task, TaskState, TaskStatus
from agentloom.platform.views import RunView

STATES: dict[str, TaskState] = {
    "queued": "TASK_STATE_SUBMITTED", "running": "TASK_STATE_WORKING",
    "blocked": "TASK_STATE_INPUT_REQUIRED", "interrupted": "TASK_STATE_INPUT_REQUIRED",
    "completed": "TASK_STATE_COMPLETED", "failed": "TASK_STATE_FAILED",
    "cancelled": "TASK_STATE_CANCELED"}
TERMINAL = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"})

# the reply (a message to the task with one data part) that takes each way out
REPLIES: dict[str, dict[str, Any]] = {
    "resume": {"resume": {}},
    "confirm_hooks": {"resume": {"confirm_hooks": True}},
    "raise_budget": {"resume": {"raise_budget": {"max_tokens": "N (above what is used)"}}},
}


def timestamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def replies(view: RunView) -> list[dict[str, Any]]:
    """The replies that move a stopped run on, as data parts to send to the task."""
    if view.way_out == "resolve":
        verdicts = (view.unknown or {}).get("verdicts") or ()
        return [{"resolve": {"verdict": str(v)}} for v in verdicts] or \
            [{"resolve": {"verdict": "VERDICT"}}]
    found = REPLIES.get(view.way_out or "")
    return [found] if found else []


def _agent(view: RunView, text: str, data: dict[str, Any] | None = None) -> Message:
    parts = [Part(text=text)]
    if data is not None:
        parts.append(Part(data=data, mediaType="application/json"))
    return Message(messageId=f"{view.run_id}-{view.status}", contextId=view.session_id,
                   taskId=view.run_id, role="ROLE_AGENT", parts=parts)


def status_message(view: RunView) -> Message | None:
    if view.status == "completed":
        return _agent(view, view.answer or "")
    error = (view.error or {}).get("message") or view.reason or ""
    if view.status in ("blocked", "interrupted"):
        found = replies(view)
        what = "nothing drives it (the process that drove it stopped)" \
            if view.status == "interrupted" else error or "it needs a decision"
        text = f"Run {view.run_id} is {view.status}: {what}."
        if found:
            text += (" To move it on, reply to this task (taskId " + view.run_id + ") with "
                     "one data part: " + " or ".join(json.dumps(r) for r in found) + ".")
        else:
            text += " The API calls that move it on: " + "; ".join(view.next)
        return _agent(view, text, {"way_out": view.way_out, "replies": found,
                                   "next": view.next, "unknown": view.unknown})
    if view.status in ("failed", "cancelled"):
        return _agent(view, error or f"Run {view.run_id} {view.status}.")
    return None


def task_status(view: RunView) -> TaskStatus:
    return TaskStatus(state=STATES[view.status], message=status_message(view),
                      timestamp=timestamp(view.updated_at))


def answer_artifact(view: RunView) -> Artifact | None:
    if view.status != "completed" or not view.answer:
        return None
    return Artifact(artifactId=f"{view.run_id}-answer", name="answer",
                    parts=[Part(text=view.answer)])


def task_of(view: RunView) -> Task:
    artifact = answer_artifact(view)
    return Task(id=view.run_id, contextId=view.session_id, status=task_status(view),
                artifacts=[artifact] if artifact else None,
                metadata={"agentloom": {"status": view.status, "way_out": view.way_out,
                                        "agent_id": view.agent_id, "version": view.version}})
