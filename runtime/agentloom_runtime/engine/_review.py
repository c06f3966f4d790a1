"""The completion review step: the CompletionPolicy judges a candidate answer against
the plan and the evidence (docs/contract.md#completion-review). ``continue`` sends feedback to the
model; ``complete`` / ``blocked`` end the frame.

The review works on capped copies, never the records themselves: the candidate answer
and the task are shown as their head plus a note (the records keep them whole), each
piece of evidence as an excerpt. The copies get smaller, tier by tier (``FITS``), until
the policy's request fits the hard input budget — checked before anything is sent — so
any answer the run could save can also be reviewed and finish. Only when even the
smallest copies do not fit does the run block, with ``ContextOverBudget`` (a resume
would stop the same way).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from agentloom_runtime._json import as_text
from agentloom_runtime.context._protocol import cap_text, cap_value
from agentloom_runtime.contracts import (
    CompletionDecision,
    CompletionInput,
    ModelRequest,
    ModelResponse,
    RunStatus,
)
from agentloom_runtime.errors import BudgetExceeded, ContextOverBudget

from ._context import BlockRun, StepContext
from ._frames import answer_text, end_frame, task_text
from ._model_call import ModelCaller
from ._state import Frame


class Fit(NamedTuple):
    """How much of each record one attempt at the review shows."""

    candidate: int  # characters of the candidate answer
    task: int  # characters of the task
    evidence: int  # characters of each evidence result (and of its arguments)
    messages: int | None  # the last n view messages (None: the whole view)


FITS = (Fit(16_000, 4_000, 600, None), Fit(4_000, 1_000, 300, 4), Fit(1_000, 400, 120, 1))
EVIDENCE_EXCERPT = FITS[0].evidence
WHOLE = "the run's records"


class ReviewTooLarge(BudgetExceeded):
    """A review request over the hard budget, refused before it was sent: the review
    step tries smaller copies (never leaves this module)."""


class _Fitted:
    """The ``ModelCall`` a review is given: a verification request over the hard budget
    is refused before the model caller saves or sends anything."""

    def __init__(self, ctx: StepContext, model: ModelCaller) -> None:
        self._ctx, self._model = ctx, model

    async def __call__(self, request: ModelRequest) -> ModelResponse:
        if request.purpose == "verification":
            try:
                self._ctx.modules.compaction.validate_request(request)
            except BudgetExceeded as err:
                raise ReviewTooLarge(err.message, details=err.details) from None
        return await self._model(request)


def evidence_items(ctx: StepContext, frame: Frame,
                   excerpt: int = EVIDENCE_EXCERPT) -> list[dict[str, Any]]:
    """The frame's evidence references, read back from the source records, each result
    (and its evidence arguments) cut to ``excerpt`` characters."""
    items = []
    for seq in frame["evidence"]:
        body = ctx.journal.read(f"src:{frame['instance']}", seq - 1, 1)[0].body
        text = as_text(body["message"].get("content") or "")
        if len(text) > excerpt:
            text = text[:excerpt] + " …"
        items.append({"tool": body.get("name"), "status": body.get("status"),
                      "arguments": cap_value(dict(body.get("evidence_arguments") or {}),
                                             excerpt, WHOLE),
                      "result": text})
    return items


async def _review(ctx: StepContext, model: ModelCaller, frame: Frame,
                  candidate: str) -> CompletionDecision:
    """The policy's decision on the largest copies whose request fits."""
    task, view = task_text(ctx, frame), ctx.context.model_view(ctx.journal, frame)
    refused: ReviewTooLarge | None = None
    for fit in FITS:
        data = CompletionInput(
            task=cap_text(task, fit.task, WHOLE), plan=tuple(frame["plan"]),
            evidence=tuple(evidence_items(ctx, frame, fit.evidence)),
            messages=view if fit.messages is None else view[-fit.messages:],
            candidate=cap_text(candidate, fit.candidate, f"{WHOLE} (the answer is saved "
                                                          "whole)"),
            instance=frame["instance"])
        try:
            return await ctx.modules.completion.review(data, _Fitted(ctx, model))
        except ReviewTooLarge as err:
            if ctx.head["step_ops"]:  # a call of this review was made: never repeat it
                raise BlockRun(BudgetExceeded(err.message, details=err.details)) from None
            refused = err
    assert refused is not None
    raise BlockRun(ContextOverBudget(
        f"the completion review of {frame['instance']} does not fit the model's input "
        f"budget even with the answer, the task and the evidence cut to short excerpts "
        f"({refused.message}). The answer is saved; a resume would stop the same way: ask "
        "a new question, or give the agent a larger context_window",
        details=refused.details))


async def review_step(ctx: StepContext, model: ModelCaller, frame: Frame) -> bool:
    """Returns True when the frame ended (the caller closes it)."""
    candidate_seq = frame["candidate"]
    candidate = answer_text(ctx, frame, candidate_seq) or ""
    decision = await _review(ctx, model, frame, candidate)
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
