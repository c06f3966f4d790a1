"""Commands: ``workspace_command`` never runs inside a step (docs/contract.md#commands).

The step saves the command spec as a ``dispatched`` operation and returns
``next=command``; the host runs it (bubblewrap, or ECS RunTask from Step Functions) and
passes the result to the next ``step(command_result=...)``, or the host's marker store
has it by request id. A dispatched command whose marker exists but whose result does
not has an unknown outcome: the run blocks until an operator records a verdict. Once the
commit recording a command holds its result, the host's copy goes (``forget``).
"""

from __future__ import annotations

import logging
from typing import Any

from agentloom_runtime.errors import (
    CheckpointConflict,
    ConfigError,
    ToolError,
    ToolOutcomeUnknown,
)
from agentloom_runtime.tools import PreparedCall, RawResult

from ._context import BlockRun, StepContext, now
from ._hooks import HookRunner
from ._state import CommandOp, Frame, PendingCall, command_op
from ._tools import finish_tool, pending_call, record_tool, tool_context, tool_request

log = logging.getLogger(__name__)


async def dispatch_command(ctx: StepContext, frame: Frame, call: PendingCall,
                           prepared: PreparedCall) -> bool:
    """Build and save the spec; returns True when the host must run it."""
    raw = await ctx.tools.invoke(prepared, tool_context(ctx, frame, call))
    if not raw.ok:
        record_tool(ctx, frame, call, ctx.tools.outcome(prepared, raw))
        ctx.commit("tool.done")
        return False
    ctx.head["op"] = command_op(call=call, execution=ctx.head["execution"],
                                instance=frame["instance"], spec=dict(raw.value),
                                started_at=now())
    ctx.commit("command.dispatched")
    return True


def unknown_command(ctx: StepContext, op: CommandOp) -> ToolOutcomeUnknown:
    return ToolOutcomeUnknown(
        f"command {op['request_id']} started but its result is unknown (the process that "
        "ran it is gone): the workspace is to be inspected and what happened recorded (it "
        "ran, it did not run, or run it again)",
        details={"request_id": op["request_id"], "tool": op["name"]})


def find_command_result(ctx: StepContext, op: CommandOp,
                   given: dict[str, Any] | None) -> dict[str, Any] | None:
    """The result to record: given by the host, or found by request id in the marker
    store. None: never started (the host may run it). Blocks when the fate is unknown.
    A result for another request (a stale or duplicate step) changes nothing."""
    if given is not None and given.get("request_id") not in (None, op["request_id"]):
        raise CheckpointConflict(
            f"the command result is for request {given.get('request_id')}, but "
            f"{op['request_id']} is waiting; a stale or duplicate step changes nothing",
            details={"run_id": ctx.run_id, "request_id": op["request_id"]})
    if given is not None or ctx.host.commands is None:
        return given
    state, found = ctx.host.commands.lookup(op["request_id"])
    if found is None and state != "absent":
        raise BlockRun(unknown_command(ctx, op))
    return found


async def record_command(ctx: StepContext, hooks: HookRunner, op: CommandOp,
                         result: dict[str, Any]) -> None:
    frame = ctx.frame(op["instance"])
    call = pending_call(frame, op["request_id"])
    prepared = ctx.tools.prepare(tool_request(ctx, frame, call, True))
    if not isinstance(prepared, PreparedCall):
        raise ConfigError("a dispatched command no longer resolves in the catalog")
    failed = (result.get("exit_code") != 0 or bool(result.get("timed_out"))
              or bool(result.get("error")))
    ctx.head["op"] = None
    await finish_tool(ctx, hooks, frame, call, prepared, RawResult(ok=True, value=result),
                      status="error" if failed else "ok")
    if ctx.host.commands is not None:  # committed: the host's copy of the output goes
        try:
            ctx.host.commands.forget(op["request_id"])
        except (OSError, ToolError):  # a leftover file, never a failed step
            log.warning("command %s: its result file was not removed", op["request_id"])
