"""Delegation: ``delegate_task`` opens a child frame (docs/contract.md#sub-agents).

The child has its own context, plan, evidence, pending calls and workspace, only its
template's tools, and cannot delegate further; at most ``max_children`` per run. Later
steps advance the child; its end closes the parent's pending call (``_closing``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentloom_runtime.contracts import ToolOutcome
from agentloom_runtime.tools import failure_outcome

from ._context import StepContext
from ._frames import keep_task
from ._hooks import HookRunner
from ._state import Frame, ParentRef, PendingCall, new_frame
from ._tools import record_tool


async def open_delegation(ctx: StepContext, hooks: HookRunner, frame: Frame,
                          call: PendingCall, arguments: Mapping[str, Any]) -> None:
    head = ctx.head
    limits = ctx.modules.limits
    template = next((t for t in ctx.snapshot.subagents
                     if t.id == arguments.get("subagent_id")), None)
    failure: ToolOutcome | None = None
    if frame["parent"] is not None:
        failure = failure_outcome("delegation_nested", "a sub-agent cannot delegate")
    elif template is None:
        failure = failure_outcome("subagent_not_found",
                                  f"no sub-agent template {arguments.get('subagent_id')!r}")
    elif head["delegations"] >= limits.max_children:
        failure = failure_outcome("delegation_limit", f"this run already created "
                                  f"{limits.max_children} sub-agents")
    instance = f"sub-{head['delegations'] + 1}"
    if failure is None and template is not None and hooks.has("subagent.before",
                                                              frame["instance"]):
        payload = {"instance": instance, "parent_instance": frame["instance"],
                   "subagent_id": template.id, "task": str(arguments["task"]),
                   "run_id": ctx.run_id}
        _, rejected = await hooks.run("subagent.before", payload, instance=frame["instance"],
                                      key=f"subagent:{call['request_id']}",
                                      operation_id=f"t:{call['request_id']}")
        if rejected is not None:
            failure = failure_outcome("subagent_rejected_by_hook", rejected.reason,
                                      status="rejected")
    if failure is not None or template is None:
        record_tool(ctx, frame, call, failure or failure_outcome("delegation_failed", ""))
        ctx.commit("tool.done")
        return
    head["delegations"] += 1
    child = new_frame(instance, str(arguments["task"]), template=template.id,
                      tools=list(template.tools),
                      parent=ParentRef(instance=frame["instance"],
                                       request_id=call["request_id"]))
    head["frames"][instance] = child
    head["stack"].append(instance)
    prompt = f"{template.prompt}\n\nYour duty: {template.duty}".strip()
    ctx.context.create(ctx.journal, child, system=ctx.system_prompt(child, prompt),
                       history=(), task=child["task"])
    keep_task(ctx, child)
    call["state"] = "delegated"
    call["child"] = instance
    ctx.commit("delegation.opened")
    ctx.emit("subagent.started", {"run_id": ctx.run_id, "instance": instance,
                                  "template": template.id})
