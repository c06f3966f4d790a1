"""Tool steps: one tool call per step (order: docs/contract.md#tools).

A side-effecting call is saved as ``started`` before its handler runs; a crash leaves an
operation of unknown outcome that is never re-run unless the tool declares
``resume_inflight`` (then it runs again with ``uncertain=True``) or an operator says so.
The result is stored once: its full text in the source record (which ``read_result``
pages through), the model-visible value (capped with a reference, or hook-processed) in
the view.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentloom_runtime._json import as_text
from agentloom_runtime.contracts import ToolOutcome, ToolRequest, ToolStatus
from agentloom_runtime.errors import ToolOutcomeUnknown
from agentloom_runtime.tool_contracts import ToolContext
from agentloom_runtime.tools import PreparedCall, RawResult, cap_with_reference, failure_outcome

from ._context import BlockRun, StepContext, now
from ._frames import FramePlan, add_evidence, call_arguments, frame_view, tool_allowed
from ._hooks import HookRunner
from ._results import ResultReader
from ._state import Frame, PendingCall, ToolOp, tool_op


def tool_request(ctx: StepContext, frame: Frame, call: PendingCall,
                 uncertain: bool = False) -> ToolRequest:
    return ToolRequest(call_id=call["call_id"], name=call["name"],
                       arguments=call_arguments(ctx, frame, call), uncertain=uncertain,
                       request_id=call["request_id"], instance=frame["instance"])


def tool_context(ctx: StepContext, frame: Frame, call: PendingCall,
                 uncertain: bool = False) -> ToolContext:
    host = ctx.host
    workspace = host.workspace(frame["instance"]) if host.workspace else None
    return ToolContext(
        config=ctx.tools.config, instance=frame["instance"], run_id=ctx.run_id,
        call_id=call["call_id"], request_id=call["request_id"], uncertain=uncertain,
        emit=ctx.emit, plan=FramePlan(frame), workspace=workspace,  # type: ignore[arg-type]
        services={**host.services, "results": ResultReader(ctx, frame["instance"]),
                  "hooks": ToolHooks(HookRunner(ctx), frame["instance"], call["request_id"])},
        template=frame["template"])


class ToolHooks:
    """Hook stages a handler runs inside its call (``services["hooks"]``) for an operation
    of its own — e.g. ``model.embedding.before/after`` around a tool's embedding request.
    Durable like the engine's stages: keyed by point and call, so a call run again after
    an interruption continues the stage at its saved cursor (a binding that is not
    ``replay_safe`` is not repeated unseen)."""

    def __init__(self, runner: HookRunner, instance: str, request_id: str) -> None:
        self._runner, self._instance, self._request_id = runner, instance, request_id

    def has(self, point: str, **fields: Any) -> bool:
        return self._runner.has(point, self._instance, **fields)

    async def run(self, point: str, payload: dict[str, Any],
                  **fields: Any) -> tuple[dict[str, Any], Any]:
        fields.setdefault("operation_id", f"t:{self._request_id}")  # inside the tool call
        return await self._runner.run(point, payload, instance=self._instance,
                                      key=f"{point}:{self._request_id}", **fields)

    async def observe(self, point: str, payload: dict[str, Any], **fields: Any) -> None:
        fields.setdefault("operation_id", f"t:{self._request_id}")
        await self._runner.observe(point, payload, instance=self._instance, **fields)


def _authorize(ctx: StepContext, frame: Frame) -> Any:
    def authorize(definition: Any) -> str | None:
        if not tool_allowed(frame, definition.name):
            return f"{definition.name} is not available to {frame['instance']}"
        return ctx.modules.strategy.authorize_tool(frame_view(frame), definition)
    return authorize


async def prepare_call(ctx: StepContext, hooks: HookRunner, frame: Frame, call: PendingCall,
                       uncertain: bool) -> PreparedCall | ToolOutcome:
    """Parse, resolve, validate and admit; then tool.before (which may only change the
    arguments, revalidated, or reject)."""
    authorize = _authorize(ctx, frame)
    prepared = ctx.tools.prepare(tool_request(ctx, frame, call, uncertain), authorize=authorize)
    inst = frame["instance"]
    if isinstance(prepared, ToolOutcome) or not hooks.has("tool.before", inst,
                                                          tool=call["name"]):
        return prepared
    payload = {"call_id": call["call_id"], "request_id": call["request_id"],
               "name": call["name"], "arguments": prepared.arguments, "instance": inst,
               "uncertain": uncertain}
    payload, rejected = await hooks.run("tool.before", payload, instance=inst,
                                        key=f"tool:{call['request_id']}", tool=call["name"],
                                        operation_id=f"t:{call['request_id']}")
    if rejected is not None:
        return failure_outcome("tool_rejected_by_hook", rejected.reason, status="rejected")
    if payload["arguments"] != prepared.arguments:
        return ctx.tools.revalidate(prepared, payload["arguments"], authorize=authorize)
    return prepared


async def run_inline(ctx: StepContext, hooks: HookRunner, frame: Frame, call: PendingCall,
                     prepared: PreparedCall, uncertain: bool) -> None:
    """Run the handler inside the step; a side effect is announced before it runs."""
    ctx.emit("tool.started", {"run_id": ctx.run_id, "request_id": call["request_id"],
                              "instance": frame["instance"], "name": call["name"],
                              "arguments": prepared.arguments})
    if not prepared.definition.resume_inflight:
        ctx.head["op"] = tool_op(call=call, execution=ctx.head["execution"],
                                 instance=frame["instance"], started_at=now())
        ctx.commit("tool.started")
    raw = await ctx.tools.invoke(prepared, tool_context(ctx, frame, call, uncertain))
    await finish_tool(ctx, hooks, frame, call, prepared, raw)


async def finish_tool(ctx: StepContext, hooks: HookRunner, frame: Frame, call: PendingCall,
                      prepared: PreparedCall, raw: RawResult, *,
                      status: ToolStatus | None = None) -> None:
    """Save the raw result before tool.after runs; record the outcome; commit."""
    inst = frame["instance"]
    outcome = ctx.tools.outcome(prepared, raw)
    if status is not None:
        outcome = dataclasses.replace(outcome, status=status)
    annotations: dict[str, Any] = {}
    if hooks.has("tool.after", inst, tool=call["name"]):
        op = ctx.head["op"]
        if op is None or op["kind"] != "tool":
            op = tool_op(call=call, execution=ctx.head["execution"], instance=inst,
                         started_at=now())
        if op["phase"] != "raw_saved":
            op["phase"] = "raw_saved"
            op["raw"] = {"ops": ctx.journal.append("ops", {
                "op_id": op["id"], "raw_result": raw.to_dict(),
                "arguments": prepared.arguments})}
            ctx.head["op"] = op
            ctx.commit("tool.raw_saved")
        payload = {"call_id": call["call_id"], "request_id": call["request_id"],
                   "name": call["name"], "instance": inst, "status": outcome.status,
                   "value": outcome.value, "arguments": prepared.arguments,
                   "evidence_arguments": dict(outcome.evidence_arguments),
                   "error_code": outcome.error_code, "annotations": {}}
        payload, _ = await hooks.run("tool.after", payload, instance=inst,
                                     key=f"tool-after:{call['request_id']}", tool=call["name"],
                                     operation_id=f"t:{call['request_id']}")
        outcome = dataclasses.replace(outcome, value=payload["value"])
        annotations = dict(payload.get("annotations") or {})
    record_tool(ctx, frame, call, outcome, full=_full_text(raw), annotations=annotations)
    ctx.head["op"] = None
    ctx.commit("tool.done")
    await hooks.observe("operation.finally", {
        "operation_id": f"t:{call['request_id']}", "kind": "tool", "instance": inst,
        "status": outcome.status}, instance=inst, tool=call["name"])


def _full_text(raw: RawResult) -> str:
    return as_text(raw.value) if raw.ok else as_text({"error": dict(raw.error or {})})


def record_tool(ctx: StepContext, frame: Frame, call: PendingCall, outcome: ToolOutcome, *,
                full: str | None = None, annotations: dict[str, Any] | None = None) -> None:
    """The source record keeps the full result text once; the view shows the capped,
    model-visible value with a reference to the rest. The caller commits."""
    inst = frame["instance"]
    shown = as_text(outcome.value)
    full = shown if full is None else full
    seq = ctx.journal.last_seq(f"src:{inst}") + 1
    shown = cap_with_reference(shown, ctx.tools.max_visible_chars, f"{ctx.run_id}/{inst}#{seq}")
    message = {"role": "tool", "tool_call_id": call["call_id"], "content": full}
    visible = {"role": "tool", "tool_call_id": call["call_id"], "content": shown}
    extra: dict[str, Any] = {"request_id": call["request_id"], "name": call["name"],
                             "status": outcome.status}
    if outcome.evidence_arguments:
        extra["evidence_arguments"] = dict(outcome.evidence_arguments)
    if annotations:
        extra["annotations"] = annotations
    ctx.context.append(ctx.journal, frame, "tool_result", message, visible=visible, extra=extra)
    add_evidence(frame, seq)
    call["state"] = "done"
    if all(c["state"] == "done" for c in frame["pending"]):
        frame["pending"] = []
    ctx.emit("tool.completed", {"run_id": ctx.run_id, "request_id": call["request_id"],
                                "instance": inst, "name": call["name"],
                                "status": outcome.status, "result": shown})


async def resume_tool(ctx: StepContext, hooks: HookRunner, op: ToolOp) -> bool:
    """A tool operation left by an earlier execution. Returns False when the call should
    simply be run again as ``uncertain`` (a ``resume_inflight`` tool)."""
    frame = ctx.frame(op["instance"])
    call = pending_call(frame, op["request_id"])
    if op["phase"] == "raw_saved":  # the handler ran and its result is saved
        prepared = ctx.tools.prepare(tool_request(ctx, frame, call, True))
        if isinstance(prepared, ToolOutcome):
            raise BlockRun(ToolOutcomeUnknown(f"saved tool call {call['name']} no longer "
                                              "resolves in the catalog"))
        entry = ctx.journal.read("ops", op["raw"]["ops"] - 1, 1)[0].body
        prepared = dataclasses.replace(prepared, arguments=entry["arguments"])
        await finish_tool(ctx, hooks, frame, call, prepared,
                          RawResult.from_dict(entry["raw_result"]))
        return True
    definition = ctx.tools.registry.resolve(call["name"])
    if not definition.resume_inflight:
        raise BlockRun(ToolOutcomeUnknown(
            f"tool call {call['name']} ({op['request_id']}) may have run before the "
            "interruption; its outcome is unknown and it is not re-run automatically: "
            "its effects are to be inspected and what happened recorded (it ran, it did "
            "not run, or run it again)",
            details={"request_id": op["request_id"], "tool": call["name"]}))
    ctx.head["op"] = None
    return False


def pending_call(frame: Frame, request_id: str) -> PendingCall:
    return next(c for c in frame["pending"] if c["request_id"] == request_id)
