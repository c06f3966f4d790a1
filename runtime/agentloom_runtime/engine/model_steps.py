"""Model-call steps: durable model operations, action, completion review, compaction.

A model operation is saved as ``sent`` (and the call budget consumed) before the request
leaves; its response is appended to the ``ops`` log and carried by the step's next
commit. After a crash, an operation still ``sent`` has an unknown outcome: the run blocks
unless the execution was resumed with ``retry_unknown_models=True`` (which may bill the
call again). Calls already answered within a multi-call step (compaction) are replayed
from the log, never sent twice.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from agentloom_runtime.contracts import (
    CompletionInput,
    ContextInput,
    ModelRequest,
    ModelResponse,
    RunStatus,
    StepKind,
    StepNext,
)
from agentloom_runtime.errors import (
    BudgetExceeded,
    ConfigError,
    ModelError,
    ModelOutcomeUnknown,
    ModelResponseError,
    ModelTransportError,
    ResumeMismatch,
)

from .core import BlockRun, EngineCore
from .frames import frame_view


def request_hash(request: ModelRequest) -> str:
    raw = json.dumps([list(request.messages), list(request.tools), request.purpose,
                      dict(request.options)], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()


class ModelSteps(EngineCore):
    async def call_model(self, request: ModelRequest) -> ModelResponse:
        """The host ``ModelCall``: budgeted, durable, replayed within a step."""
        j = self._journal()
        head = j.head
        index = len(head["step_ops"])
        digest = request_hash(request) if request.purpose == "compaction" else None
        if index < len(head.get("step_done", [])):
            return self._replay(head["step_done"][index], digest)
        if head["calls"] >= self.limits.max_model_calls:
            raise BlockRun(BudgetExceeded(
                f"the run used its {self.limits.max_model_calls} model calls for this "
                "execution; resume to continue with a fresh budget"))
        self._validate_request(request)
        retry = head.pop("retry_op", None)
        op_id = retry["id"] if retry else f"m{head['execution']}-{head['total_calls'] + 1}"
        head["op"] = {"id": op_id, "kind": "model", "phase": "sent", "purpose": request.purpose,
                      "instance": request.instance, "index": index,
                      "attempts": (retry["attempts"] if retry else 0) + 1}
        head["calls"] += 1
        head["total_calls"] += 1
        j.commit()
        self.emit("model.started", {"run_id": j.run_id, "op_id": op_id,
                                    "purpose": request.purpose, "instance": request.instance})
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
        seq = j.append("ops", {"op_id": op_id, "purpose": request.purpose,
                               "instance": request.instance, "request_hash": digest,
                               "attempts": head["op"]["attempts"],
                               "raw_output": response.to_dict()})
        head["op"] = None
        head["step_ops"].append(seq)
        self.emit("model.completed", {"run_id": j.run_id, "op_id": op_id,
                                      "purpose": request.purpose, "instance": request.instance,
                                      "content": response.content,
                                      "tool_calls": [c.name for c in response.tool_calls]})
        return response

    def _replay(self, seq: int, digest: str | None) -> ModelResponse:
        j = self._journal()
        saved = j.read("ops", seq - 1, 1)[0].body
        if saved.get("request_hash") != digest:
            raise ResumeMismatch("a replayed model call differs from the saved one; the "
                                 "policy is not deterministic for the same input")
        j.head["step_ops"].append(seq)
        return ModelResponse.from_dict(saved["raw_output"])

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

    async def _resume_operation(self, op: dict[str, Any], command_result: Any
                                ) -> tuple[StepKind, StepNext]:
        if op["kind"] == "model":
            if not self.head["exec_options"].get("retry_unknown_models"):
                raise BlockRun(ModelOutcomeUnknown(
                    f"model request {op['id']} was sent but no response was saved; resume "
                    "with retry_unknown_models=True to send it again (it may be billed twice)",
                    details={"op_id": op["id"]}))
            # Re-enter the same step: answered calls replay, this one is sent again under
            # its original identity.
            self.head["retry_op"] = {"id": op["id"], "attempts": op["attempts"]}
            self.head["step_done"] = list(self.head["step_ops"])
            self.head["step_ops"] = []
            self.head["op"] = None
            return await self._advance(None)
        if op["kind"] == "tool":
            return await self._resume_tool(op)
        if op["kind"] == "command":
            return await self._resume_command(op, command_result)
        raise ConfigError(f"unknown operation kind {op['kind']!r} in the checkpoint")

    # -- action ---------------------------------------------------------------------------

    def visible_schemas(self, frame: dict[str, Any]) -> list[dict[str, Any]]:
        only_plan = self.modules.strategy.before_plan_only(frame_view(frame))
        defs = self.tools.visible(frame["instance"], before_plan_only=only_plan)
        allowed = frame.get("tools")
        return [d.schema() for d in defs if self.tool_allowed(frame, d.name, allowed)]

    def tool_allowed(self, frame: dict[str, Any], name: str, allowed: Any = None) -> bool:
        if name == "delegate_task":
            return frame["parent"] is None
        if frame["parent"] is None or name == "update_plan":
            return True
        allowed = frame.get("tools") if allowed is None else allowed
        return not allowed or name in allowed

    def _options(self) -> dict[str, Any]:
        model = self.snapshot.model
        options: dict[str, Any] = {"max_output_tokens": model.max_output_tokens}
        if model.temperature is not None:
            options["temperature"] = model.temperature
        return options

    async def _action_step(self, frame: dict[str, Any]) -> None:
        j = self._journal()
        view = self.context.view(j, frame)
        request = ModelRequest(messages=self.context.model_messages(view),
                               tools=self.visible_schemas(frame), purpose="action",
                               instance=frame["instance"], options=self._options())
        response = await self.call_model(request)
        frame["iterations"] += 1
        frame["counters"]["model_steps"] += 1
        self.context.append(j, frame, "assistant", response.message())
        if response.tool_calls:
            frame["pending"] = [
                {"call_id": c.id, "name": c.name, "arguments": c.arguments,
                 "request_id": self._new_request_id(frame), "state": "queued"}
                for c in response.tool_calls]
        else:
            text = response.content or ""
            feedback = self.modules.strategy.candidate_feedback(frame_view(frame), text)
            if feedback:
                self.context.append(j, frame, "feedback", {"role": "user", "content": feedback})
            else:
                frame["candidate"] = j.last_seq(f"src:{frame['instance']}")
        self._end_model_step()
        j.commit()

    def _new_request_id(self, frame: dict[str, Any]) -> str:
        self.head["next_request"] += 1
        return f"{self.head['run_id']}.{frame['instance']}.{self.head['next_request']}"

    # -- completion review ----------------------------------------------------------------

    def candidate_text(self, frame: dict[str, Any]) -> str:
        record = self._journal().read(f"src:{frame['instance']}", frame["candidate"] - 1, 1)
        return str(record[0].body["message"].get("content") or "")

    async def _review_step(self, frame: dict[str, Any]) -> None:
        j = self._journal()
        candidate = self.candidate_text(frame)
        data = CompletionInput(
            task=frame["task"], plan=tuple(frame["plan"]), evidence=tuple(frame["evidence"]),
            messages=self.context.model_messages(self.context.view(j, frame)),
            candidate=candidate, instance=frame["instance"])
        decision = await self.modules.completion.review(data, self.call_model)
        j.append("ops", {"op_id": f"review-{j.head['total_calls']}", "purpose": "decision",
                         "instance": frame["instance"], "decision": decision.to_dict()})
        self.emit("review.decided", {"run_id": j.run_id, "instance": frame["instance"],
                                     **decision.to_dict()})
        if decision.decision == "continue":
            frame["candidate"] = None
            note = f"Review: the task is not complete yet. {decision.reason}".strip()
            if decision.next_action:
                note += f"\nNext: {decision.next_action}"
            self.context.append(j, frame, "review", {"role": "user", "content": note})
        else:
            status: RunStatus = "completed" if decision.decision == "complete" else "blocked"
            self.finish_frame(frame, status, candidate, decision.reason)
        self._end_model_step()
        j.commit()

    # -- compaction -----------------------------------------------------------------------

    async def _maybe_compact(self, frame: dict[str, Any]) -> bool:
        policy = self.modules.compaction
        if policy is None:
            return False
        j = self._journal()
        data = ContextInput(task=frame["task"], plan=tuple(frame["plan"]),
                            messages=tuple(self.context.view(j, frame)),
                            instance=frame["instance"], tools=self.visible_schemas(frame),
                            counters=dict(frame["counters"]))
        if not policy.should_compact(data):
            return False
        result = await policy.compact(data, self.call_model)
        validate = getattr(policy, "validate_compaction_result", None)
        if result is not None and validate is not None:
            validate(data.messages, result.messages, data.tools)
        if result is None:
            return False  # skipped or failed: view and baselines untouched
        self.context.commit_compaction(j, frame, result)
        self._end_model_step()
        j.commit()
        self.emit("context.compacted", {"run_id": j.run_id, "instance": frame["instance"],
                                        **{k: v for k, v in result.metrics.items()
                                           if isinstance(v, int | float | bool | str)}})
        return True
