"""Durable model operations: the host ``ModelCall`` every policy and step uses.

A model operation is saved as ``sent`` (and the call budget consumed) before the request
leaves; its raw response is appended to the ``ops`` log and carried by the step's next
commit. With ``model.chat.after`` hooks the raw response is committed first
(``raw_saved``), so a failing or interrupted after-stage resumes from the saved output
without calling the model again. After a crash, an operation still ``sent`` has an
unknown outcome: the run blocks unless the execution was resumed with
``retry_unknown_models=True`` (which may bill the call again). Calls already answered
within a multi-call step (compaction) are replayed from the log, never sent twice.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.errors import (
    BudgetExceeded,
    ModelError,
    ModelResponseError,
    ModelTransportError,
    ResumeMismatch,
)

from .core import BlockRun
from .hook_stages import HookStages


def request_hash(request: ModelRequest) -> str:
    raw = json.dumps([list(request.messages), list(request.tools), request.purpose,
                      dict(request.options)], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()


class ModelOps(HookStages):
    async def call_model(self, request: ModelRequest) -> ModelResponse:
        """The host ``ModelCall``: the effective (hook-processed) response."""
        return (await self.model_op(request))[1]

    async def model_op(self, request: ModelRequest) -> tuple[ModelResponse, ModelResponse]:
        """One durable model call; returns (raw, effective)."""
        j = self._journal()
        head = j.head
        index = len(head["step_ops"])
        digest = request_hash(request) if request.purpose == "compaction" else None
        if index < len(head.get("step_done", [])):
            return self._replay(head["step_done"][index], digest)
        op = head.get("op")
        if op and op["kind"] == "model" and op["phase"] == "raw_saved" and op["index"] == index:
            raw = ModelResponse.from_dict(j.read("ops", op["ops_seq"] - 1, 1)[0].body[
                "raw_output"])
            return raw, await self._finish_model(request, op, raw)
        if head["calls"] >= self.limits.max_model_calls:
            raise BlockRun(BudgetExceeded(
                f"the run used its {self.limits.max_model_calls} model calls for this "
                "execution; resume to continue with a fresh budget"))
        retry = head.pop("retry_op", None)
        request, final_input = await self._before_chat(request, retry)
        self._validate_request(request)
        op_id = retry["id"] if retry else f"m{head['execution']}-{head['total_calls'] + 1}"
        op = {"id": op_id, "kind": "model", "phase": "sent", "execution": head["execution"],
              "purpose": request.purpose,
              "instance": request.instance, "index": index, "request_hash": digest,
              "attempts": (retry["attempts"] if retry else 0) + 1}
        if final_input is not None:
            op["final_input"] = final_input
        head["op"] = op
        head["calls"] += 1
        head["total_calls"] += 1
        j.commit()
        self.emit("model.started", {"run_id": j.run_id, "op_id": op_id,
                                    "purpose": request.purpose, "instance": request.instance})
        raw = await self._invoke(request)
        frame = head["frames"].get(request.instance, {})
        op["ops_seq"] = j.append("ops", {
            "op_id": op_id, "purpose": request.purpose, "instance": request.instance,
            "request_hash": digest, "attempts": op["attempts"], "raw_output": raw.to_dict(),
            # the original input by reference: the instance's view as it stood
            "original_input": {"view_upto": j.last_seq(f"view:{request.instance}"),
                               "view_snapshot": frame.get("view", {}).get("snapshot", 0),
                               "messages": len(request.messages)},
            "final_input": op.get("final_input")})
        if self.has_hooks("model.chat.after", request.instance, purpose=request.purpose):
            op["phase"] = "raw_saved"
            j.commit()
        return raw, await self._finish_model(request, op, raw)

    async def _invoke(self, request: ModelRequest) -> ModelResponse:
        head = self.head
        try:
            response: ModelResponse = await self.modules.model.invoke(request)
        except ModelError as err:
            if not (isinstance(err, ModelTransportError) and err.details.get("sent")):
                head["op"] = None  # no response exists: the call may simply be made again
            raise
        ids = [c.id for c in response.tool_calls]
        if len(ids) != len(set(ids)) or not (response.content or ids):
            head["op"] = None
            raise ModelResponseError("the model response has duplicate tool call ids or "
                                     "neither an answer nor tool calls")
        return response

    async def _before_chat(self, request: ModelRequest, retry: dict[str, Any] | None
                           ) -> tuple[ModelRequest, dict[str, Any] | None]:
        """Apply model.chat.before; a retried operation reuses its saved final input
        instead of running the stage again."""
        if retry is not None:
            delta = retry.get("final_input")
            return (self._apply_input(request, delta) if delta else request), delta
        if not self.has_hooks("model.chat.before", request.instance, purpose=request.purpose):
            return request, None
        payload = {"messages": list(request.messages), "tools": list(request.tools),
                   "purpose": request.purpose, "instance": request.instance,
                   "options": dict(request.options), "extra_messages": []}
        key = f"chat:{request.instance}:{self.head['total_calls'] + 1}"
        payload, _ = await self.run_stage("model.chat.before", payload,
                                          instance=request.instance, key=key,
                                          purpose=request.purpose)
        delta = {"extra_messages": payload["extra_messages"], "options": payload["options"]}
        return self._apply_input(request, delta), delta

    @staticmethod
    def _apply_input(request: ModelRequest, delta: dict[str, Any]) -> ModelRequest:
        return dataclasses.replace(
            request, messages=[*request.messages, *delta["extra_messages"]],
            options=delta["options"])

    async def _finish_model(self, request: ModelRequest, op: dict[str, Any],
                            raw: ModelResponse) -> ModelResponse:
        """The after-stage (if any), then the op is done; the caller's commit carries it."""
        j = self._journal()
        effective = raw
        seq = op["ops_seq"]
        if op["phase"] == "raw_saved":
            payload: dict[str, Any] = {
                "purpose": request.purpose, "instance": request.instance,
                "content": raw.content, "tool_calls": [c.to_dict() for c in raw.tool_calls],
                "reasoning_content": raw.reasoning_content,
                "usage": dict(raw.usage) if raw.usage is not None else None,
                "annotations": {}}
            payload, _ = await self.run_stage("model.chat.after", payload,
                                              instance=request.instance,
                                              key=f"chat-after:{op['id']}",
                                              purpose=request.purpose)
            effective = dataclasses.replace(raw, content=payload["content"])
            seq = j.append("ops", {"op_id": op["id"], "raw_seq": op["ops_seq"],
                                   "effective_output": effective.to_dict(),
                                   "annotations": payload.get("annotations") or {}})
        self.head["op"] = None
        self.head["step_ops"].append(seq)
        self.emit("model.completed", {
            "run_id": j.run_id, "op_id": op["id"], "purpose": request.purpose,
            "instance": request.instance, "content": effective.content,
            "tool_calls": [c.name for c in effective.tool_calls]})
        await self.observe("operation.finally", {
            "operation_id": op["id"], "kind": "model", "instance": request.instance,
            "status": "completed"}, instance=request.instance)
        return effective

    def _replay(self, seq: int, digest: str | None) -> tuple[ModelResponse, ModelResponse]:
        j = self._journal()
        saved = j.read("ops", seq - 1, 1)[0].body
        raw_entry = saved if "raw_output" in saved else j.read("ops", saved["raw_seq"] - 1,
                                                              1)[0].body
        if raw_entry.get("request_hash") != digest:
            raise ResumeMismatch("a replayed model call differs from the saved one; the "
                                 "policy is not deterministic for the same input")
        j.head["step_ops"].append(seq)
        raw = ModelResponse.from_dict(raw_entry["raw_output"])
        effective = ModelResponse.from_dict(saved.get("effective_output") or
                                            raw_entry["raw_output"])
        return raw, effective

    def _end_model_step(self) -> None:
        self.head["step_ops"] = []
        self.head.pop("step_done", None)

    def _validate_request(self, request: ModelRequest) -> None:
        validate = getattr(self.modules.compaction, "validate_request", None)
        if validate is None:
            return
        try:
            validate(request)
        except BudgetExceeded as err:
            raise BlockRun(err) from None
