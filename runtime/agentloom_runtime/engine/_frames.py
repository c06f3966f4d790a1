"""Frames: the small views handed to modules, tool permissions, evidence references and
closing a frame (a child's result closes the parent's pending call; the main frame's end
is the run's end)."""

from __future__ import annotations

from typing import Any

from agentloom_runtime.contracts import FrameView, RunStatus

from ._context import StepContext
from ._state import Frame, Outcome, PendingCall

EVIDENCE_KEPT = 12
TASK_INLINE = 400  # a longer task is kept in the head as a preview plus a reference
REASON_CHARS = 600  # a review's reason kept in the head; the full decision is logged
CHILD_BUILTINS = frozenset({"update_plan", "read_result"})


def frame_view(frame: Frame) -> FrameView:
    return FrameView(instance=frame["instance"], plan=tuple(frame["plan"]),
                     iterations=frame["iterations"])


def tool_allowed(frame: Frame, name: str) -> bool:
    """Main may use the whole catalog; a child only its template's tools (least
    privilege: an empty list grants none) plus the built-in plan and read-back."""
    if name == "delegate_task":
        return frame["parent"] is None
    if frame["parent"] is None or name in CHILD_BUILTINS:
        return True
    # the workspace package loads with the first child frame's check, not the engine
    from agentloom_runtime.workspace.file_tools import granted

    return granted(frozenset(frame["tools"] or ()), name)


def add_evidence(frame: Frame, src: int) -> None:
    """Keep references to the latest tool results (bounded), never copies."""
    frame["evidence"].append(src)
    del frame["evidence"][:-EVIDENCE_KEPT]


def keep_task(ctx: StepContext, frame: Frame) -> None:
    """After the frame's records were created: a long task stays in its source record;
    the head keeps a preview and the reference."""
    if len(frame["task"]) > TASK_INLINE:
        frame["task_src"] = ctx.journal.last_seq(f"src:{frame['instance']}")
        frame["task"] = frame["task"][:TASK_INLINE] + " …"


def task_text(ctx: StepContext, frame: Frame) -> str:
    if "task_src" not in frame:
        return frame["task"]
    record = ctx.journal.read(f"src:{frame['instance']}", frame["task_src"] - 1, 1)[0].body
    return str(record["message"]["content"])


def call_arguments(ctx: StepContext, frame: Frame, call: PendingCall) -> str:
    """The JSON text of a pending call's arguments (inline, or from the source record of
    the assistant message that made the call)."""
    if "arguments" in call:
        return call["arguments"]
    record = ctx.journal.read(f"src:{frame['instance']}", call["src"] - 1, 1)[0].body
    tool_call = record["message"]["tool_calls"][call["index"]]
    return str(tool_call["function"]["arguments"])


class FramePlan:
    """PlanAccess over a frame: the update_plan tool writes through it."""

    def __init__(self, frame: Frame) -> None:
        self._frame = frame

    def get(self) -> list[dict[str, Any]]:
        return [dict(s) for s in self._frame["plan"]]

    def replace(self, steps: list[dict[str, Any]]) -> None:
        self._frame["plan"] = [dict(s) for s in steps]


def end_frame(frame: Frame, status: RunStatus, answer: int | None, reason: str) -> None:
    """Mark a frame finished; ``answer`` is the view seq of its answer. The caller then
    runs the after-stage (if any) and ``close_frame``."""
    frame["status"] = status
    frame["outcome"] = Outcome(status=status, answer=answer, reason=reason[:REASON_CHARS])
    frame["candidate"] = None


def answer_text(ctx: StepContext, frame: Frame, view_seq: int | None) -> str | None:
    """The whole answer of a view entry, as the model.chat.after hooks left it: an
    inline entry holds it; else its source record (``visible`` when hooks changed it),
    never the view's capped copy of a long answer."""
    if view_seq is None:
        return None
    inst = frame["instance"]
    entry = ctx.journal.read(f"view:{inst}", view_seq - 1, 1)[0].body
    if "src" in entry and "message" in entry:
        return str(entry["message"].get("content") or "")
    seq = int(entry["src"] if "src" in entry else entry["of"])
    record = ctx.journal.read(f"src:{inst}", seq - 1, 1)[0].body
    return str((record.get("visible") or record["message"]).get("content") or "")
