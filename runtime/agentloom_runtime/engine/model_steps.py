"""Model-call steps: the action call, the completion review and compaction.

Each is one durable cycle built on ``ModelOps.model_op``; the step's final commit
carries the model output, the new records and the frame's next phase together.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from agentloom_runtime.contracts import (
    CompactionResult,
    CompletionInput,
    ContextInput,
    ModelRequest,
    RunStatus,
    StepKind,
    StepNext,
)
from agentloom_runtime.errors import ConfigError, ModelOutcomeUnknown

from .core import BlockRun
from .frames import frame_view
from .model_ops import ModelOps

CHILD_BUILTINS = frozenset({"update_plan", "read_result"})


class ModelSteps(ModelOps):
    async def _resume_operation(self, op: dict[str, Any], command_result: Any
                                ) -> tuple[StepKind, StepNext]:
        if op["kind"] == "model" and op["phase"] == "raw_saved":
            return await self._advance(None, resuming=True)  # the response is saved
        if op["kind"] == "model":
            if not self.head["exec_options"].get("retry_unknown_models"):
                raise BlockRun(ModelOutcomeUnknown(
                    f"model request {op['id']} was sent but no response was saved; resume "
                    "with retry_unknown_models=True to send it again (it may be billed twice)",
                    details={"op_id": op["id"]}))
            # Re-enter the same step: answered calls replay, this one is sent again under
            # its original identity.
            self.head["retry_op"] = {"id": op["id"], "attempts": op["attempts"],
                                     "final_input": op.get("final_input")}
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
        """Main may use the whole catalog; a child only its template's tools (least
        privilege: an empty list grants none) plus the built-in plan and read-back."""
        if name == "delegate_task":
            return frame["parent"] is None
        if frame["parent"] is None or name in CHILD_BUILTINS:
            return True
        granted = set(frame.get("tools") or ()) if allowed is None else set(allowed)
        if "workspace" in granted and name.startswith("workspace_") \
                and name != "workspace_command":
            return True  # the "workspace" group: the file tools, not commands
        return name in granted

    def _options(self) -> dict[str, Any]:
        model = self.snapshot.model
        options: dict[str, Any] = {"max_output_tokens": model.max_output_tokens}
        if model.temperature is not None:
            options["temperature"] = model.temperature
        return options

    async def _action_step(self, frame: dict[str, Any]) -> None:
        j = self._journal()
        tools = self.visible_schemas(frame)
        messages = await self._prepare_hooks(frame, self.context.model_view(j, frame), tools)
        request = ModelRequest(messages=messages, tools=tools, purpose="action",
                               instance=frame["instance"], options=self._options())
        raw, response = await self.model_op(request)
        frame["iterations"] += 1
        frame["counters"]["model_steps"] += 1
        self.context.append(j, frame, "assistant", raw.message(), visible=response.message())
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
                frame["candidate"] = j.last_seq(f"view:{frame['instance']}")
        self._end_model_step()
        j.commit()

    async def _prepare_hooks(self, frame: dict[str, Any], messages: list[dict[str, Any]],
                             tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """context.prepare.before may add labelled, temporary user material (this request
        only, never saved to the view); context.prepare.after observes."""
        inst = frame["instance"]
        if self.has_hooks("context.prepare.before", inst):
            payload = {"instance": inst, "messages": messages, "tools": tools,
                       "extra_messages": []}
            payload, _ = await self.run_stage(
                "context.prepare.before", payload, instance=inst,
                key=f"prepare:{inst}:{self.head['total_calls'] + 1}")
            messages = messages + [
                {"role": "user", "content": f"[material from {m['source']}]\n{m['content']}"}
                for m in payload["extra_messages"]]
        await self.observe("context.prepare.after", {
            "instance": inst, "messages": messages, "tools": tools,
            "counters": dict(frame["counters"])}, instance=inst)
        return messages

    def _new_request_id(self, frame: dict[str, Any]) -> str:
        self.head["next_request"] += 1
        return f"{self.head['run_id']}.{frame['instance']}.{self.head['next_request']}"

    # -- completion review ----------------------------------------------------------------

    def candidate_text(self, frame: dict[str, Any]) -> str:
        """The candidate as the model-visible view shows it (hook-processed)."""
        j = self._journal()
        inst = frame["instance"]
        entry = j.read(f"view:{inst}", frame["candidate"] - 1, 1)[0].body
        if "message" in entry:
            return str(entry["message"].get("content") or "")
        record = j.read(f"src:{inst}", entry["src"] - 1, 1)[0].body
        return str(record["message"].get("content") or "")

    async def _review_step(self, frame: dict[str, Any]) -> None:
        j = self._journal()
        candidate = self.candidate_text(frame)
        data = CompletionInput(
            task=frame["task"], plan=tuple(frame["plan"]), evidence=tuple(frame["evidence"]),
            messages=self.context.model_view(j, frame),
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
        data: ContextInput = self.context.prepare(j, frame, self.visible_schemas(frame))
        trigger = policy.should_compact(data)
        if not trigger:
            return False
        inst = frame["instance"]
        key = f"compact:{inst}:{self.head['total_calls']}"
        if self.has_hooks("context.compact.before", inst):
            payload = {"instance": inst, "messages": self.context.model_messages(data.messages),
                       "counters": dict(frame["counters"]), "reason": str(trigger)}
            _, rejected = await self.run_stage("context.compact.before", payload,
                                               instance=inst, key=key)
            if rejected is not None:
                return False  # a hook vetoed this compaction: view and baselines untouched
        memory = self._failure_memory(frame, policy)
        result = await (policy.compact(data, self.call_model, memory=memory) if memory
                        else policy.compact(data, self.call_model))
        if result is not None:
            result = await self._compact_after(frame, result, key)
            validate = getattr(policy, "validate_compaction_result", None)
            problem = validate(data.messages, result.messages, data.tools) if validate else None
            if problem:
                self.emit("context.compaction_refused", {"instance": inst, "reason": problem})
                if memory is not None:
                    estimate = getattr(policy, "estimate", None)
                    memory.record_failure(
                        estimate=estimate(data.messages, data.tools) if estimate else 0,
                        model_steps=frame["counters"]["model_steps"], reason=problem)
                result = None
        if memory is not None:
            frame["compaction_memory"] = memory.to_dict()
        if result is None:
            return False  # skipped, deferred or failed: view and baselines untouched
        self.context.commit_compaction(j, frame, result)
        self._end_model_step()
        j.commit()
        self.emit("context.compacted", {"run_id": j.run_id, "instance": frame["instance"],
                                        **{k: v for k, v in result.metrics.items()
                                           if isinstance(v, int | float | bool | str)}})
        return True

    @staticmethod
    def _failure_memory(frame: dict[str, Any], policy: Any) -> Any:
        """The persistent failure memory (backoff across resumes) for policies that take
        one: rebuilt from the frame and saved back after every preparation."""
        if "memory" not in inspect.signature(policy.compact).parameters:
            return None
        from agentloom_runtime.context import CompactionFailureMemory

        saved = frame.get("compaction_memory")
        return CompactionFailureMemory.from_dict(saved) if saved else CompactionFailureMemory()

    async def _compact_after(self, frame: dict[str, Any], result: CompactionResult,
                             key: str) -> CompactionResult:
        """context.compact.after may rewrite only the summary the policy declared; the
        rewritten text replaces it where it stands in the view."""
        inst = frame["instance"]
        if result.summary is None or not self.has_hooks("context.compact.after", inst):
            return result
        payload = {"instance": inst, "messages": [dict(m) for m in result.messages],
                   "summary": result.summary, "metrics": dict(result.metrics)}
        payload, _ = await self.run_stage("context.compact.after", payload, instance=inst,
                                          key=f"{key}:after")
        new = payload["summary"]
        if new == result.summary:
            return result
        if "summary_index" in result.metrics:
            from agentloom_runtime.context import with_summary

            return with_summary(result, new, frame["plan"])
        messages = [{**m, "content": str(m.get("content")).replace(result.summary, new)}
                    if isinstance(m.get("content"), str) and result.summary in m["content"]
                    else m for m in result.messages]
        return dataclasses.replace(result, messages=messages, summary=new)
