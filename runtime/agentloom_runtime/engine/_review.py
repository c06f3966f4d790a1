"""The completion review step: the CompletionPolicy judges a candidate answer against
the plan and the evidence (docs/contract.md#completion-review). ``continue`` sends feedback to the
model; ``complete`` / ``blocked`` end the frame."""

from __future__ import annotations

from typing import Any

from agentloom_runtime._json import as_text
from agentloom_runtime.contracts import CompletionInput, RunStatus

from ._context import StepContext
from ._frames import answer_text, end_frame, task_text
from ._model_call import ModelCaller
from ._state import Frame

EVIDENCE_EXCERPT = 600


def evidence_items(ctx: StepContext, frame: Frame) -> list[dict[str, Any]]:
    """The frame's evidence references, read back from the source records."""
    items = []
    for seq in frame["evidence"]:
        body = ctx.journal.read(f"src:{frame['instance']}", seq - 1, 1)[0].body
        text = as_text(body["message"].get("content") or "")
        if len(text) > EVIDENCE_EXCERPT:
            text = text[:EVIDENCE_EXCERPT] + " …"
        items.append({"tool": body.get("name"), "status": body.get("status"),
                      "arguments": dict(body.get("evidence_arguments") or {}),
                      "result": text})
    return items


async def review_step(ctx: StepContext, model: ModelCaller, frame: Frame) -> bool:
    """Returns True when the frame ended (the caller closes it)."""
    candidate_seq = frame["candidate"]
    candidate = answer_text(ctx, frame, candidate_seq) or ""
    data = CompletionInput(
        task=task_text(ctx, frame), plan=tuple(frame["plan"]),
        evidence=tuple(evidence_items(ctx, frame)),
        messages=ctx.context.model_view(ctx.journal, frame), candidate=candidate,
        instance=frame["instance"])
    decision = await ctx.modules.completion.review(data, model)
    ctx.journal.append("ops", {"op_id": f"review-{ctx.head['total_calls']}",
                               "purpose": "decision", "instance": frame["instance"],
                               "decision": decision.to_dict()})
    ctx.emit("review.decided", {"run_id": ctx.run_id, "instance": frame["instance"],
                                **decision.to_dict()})
    model.end_step()
    if decision.decision == "continue":
        frame["candidate"] = None
        note = f"Review: the task is not complete yet. {decision.reason}".strip()
        if decision.next_action:
            note += f"\nNext: {decision.next_action}"
        ctx.context.append(ctx.journal, frame, "review", {"role": "user", "content": note})
        return False
    status: RunStatus = "completed" if decision.decision == "complete" else "blocked"
    end_frame(frame, status, candidate_seq, decision.reason)
    return True
