"""Ways out of a stopped run: new executions, unknown outcomes and operator verdicts.

A run stops blocked on an operation of unknown outcome when a process died while a
side effect may have happened (a tool handler, a command, a sent model request). The
engine never guesses. ``describe`` shows exactly what is unknown (with what the host
knows: marker, process, exit); ``apply`` records an operator's verdict as a durable
record (stream ``verdicts``: who, when, what) in the same commit that closes the
operation and starts a new execution, so the run goes on:

- tool / command: ``ran`` (the model sees the operator's account, optionally the output),
  ``did_not_run`` (the model is told it failed), ``run_again`` (explicit and logged);
- model call: ``send_again`` (may be billed twice) or ``treat_as_failed``.

A command's marker is released only after that commit (``release_marker``), never alone.

A run blocked on its token or cost budget (``budget_exceeded``, way out
``raise_budget``) goes on only with a raised budget: ``raise_budget`` records who raised
what, when (stream ``budgets``) and keeps the new figures in ``head["budget"]``, in the
commit of the new execution. A resume without a raise blocks again at the next call.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from agentloom_runtime._json import storable_text
from agentloom_runtime.checkpoint.journal import Journal
from agentloom_runtime.checkpoint.store import BaseCheckpointStore
from agentloom_runtime.context import CompactionFailureMemory
from agentloom_runtime.contracts import (
    ToolOutcome,
    UnknownOperation,
    Verdict,
    exit_code_problem,
)
from agentloom_runtime.errors import (
    AgentLoomError,
    ConfigError,
    ModelOutcomeUnknown,
    ModelTransportError,
    PersistenceError,
    RunError,
)

from ._context import BlockRun, StepContext, now
from ._frames import call_arguments, end_frame
from ._hooks import HookRunner
from ._inbox import unseal
from ._model_call import budget_limits, run_usage
from ._state import (
    BudgetLimits,
    ExecOptions,
    Frame,
    Head,
    ModelOp,
    Operation,
    RetryOp,
    mark_stopped,
)
from ._tools import pending_call, record_tool

TOOL_VERDICTS = ("ran", "did_not_run", "run_again")
MODEL_VERDICTS = ("send_again", "treat_as_failed")
TERMINAL = ("completed", "cancelled", "failed")  # a run that ended: ask again instead
UNKNOWN_CODES = ("tool_outcome_unknown", "model_outcome_unknown")
ARGUMENTS_SHOWN = 4_000
WAYS_OUT = {
    "tool_outcome_unknown": "resolve", "model_outcome_unknown": "resolve",
    "hook_replay_requires_confirmation": "confirm_hooks",
    "model_not_found": "change_model",  # a resume would ask for the same model again
}


@dataclasses.dataclass(frozen=True)
class RaiseBudget:
    """An operator's raise of the run's budget, for ``begin_execution(raise_budget=)``.
    Each figure given must exceed the current one (a budget the version does not set
    cannot be raised); ``by`` names the operator."""

    by: str
    max_tokens: int | None = None
    max_cost: float | None = None
    note: str = ""


def raise_budget(ctx: StepContext, change: RaiseBudget) -> None:
    """Check and record ``change`` (stream ``budgets``); the caller's commit carries it."""
    if not change.by.strip():
        raise ConfigError("raising a budget needs the operator's name (by)",
                          details={"code": "budget_raise_invalid"})
    if change.max_tokens is None and change.max_cost is None:
        raise ConfigError("give max_tokens and/or max_cost to raise the budget",
                          details={"code": "budget_raise_invalid"})
    max_tokens, max_cost = budget_limits(ctx)
    for name, new, old in (("max_tokens", change.max_tokens, max_tokens),
                           ("max_cost", change.max_cost, max_cost)):
        if new is None:
            continue
        if old is None:
            raise ConfigError(f"the run has no {name} budget to raise",
                              details={"code": "budget_raise_invalid", "field": name})
        if isinstance(new, bool) or not new > old:
            current = f"{old:,}" if isinstance(old, int) else f"{old:g}"
            raise ConfigError(f"{name} must exceed the current budget ({current}); got "
                              f"{new!r}", details={"code": "budget_raise_invalid",
                                                   "field": name})
    used = run_usage(ctx)
    new_limits = BudgetLimits(
        max_tokens=change.max_tokens if change.max_tokens is not None else max_tokens,
        max_cost=change.max_cost if change.max_cost is not None else max_cost)
    ctx.journal.append("budgets", {
        "by": storable_text(change.by), "at": now(), "note": storable_text(change.note),
        "before": {"max_tokens": max_tokens, "max_cost": max_cost}, "after": new_limits,
        "used": {"tokens": used.total_tokens, "cost": used.cost},
        "execution": ctx.head["execution"]})
    ctx.head["budget"] = new_limits


def new_execution(ctx: StepContext, *, retry_unknown_models: bool,
                  confirm_hooks: bool) -> None:
    head = ctx.head
    unseal(ctx.journal.store, ctx.run_id)
    head["execution"] += 1
    head["calls"] = 0
    head["exec_options"] = ExecOptions(retry_unknown_models=retry_unknown_models,
                                       confirm_hooks=confirm_hooks)
    head["status"], head["error"] = "running", None
    for inst in head["stack"]:
        frame = head["frames"][inst]
        frame["status"] = "running"
        frame["iterations_base"] = frame["iterations"]


