"""Closing a finished frame: the after-stage (run.after / subagent.after, annotations
only), then the run's end for the main frame, or the parent's pending call for a child.

A supplement that arrived while the main frame was being reviewed or closed (its
after-stage) is never dropped: the frame goes back to the model with it instead of
ending.
"""

from __future__ import annotations

from typing import Any

from agentloom_runtime.contracts import ToolStatus
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.tools import PreparedCall, RawResult

from ._context import StepContext
from ._frames import answer_text, task_text
from ._hooks import HookRunner
from ._inbox import pull_inbox, seal
from ._state import Frame, PendingCall
from ._tools import finish_tool, pending_call, tool_request


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
            "run_id": ctx.run_id, "instance": frame["instance"], "task": task_text(ctx, frame),
            "status": outcome["status"], "result": answer_text(ctx, frame, outcome["answer"]),
            "annotations": {}}
        if frame["parent"] is not None:
            payload.update(parent_instance=frame["parent"]["instance"],
                           subagent_id=frame["template"])
        parent = frame["parent"]  # a child closes its parent's delegate_task call
        operation = f"t:{parent['request_id']}" if parent else f"run:{ctx.run_id}"
        payload, _ = await hooks.run(point, payload, instance=frame["instance"],
                                     key=f"close:{frame['instance']}", operation_id=operation)
        outcome["annotations"] = payload.get("annotations") or {}
    ctx.head.pop("closing", None)
    if _reopen_for_supplements(ctx, frame):
        return  # a supplement came while the run was closing: the model answers it
    _finalize(ctx, frame)


def _finalize(ctx: StepContext, frame: Frame) -> None:
    outcome = frame["outcome"]
    assert outcome is not None
    if frame["parent"] is None:
        head = ctx.head
        head["status"] = outcome["status"]  # the outcome itself stays on the main frame
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
    if not frame.get("inputs") and seal(ctx.journal.store, ctx.run_id, ctx.head["inbox_seen"]):
        return False  # sealed: a later post is refused, none is lost
    pull_inbox(ctx)  # one came in at the last moment
    if not frame.get("inputs"):
        return False
    frame["status"], frame["outcome"] = "running", None  # the model answers the supplement
    return True


def _close_delegation(ctx: StepContext, child: Frame) -> None:
    """The child's result goes back to the parent's pending call as ``returned``; the
    parent's next step records it through the tool path (``tool.after`` included)."""
    parent_ref = child["parent"]
    outcome = child["outcome"]
    assert parent_ref is not None and outcome is not None
    parent = ctx.frame(parent_ref["instance"])
    call = pending_call(parent, parent_ref["request_id"])
    result = {"subagent": child["template"], "instance": child["instance"],
              "status": outcome["status"], "answer": answer_text(ctx, child, outcome["answer"]),
              "reason": outcome["reason"], "annotations": outcome.get("annotations", {})}
    call["state"] = "returned"
    call["result"] = ctx.journal.append("ops", {
        "op_id": f"d:{call['request_id']}",
        "raw_result": RawResult(ok=True, value=result).to_dict()})


async def finish_delegation(ctx: StepContext, hooks: HookRunner, frame: Frame,
                            call: PendingCall) -> None:
    """Record a returned child result as the delegate_task call's result."""
    prepared = ctx.tools.prepare(tool_request(ctx, frame, call, True))
    entry = ctx.journal.read("ops", call["result"] - 1, 1)[0].body
    raw = RawResult.from_dict(entry["raw_result"])
    if not isinstance(prepared, PreparedCall):  # the call resolved when it was made
        raise ConfigError("a delegate_task call no longer resolves in the catalog")
    status: ToolStatus = "ok" if raw.value.get("status") == "completed" else "error"
    await finish_tool(ctx, hooks, frame, call, prepared, raw, status=status)
