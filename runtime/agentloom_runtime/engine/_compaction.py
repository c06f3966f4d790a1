"""The compaction step (docs/contract.md#compaction-failures).

Before an action call the policy may replace the view with a smaller one. Whatever the
policy, the host validates the result before it is committed: protocol-valid (no orphan
tool message, no message inside a call group), smaller than the view it replaces, and no
longer triggering. A failed attempt changes neither the view nor the baselines, is
remembered in the frame (backoff across resumes, so a failing summary is not paid for on
every step), and — when it made model calls — ends the step, so the action call that
follows always starts a step of its own (a resume never confuses the two).

A view over the hard budget backs off too. Nothing can grow it or advance the steps
(no action can be sent), so after a failed attempt the same execution does not try
again: it blocks at once with the reason (``BudgetExceeded``, way out ``resume``: a new
execution makes one more attempt). When the policy cannot make the view fit at all —
it made no attempt (what must stay already fills the budget) — the run blocks with
``ContextOverBudget``: a resume would stop the same way, a new question moves it on.
The policy is given the whole task (``ContextInput.task``), not the head's preview, so
the task message it must keep is found however long it is.
"""

from __future__ import annotations

import dataclasses

from agentloom_runtime.context import CompactionFailureMemory, with_summary
from agentloom_runtime.context._protocol import protocol_violations
from agentloom_runtime.context.estimators import Utf8BytesEstimator
from agentloom_runtime.contracts import CompactionResult, ContextInput, Message, ModelRequest
from agentloom_runtime.errors import BudgetExceeded, ContextOverBudget

from ._context import BlockRun, StepContext
from ._frames import task_text
from ._hooks import HookRunner
from ._model_call import ModelCaller
from ._state import Frame

_BYTES = Utf8BytesEstimator()


def _size(ctx: StepContext, data: ContextInput, messages: list[Message]) -> int:
    size = ctx.modules.compaction.estimate(messages, data.tools)
    return int(size) if size is not None else _BYTES.estimate(messages, data.tools)


def check_result(ctx: StepContext, data: ContextInput, result: CompactionResult, *,
                 over: bool = False) -> str | None:
    """The host's own checks, then the policy's; a reason to refuse, or None. ``over``:
    the view was over the hard budget (a request never sent), so a smaller result is
    progress even when it still triggers, or is still over: the next preparation goes
    on from it."""
    new = [dict(m) for m in result.messages]
    problems = protocol_violations(ctx.context.model_messages(new))
    if problems:
        return "the compacted view breaks the chat protocol: " + "; ".join(problems[:3])
    old = list(data.messages)
    if _size(ctx, data, new) >= _size(ctx, data, old):
        return "the compacted view is not smaller than the view it replaces"
    counters = dict(data.counters)
    baselines = result.metrics.get("baselines") or {
        "baseline_user_turns": counters.get("user_turns", 0),
        "baseline_model_steps": counters.get("model_steps", 0)}
    counters.update({k: int(v) for k, v in baselines.items()})
    replaced = dataclasses.replace(data, messages=tuple(new), counters=counters)
    if not over and ctx.modules.compaction.should_compact(replaced):  # a trigger: still over
        return "the compacted view still triggers compaction"
    return ctx.modules.compaction.validate_compaction_result(old, new, data.tools)


def _over_budget(ctx: StepContext, data: ContextInput) -> BudgetExceeded | None:
    """The hard limit's refusal of the action request this view would make, if any."""
    request = ModelRequest(messages=ctx.context.model_messages(list(data.messages)),
                           tools=data.tools, instance=data.instance)
    try:
        ctx.modules.compaction.validate_request(request)
    except BudgetExceeded as err:
        return err
    return None


def _stuck(ctx: StepContext, frame: Frame, memory: CompactionFailureMemory,
           over: BudgetExceeded, *, attempted: bool) -> BlockRun:
    """The block of a view over the hard budget that compaction did not bring under it:
    after failed attempts a resume tries once more; without an attempt it cannot help."""
    inst = frame["instance"]
    size = (f"the {inst} view is estimated at {over.details.get('estimate')}, over the "
            f"effective input budget {over.details.get('budget')}")
    reason = memory.last_reason or "the compaction policy made no smaller view"
    details = {**over.details, "failures": memory.failures, "reason": reason}
    if attempted:
        return BlockRun(BudgetExceeded(
            f"{size}, and compacting it failed {memory.failures} time(s) in a row (last: "
            f"{reason}); this execution does not pay for the same attempt again. "
            "A resume makes one more attempt (after a provider error, say); if it fails "
            "the same way, a new question moves the session on",
            details=details))
    return BlockRun(ContextOverBudget(
        f"{size}, and compaction cannot bring it under: {reason}. A resume would stop "
        "the same way: ask a new question instead (the session's next question inherits "
        "this run's history, oversized values capped and summarised to fit)",
        details=details))


