"""Closing a finished frame: the after-stage (run.after / subagent.after, annotations
only), then the run's end for the main frame, or the parent's pending call for a child.

A supplement that arrived while the main frame was being reviewed is never dropped: the
frame goes back to the model with it instead of ending.
"""

from __future__ import annotations

from typing import Any

from agentloom_runtime.contracts import ToolOutcome, ToolStatus

from ._context import StepContext
from ._frames import answer_text
from ._hooks import HookRunner
from ._inbox import pull_inbox
from ._state import Frame
from ._tools import record_tool


def after_point(hooks: HookRunner, frame: Frame) -> str | None:
    """The after-stage a finished frame still has to pass, if any binding matches."""
    point = "run.after" if frame["parent"] is None else "subagent.after"
    return point if hooks.has(point, frame["instance"]) else None


def close_frame(ctx: StepContext, hooks: HookRunner, frame: Frame) -> None:
    """An ended frame: closed now, or marked ``closing`` when an after-stage must run
    first (in the next step, so the decision that ended it is saved before any hook
    runs). The caller commits."""
    if _reopen_for_supplements(ctx, frame):
        return
    if after_point(hooks, frame) is not None:
        ctx.head["closing"] = frame["instance"]
        return
    _finalize(ctx, frame)


async def after_stage(ctx: StepContext, hooks: HookRunner, frame: Frame) -> None:
    """The closing step: run.after / subagent.after (annotations only), then close."""
    outcome = frame["outcome"]
    assert outcome is not None
    point = after_point(hooks, frame)
    if point is not None:
        payload: dict[str, Any] = {
            "run_id": ctx.run_id, "instance": frame["instance"], "task": frame["task"],
            "status": outcome["status"], "result": answer_text(ctx, frame, outcome["answer"]),
            "annotations": {}}
        if frame["parent"] is not None:
            payload.update(parent_instance=frame["parent"]["instance"],
                           subagent_id=frame["template"])
        payload, _ = await hooks.run(point, payload, instance=frame["instance"],
                                     key=f"close:{frame['instance']}")
        outcome["annotations"] = payload.get("annotations") or {}
    ctx.head.pop("closing", None)
    _finalize(ctx, frame)


def _finalize(ctx: StepContext, frame: Frame) -> None:
    outcome = frame["outcome"]
    assert outcome is not None
    if frame["parent"] is None:
        head = ctx.head
        head["status"] = outcome["status"]
        head["outcome"] = outcome
        ctx.emit("run.finished", {"run_id": ctx.run_id, "status": outcome["status"],
                                  "answer": answer_text(ctx, frame, outcome["answer"]),
                                  "reason": outcome["reason"]})
        return
    ctx.head["stack"].pop()
    _close_delegation(ctx, frame)


def _reopen_for_supplements(ctx: StepContext, frame: Frame) -> bool:
    if frame["parent"] is not None or frame["outcome"] is None \
            or frame["outcome"]["status"] != "completed":
        return False
    pull_inbox(ctx)
    if not frame.get("inputs"):
        return False
    frame["status"], frame["outcome"] = "running", None  # the model answers the supplement
    return True


def _close_delegation(ctx: StepContext, child: Frame) -> None:
    parent_ref = child["parent"]
    outcome = child["outcome"]
    assert parent_ref is not None and outcome is not None
    parent = ctx.frame(parent_ref["instance"])
    call = next(c for c in parent["pending"] if c["request_id"] == parent_ref["request_id"])
    result = {"subagent": child["template"], "instance": child["instance"],
              "status": outcome["status"], "answer": answer_text(ctx, child, outcome["answer"]),
              "reason": outcome["reason"], "annotations": outcome.get("annotations", {})}
    status: ToolStatus = "ok" if outcome["status"] == "completed" else "error"
    record_tool(ctx, parent, call, ToolOutcome(value=result, status=status,
                                                raw_value=result, has_raw_value=True))