def way_out(head: Head) -> str | None:
    if head["status"] in ("running", *TERMINAL):
        return None if head["status"] == "running" else "new_question"
    code = head["error"]["code"] if head["error"] else ""
    if code in UNKNOWN_CODES and head["op"] is not None:
        return "resolve"
    if code == "budget_exceeded" and head["error"] and \
            head["error"]["type"] == "RunBudgetExceeded":
        return "raise_budget"
    if code == "budget_exceeded" and head["error"] and \
            head["error"]["type"] == "ContextOverBudget":
        return "new_question"  # a resume would stop the same way
    return WAYS_OUT.get(code, "resume")


def describe(ctx: StepContext) -> UnknownOperation | None:
    head = ctx.head
    op = head["op"]
    code = head["error"]["code"] if head["error"] else ""
    if op is None or head["status"] != "blocked" or code not in UNKNOWN_CODES:
        return None
    if op["kind"] == "model":
        return UnknownOperation(operation_id=op["id"], kind="model", instance=op["instance"],
                                started_at=op["started_at"], attempts=op["attempts"],
                                purpose=op["purpose"], verdicts=MODEL_VERDICTS)
    frame = ctx.frame(op["instance"])
    call = pending_call(frame, op["request_id"])
    arguments = call_arguments(ctx, frame, call)
    if len(arguments) > ARGUMENTS_SHOWN:
        arguments = arguments[:ARGUMENTS_SHOWN] + " …"
    host: dict[str, Any] = {}
    command = None
    if op["kind"] == "command":
        command = {k: op["spec"].get(k) for k in ("command", "argv", "cwd", "timeout_s")}
        if ctx.host.commands is not None:
            host = dict(ctx.host.commands.describe(op["request_id"]))
    return UnknownOperation(operation_id=op["id"], kind=op["kind"], instance=op["instance"],
                            started_at=op["started_at"], attempts=op["attempts"],
                            request_id=op["request_id"], tool=call["name"],
                            arguments=arguments, command=command, host=host,
                            verdicts=TOOL_VERDICTS)


def apply(ctx: StepContext, hooks: HookRunner, verdict: Verdict,
          unknown: UnknownOperation | None) -> str | None:
    """Record ``verdict`` and start a new execution; the caller commits. Returns the
    request id whose command marker is to be released after the commit."""
    if unknown is None:
        raise ConfigError(f"run {ctx.run_id} is not blocked on an unknown outcome; there "
                          "is nothing to resolve", details={"code": "nothing_to_resolve"})
    if verdict.kind not in unknown.verdicts:
        raise ConfigError(f"verdict {verdict.kind!r} does not apply to a {unknown.kind} "
                          f"operation; use one of {', '.join(unknown.verdicts)}",
                          details={"code": "verdict_not_applicable"})
    if not verdict.by.strip():
        raise ConfigError("a verdict needs the operator's name (by)")
    problem = exit_code_problem(verdict.exit_code)
    if problem is not None:
        raise ConfigError(problem, details={"code": "invalid_exit_code"})
    verdict = dataclasses.replace(  # operator text is made storable (non-UTF-8 argv)
        verdict, by=storable_text(verdict.by), note=storable_text(verdict.note),
        output=None if verdict.output is None else storable_text(verdict.output))
    head = ctx.head
    op = head["op"]
    assert op is not None
    if unknown.kind == "command" and verdict.kind == "run_again" and \
            unknown.host.get("sandbox_alive"):
        raise ConfigError("the command's sandbox is still running; stop it before running "
                          "the command again", details={"code": "sandbox_alive"})
    ctx.journal.append("verdicts", {
        "operation_id": op["id"], "kind": op["kind"], "verdict": verdict.kind,
        "by": verdict.by, "at": now(), "note": verdict.note, "output": verdict.output,
        "exit_code": verdict.exit_code, "request_id": unknown.request_id,
        "execution": head["execution"]})
    new_execution(ctx, retry_unknown_models=False, confirm_hooks=False)
    if op["kind"] == "model":
        _model_verdict(ctx, op, verdict)
        return None
    frame = ctx.frame(op["instance"])
    call = pending_call(frame, op["request_id"])
    head["op"] = None
    if verdict.kind != "run_again":
        record_tool(ctx, frame, call, _verdict_outcome(verdict))
    if op["kind"] != "command":
        return None
    head["release_marker"] = op["request_id"]  # released after the commit, or next step
    return op["request_id"]


