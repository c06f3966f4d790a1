"""The durable model call: the host ``ModelCall`` every policy and step uses.

A model operation is saved as ``sent`` (and the call budget consumed) before the request
leaves. Its response is logged in ``ops`` and carried by the step's next commit; with
``model.chat.after`` hooks the raw response is committed first (``raw_saved``), so a
failing or interrupted after-stage resumes from the saved output without calling the
model again. After a crash, an operation still ``sent`` has an unknown outcome: the run
blocks until an operator decides (``resolve``: send again, or treat as failed). Calls
already answered within a multi-call step (compaction) are replayed from the log, never
sent twice.

An action's response is stored once: in the assistant source record the action step
appends, with the call's metadata (op id, attempts, usage: ``last_call``); summaries and
reviews keep theirs in ``ops`` (a multi-call step replays them from there).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentloom_runtime._json import digest, storable
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.errors import (
    BudgetExceeded,
    ModelError,
    ModelResponseError,
    ModelTransportError,
    ResumeMismatch,
)

from ._context import BlockRun, StepContext, now
from ._hooks import HookRunner
from ._state import ModelOp, model_op


def request_hash(request: ModelRequest) -> str:
    return digest([list(request.messages), list(request.tools), request.purpose,
                   dict(request.options)])


class ModelCaller:
    """One per engine; ``__call__`` is the ``ModelCall`` handed to policies."""

    def __init__(self, ctx: StepContext, hooks: HookRunner) -> None:
        self._ctx = ctx
        self._hooks = hooks
        self.last_call: dict[str, Any] = {}  # metadata of the last call, for its record

    async def __call__(self, request: ModelRequest) -> ModelResponse:
        """The effective (hook-processed) response."""
        return (await self.op(request))[1]

    async def op(self, request: ModelRequest) -> tuple[ModelResponse, ModelResponse]:
        """One durable model call; returns (raw, effective)."""
        ctx = self._ctx
        head = ctx.head
        index = len(head["step_ops"])
        checked = request_hash(request) if request.purpose == "compaction" else None
        done = head.get("step_done", [])
        if index < len(done):
            return self._replay(done[index], checked)
        op = head["op"]
        if op and op["kind"] == "model" and op["phase"] == "raw_saved" and op["index"] == index:
            saved = ctx.journal.read("ops", op["ops_seq"] - 1, 1)[0].body
            raw = ModelResponse.from_dict(saved["raw_output"])
            self.last_call = {"op_id": op["id"], "attempts": op["attempts"],
                              "usage": saved.get("usage")}
            return raw, await self._finish(request, op, raw)
        limit = ctx.modules.limits.max_model_calls
        if head["calls"] >= limit:
            raise BlockRun(BudgetExceeded(
                f"the run used its {limit} model calls for this execution; resume to "
                "continue with a fresh budget"))
        retry = head.pop("retry_op", None)
        if retry is not None and retry["purpose"] != request.purpose:
            retry = None  # the retried call is not this one (it is sent when reached)
        request, final_input = await self._before_chat(request, retry)
        self._validate(request)
        op_id = retry["id"] if retry else f"m{head['execution']}-{head['total_calls'] + 1}"
        op = model_op(op_id=op_id, execution=head["execution"], purpose=request.purpose,
                      instance=request.instance, index=index, request_hash=checked,
                      attempts=(retry["attempts"] if retry else 0) + 1, started_at=now(),
                      final_input=final_input)
        head["op"] = op
        head["calls"] += 1
        head["total_calls"] += 1
        ctx.commit("model.sent")
        ctx.emit("model.started", {"run_id": ctx.run_id, "op_id": op_id,
                                   "purpose": request.purpose, "instance": request.instance})
        raw = await self._invoke(request)
        after = self._hooks.has("model.chat.after", request.instance, purpose=request.purpose)
        self.last_call = {"op_id": op_id, "attempts": op["attempts"],
                          "usage": dict(raw.usage) if raw.usage is not None else None}
        if request.purpose != "action" or after:
            op["ops_seq"] = ctx.journal.append("ops", {
                **self.last_call, "purpose": request.purpose, "instance": request.instance,
                "request_hash": checked, "final_input": final_input,
                "raw_output": raw.to_dict()})
        if after:
            op["phase"] = "raw_saved"
            ctx.commit("model.raw_saved")
        return raw, await self._finish(request, op, raw)

    async def _invoke(self, request: ModelRequest) -> ModelResponse:
        head = self._ctx.head
        try:
            response = await self._ctx.modules.model.invoke(request)
        except ModelError as err:
            if not (isinstance(err, ModelTransportError) and err.details.get("sent")):
                head["op"] = None  # no response exists: the call may simply be made again
            raise
        if not (response.content or response.tool_calls):
            head["op"] = None
            raise ModelResponseError("the model response has neither an answer nor tool "
                                     "calls")
        # Text from a model is made storable here, at the boundary (lone surrogates).
        return ModelResponse.from_dict(storable(response.to_dict()))

    async def _before_chat(self, request: ModelRequest, retry: Any
                           ) -> tuple[ModelRequest, dict[str, Any] | None]:
        """Apply model.chat.before; a retried operation reuses its saved final input
        instead of running the stage again."""
        if retry is not None:
            delta = retry.get("final_input")
            return (_apply_input(request, delta) if delta else request), delta
        if not self._hooks.has("model.chat.before", request.instance, purpose=request.purpose):
            return request, None
        payload = {"messages": list(request.messages), "tools": list(request.tools),
                   "purpose": request.purpose, "instance": request.instance,
                   "options": dict(request.options), "extra_messages": []}
        key = f"chat:{request.instance}:{self._ctx.head['total_calls'] + 1}"
        payload, _ = await self._hooks.run("model.chat.before", payload,
                                           instance=request.instance, key=key,
                                           purpose=request.purpose)
        delta = {"extra_messages": payload["extra_messages"], "options": payload["options"]}
        return _apply_input(request, delta), delta

    async def _finish(self, request: ModelRequest, op: ModelOp,
                      raw: ModelResponse) -> ModelResponse:
        """The after-stage (if any), then the op is done; the caller's commit carries it."""
        ctx = self._ctx
        effective = raw
        seq = op.get("ops_seq")
        if op["phase"] == "raw_saved":
            payload: dict[str, Any] = {
                "purpose": request.purpose, "instance": request.instance,
                "content": raw.content, "tool_calls": [c.to_dict() for c in raw.tool_calls],
                "reasoning_content": raw.reasoning_content,
                "usage": dict(raw.usage) if raw.usage is not None else None,
                "annotations": {}}
            payload, _ = await self._hooks.run("model.chat.after", payload,
                                               instance=request.instance,
                                               key=f"chat-after:{op['id']}",
                                               purpose=request.purpose)
            effective = dataclasses.replace(raw, content=payload["content"])
            seq = ctx.journal.append("ops", {
                "op_id": op["id"], "raw_seq": op["ops_seq"],
                "effective_output": effective.to_dict(),
                "annotations": payload.get("annotations") or {}})
        ctx.head["op"] = None
        if seq is not None:  # an action is never replayed: it ends its step
            ctx.head["step_ops"].append(seq)
        ctx.emit("model.completed", {
            "run_id": ctx.run_id, "op_id": op["id"], "purpose": request.purpose,
            "instance": request.instance, "content": effective.content,
            "tool_calls": [c.name for c in effective.tool_calls]})
        await self._hooks.observe("operation.finally", {
            "operation_id": op["id"], "kind": "model", "instance": request.instance,
            "status": "completed"}, instance=request.instance)
        return effective

    def _replay(self, seq: int, checked: str | None) -> tuple[ModelResponse, ModelResponse]:
        journal = self._ctx.journal
        saved = journal.read("ops", seq - 1, 1)[0].body
        raw_entry = saved if "raw_output" in saved else journal.read(
            "ops", saved["raw_seq"] - 1, 1)[0].body
        if raw_entry.get("request_hash") != checked:
            raise ResumeMismatch("a replayed model call differs from the saved one; the "
                                 "policy is not deterministic for the same input")
        self._ctx.head["step_ops"].append(seq)
        raw = ModelResponse.from_dict(raw_entry["raw_output"])
        effective = ModelResponse.from_dict(saved.get("effective_output") or
                                            raw_entry["raw_output"])
        return raw, effective

    def end_step(self) -> None:
        self._ctx.head["step_ops"] = []
        self._ctx.head.pop("step_done", None)

    def _validate(self, request: ModelRequest) -> None:
        try:
            self._ctx.modules.compaction.validate_request(request)
        except BudgetExceeded as err:
            raise BlockRun(err) from None


def _apply_input(request: ModelRequest, delta: dict[str, Any]) -> ModelRequest:
    return dataclasses.replace(
        request, messages=[*request.messages, *delta["extra_messages"]],
        options=delta["options"])
