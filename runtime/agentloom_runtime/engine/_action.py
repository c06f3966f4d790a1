"""The action step: one model call of the frame's loop (docs/contract.md#loop-order, steps 9–10).

The response is recorded once (the assistant source record); tool calls open a pending
group, and an answer becomes a candidate for the review. A call id that repeats one
already in the view (a provider reusing ids across turns, or within one response) is
rewritten to a run-unique id in what the model is shown; the source record keeps it.
So is argument text the tool runtime refuses (not JSON, a lone surrogate): the model is
shown the failure its call got in its place, never the raw text again.
"""

from __future__ import annotations

import json
from typing import Any

from agentloom_runtime.contracts import Message, ModelRequest, ModelResponse, ToolOutcome
from agentloom_runtime.tools import parse_arguments

from ._context import StepContext
from ._frames import frame_view, tool_allowed
from ._hooks import HookRunner
from ._model_call import ModelCaller, next_op_id
from ._state import Frame, PendingCall

INLINE_ARGUMENTS = 512  # longer arguments are read from the source record


def visible_schemas(ctx: StepContext, frame: Frame) -> list[dict[str, Any]]:
    only_plan = ctx.modules.strategy.before_plan_only(frame_view(frame))
    defs = ctx.tools.visible(frame["instance"], before_plan_only=only_plan)
    return [d.schema() for d in defs if tool_allowed(frame, d.name)]


def request_options(ctx: StepContext) -> dict[str, Any]:
    model = ctx.snapshot.model
    options: dict[str, Any] = {"max_output_tokens": model.max_output_tokens}
    if model.temperature is not None:
        options["temperature"] = model.temperature
    return options


async def action_step(ctx: StepContext, hooks: HookRunner, model: ModelCaller,
                      frame: Frame) -> None:
    inst = frame["instance"]
    tools = visible_schemas(ctx, frame)
    messages = ctx.context.model_view(ctx.journal, frame)
    messages = await hooks.prepare_context(inst, messages, tools, frame.get("counters", {}),
                                           key=f"prepare:{inst}:{ctx.head['total_calls'] + 1}",
                                           operation_id=next_op_id(ctx.head))
    request = ModelRequest(messages=messages, tools=tools, purpose="action", instance=inst,
                           options=request_options(ctx))
    raw, response = await model.op(request)
    frame["iterations"] += 1
    frame.setdefault("counters", {}).setdefault("model_steps", 0)
    frame["counters"]["model_steps"] += 1
    calls = [ctx.new_request_id(frame) for _ in response.tool_calls]
    seen = _seen_ids(ctx, inst, messages)
    call_ids = []
    for tool_call, (_, fresh) in zip(response.tool_calls, calls, strict=True):
        call_id = tool_call.id if tool_call.id not in seen else fresh
        while call_id in seen:  # fresh, then fresh_, …: never an id already in the view
            call_id += "_"
        seen.add(call_id)
        call_ids.append(call_id)
    calls = [(request_id, call_id) for (request_id, _), call_id in zip(calls, call_ids,
                                                                       strict=True)]
    visible = _with_call_ids(response, call_ids)
    seq = ctx.context.append(ctx.journal, frame, "assistant", raw.message(), visible=visible,
                             extra={"call": model.last_call})
    if response.tool_calls:
        frame["pending"] = []
        for index, (tool_call, (request_id, call_id)) in enumerate(
                zip(response.tool_calls, calls, strict=True)):
            call = PendingCall(call_id=call_id, name=tool_call.name, request_id=request_id,
                               state="queued", src=seq, index=index,
                               queued_in=ctx.head["execution"])
            if len(tool_call.arguments) <= INLINE_ARGUMENTS:
                call["arguments"] = tool_call.arguments
            frame["pending"].append(call)
    else:
        feedback = ctx.modules.strategy.candidate_feedback(frame_view(frame),
                                                           response.content or "")
        if feedback:
            ctx.context.append(ctx.journal, frame, "feedback",
                               {"role": "user", "content": feedback})
        else:
            frame["candidate"] = ctx.journal.last_seq(f"view:{inst}")
    model.end_step()
    ctx.commit("action.done")


def _seen_ids(ctx: StepContext, instance: str, view: list[Message]) -> set[str]:
    """The call ids in the instance's view: built once per attachment, then kept up to
    date as calls are added (ids dropped by a compaction only cause a needless rewrite)."""
    seen = ctx.call_ids.get(instance)
    if seen is None:
        seen = {str(c.get("id")) for m in view if m.get("tool_calls")
                for c in m["tool_calls"]}
        ctx.call_ids[instance] = seen
    return seen


def _with_call_ids(response: ModelResponse, call_ids: list[str]) -> Message:
    """What the model is shown of its response: run-unique call ids, and in place of
    argument text the tool runtime refuses (not a JSON object of valid Unicode), the
    failure the call gets — a provider may refuse the raw text in a later request."""
    message = response.message()
    if call_ids and call_ids != [c.id for c in response.tool_calls]:
        message["tool_calls"] = [{**c, "id": call_id}
                                 for c, call_id in zip(message["tool_calls"], call_ids,
                                                       strict=True)]
    for call in message.get("tool_calls") or ():
        parsed = parse_arguments(call["function"]["arguments"])
        if isinstance(parsed, ToolOutcome):
            call["function"] = {**call["function"], "arguments": json.dumps(
                parsed.value, ensure_ascii=False)}
    return message