def _verdict_outcome(verdict: Verdict) -> ToolOutcome:
    account: dict[str, Any] = {"resolved_by_operator": True, "verdict": verdict.kind,
                               "by": verdict.by}
    if verdict.note:
        account["note"] = verdict.note
    if verdict.kind == "did_not_run":
        account["error"] = {"code": "operator_did_not_run", "message": (
            "The run was interrupted and the operator reports this call did not run. "
            "Nothing it would have done happened.")}
        return ToolOutcome(value=account, status="error", error_code="operator_did_not_run")
    if verdict.output is not None:
        account["output"] = verdict.output
    if verdict.exit_code is not None:
        account["exit_code"] = verdict.exit_code
    account["message"] = ("The run was interrupted while this call ran; the operator "
                          "reports that it ran.")
    failed = verdict.exit_code not in (None, 0)
    return ToolOutcome(value=account, status="error" if failed else "ok")


def _model_verdict(ctx: StepContext, op: ModelOp, verdict: Verdict) -> None:
    head = ctx.head
    if verdict.kind == "send_again":
        _arrange_resend(head, op)
        return
    head["op"] = None
    head["step_ops"] = []
    head.pop("step_done", None)
    frame = ctx.frame(op["instance"])
    if op["purpose"] == "compaction":
        _compaction_failed(frame, f"the operator treated summary call {op['id']} as failed"
                           + (f": {verdict.note}" if verdict.note else ""))
        return  # the view and baselines stay as they were
    end_frame(frame, "failed", None, f"the operator treated model call {op['id']} as failed"
              + (f": {verdict.note}" if verdict.note else ""))
    if frame["parent"] is None:
        head["status"] = "failed"
    else:
        head["closing"] = frame["instance"]  # the child's failure goes back to its parent


def _compaction_failed(frame: Frame, reason: str) -> None:
    """A summary the operator gave up on is a failed attempt: the failure memory's
    backoff applies, so the next step goes on to the action instead of paying for a new
    summary at once."""
    memory = CompactionFailureMemory.from_dict(frame.get("compaction_memory"))
    memory.record_failure(reason, model_steps=frame.get("counters", {}).get("model_steps", 0))
    frame["compaction_memory"] = memory.to_dict()


def _arrange_resend(head: Head, op: ModelOp) -> None:
    """Re-enter the same step: answered calls replay, this one is sent again under its
    original identity (and its saved hook-processed input)."""
    head["retry_op"] = RetryOp(id=op["id"], attempts=op["attempts"], purpose=op["purpose"],
                               final_input=op.get("final_input"))
    head["step_done"] = list(head["step_ops"])
    head["step_ops"] = []
    head["op"] = None


def resume_model_op(ctx: StepContext, op: Operation) -> None:
    """A model operation left by an earlier execution: a saved raw response continues;
    a sent request without one blocks, unless the execution allows re-sending."""
    assert op["kind"] == "model"
    head = ctx.head
    if op["phase"] == "raw_saved":
        return  # the response is saved: the step continues from it
    if not head["exec_options"]["retry_unknown_models"]:
        raise BlockRun(ModelOutcomeUnknown(
            f"model request {op['id']} was sent but no response was saved: it may be sent "
            "again (and may be billed twice) or treated as failed",
            details={"op_id": op["id"]}))
    _arrange_resend(head, op)


def stop_error(ctx: StepContext, error: RunError) -> RunError:
    """The error a run stops with: a model request that was sent and got no response (a
    transport error after sending) is an unknown outcome at once — its operation is kept,
    so ``resolve --send-again`` / ``--treat-as-failed`` is the one decision that moves the
    run on (a resume would only reach the same block)."""
    op = ctx.head["op"]
    if not (isinstance(error, ModelTransportError) and error.details.get("sent")) or \
            op is None or op["kind"] != "model" or op["phase"] == "raw_saved":
        return error
    return ModelOutcomeUnknown(
        f"model request {op['id']} was sent but no response was received "
        f"({error.details.get('reason') or 'transport error'}); its outcome is unknown. "
        f"Send it again (it may be billed twice): `agentloom resolve {ctx.run_id} "
        f"--send-again`, or `agentloom resolve {ctx.run_id} --treat-as-failed`",
        details={"op_id": op["id"], "reason": str(error.details.get("reason") or "")})


def release_marker(ctx: StepContext) -> None:
    """A verdict's marker release that a crash interrupted: do it now (idempotent)."""
    request_id = ctx.head.pop("release_marker", None)
    if request_id is not None and ctx.host.commands is not None:
        ctx.host.commands.release(request_id)


def block_after_failed_save(store: BaseCheckpointStore, run_id: str, err: PersistenceError
                            ) -> tuple[Journal | None, PersistenceError] | None:
    """A failed save leaves the stored run where it was. Record it as blocked on the last
    good version (a fresh load), so its status is truthful and a resume moves it on;
    the journal of that commit (None if even it failed: the status stays as stored) and
    the error recorded. None when the run was never saved."""
    loaded = store.load_head(run_id)
    if loaded is None:
        return None
    head = cast(Head, loaded.body)
    error = PersistenceError(f"saving the run failed: {err.message}; nothing after the "
                             "last saved step was kept. Resume to continue from there.")
    mark_stopped(head, error, "blocked")
    journal = Journal(store, run_id, loaded.version, head)
    try:
        journal.commit("run.stop")
    except AgentLoomError:
        return None, error
    return journal, error