async def compaction_step(ctx: StepContext, hooks: HookRunner, model: ModelCaller,
                          frame: Frame, tools: list[dict[str, object]]) -> bool:
    """True when this step is over (a compaction committed, or an attempt that made model
    calls failed); False to go on to the action call in the same step. Raises BlockRun
    for a view over the hard budget that compaction did not bring under it."""
    policy = ctx.modules.compaction
    data = ctx.context.prepare(ctx.journal, frame, tools)
    trigger = policy.should_compact(data)
    if trigger is False or trigger == "":
        return False  # None: the policy's compact() decides
    inst = frame["instance"]
    memory = CompactionFailureMemory.from_dict(frame.get("compaction_memory"))
    steps = frame.get("counters", {}).get("model_steps", 0)
    over = _over_budget(ctx, data)
    execution = ctx.head["execution"]
    if not memory.allows(_size(ctx, data, list(data.messages)), steps):
        if over is None:
            return False  # a recent attempt failed; wait for growth or more steps
        if frame.get("compaction_failed_in") == execution:
            raise _stuck(ctx, frame, memory, over, attempted=True)  # nothing will grow
    failures = memory.failures
    data = dataclasses.replace(data, task=task_text(ctx, frame))  # the whole task
    key = f"compact:{inst}:{ctx.head['total_calls']}"
    if hooks.has("context.compact.before", inst):
        payload = {"instance": inst, "messages": ctx.context.model_messages(data.messages),
                   "counters": dict(frame.get("counters", {})), "reason": str(trigger)}
        _, rejected = await hooks.run("context.compact.before", payload, instance=inst,
                                      key=key, operation_id=key)
        if rejected is not None:
            return False  # a hook vetoed this compaction: view and baselines untouched
    result = await policy.compact(data, model, memory=memory)
    problem = None
    if result is not None:
        result = await _compact_after(hooks, frame, result, key)
        problem = check_result(ctx, data, result, over=over is not None)
    if problem is not None:
        ctx.emit("context.compaction_refused", {"instance": inst, "reason": problem})
        memory.record_failure(estimate=_size(ctx, data, list(data.messages)),
                              model_steps=steps, reason=problem)  # backoff defaults
        result = None
    if memory.failures > failures:
        frame["compaction_failed_in"] = execution
    frame["compaction_memory"] = memory.to_dict()
    if result is None:
        if not ctx.head["step_ops"]:
            if over is not None:  # the action request would be refused: say why now
                raise _stuck(ctx, frame, memory, over, attempted=memory.failures > failures)
            return False  # no model call was made: go on to the action
        model.end_step()
        ctx.commit("compaction.failed")
        return True
    ctx.context.commit_compaction(ctx.journal, frame, result)
    model.end_step()
    ctx.commit("compaction.done")
    ctx.emit("context.compacted", {"run_id": ctx.run_id, "instance": inst,
                                   **{k: v for k, v in result.metrics.items()
                                      if isinstance(v, int | float | bool | str)}})
    return True


async def _compact_after(hooks: HookRunner, frame: Frame, result: CompactionResult,
                         key: str) -> CompactionResult:
    """context.compact.after may rewrite only the summary the policy declared; the
    rewritten text replaces it where it stands in the view."""
    inst = frame["instance"]
    if result.summary is None or not hooks.has("context.compact.after", inst):
        return result
    payload = {"instance": inst, "messages": [dict(m) for m in result.messages],
               "summary": result.summary, "metrics": dict(result.metrics)}
    payload, _ = await hooks.run("context.compact.after", payload, instance=inst,
                                 key=f"{key}:after", operation_id=key)
    new = str(payload["summary"])
    if new == result.summary:
        return result
    if "summary_index" in result.metrics:
        return with_summary(result, new, frame["plan"])
    messages = [{**m, "content": str(m.get("content")).replace(result.summary, new)}
                if isinstance(m.get("content"), str) and result.summary in m["content"]
                else m for m in result.messages]
    return dataclasses.replace(result, messages=messages, summary=new)
