"""Tool steps: one tool call per step, delegation to child frames, and commands.

A side-effecting call is saved as ``started`` before its handler runs; a crash leaves an
operation of unknown outcome that is never re-run unless the tool declares
``resume_inflight``. ``workspace_command`` never runs inside a step: the step saves the
command spec and returns ``next=command``; a CommandRunner executes it and the next step
records the outcome.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from agentloom_runtime.contracts import (
    StepKind,
    StepNext,
    ToolOutcome,
    ToolRequest,
    ToolStatus,
)
from agentloom_runtime.errors import ConfigError, ToolOutcomeUnknown
from agentloom_runtime.tool_contracts import ToolContext
from agentloom_runtime.tools import RawResult, failure_outcome

from .core import BlockRun
from .frames import FramePlan, add_evidence, frame_view, new_frame
from .model_steps import ModelSteps
from .results import ResultReader, cap_with_reference, render


def _failure(code: str, message: str) -> ToolOutcome:
    return ToolOutcome(value={"error": {"code": code, "message": message}}, status="error",
                       error_code=code)


class ToolSteps(ModelSteps):
    def _request(self, frame: dict[str, Any], call: dict[str, Any],
                 uncertain: bool = False) -> ToolRequest:
        return ToolRequest(call_id=call["call_id"], name=call["name"],
                           arguments=call["arguments"], uncertain=uncertain,
                           request_id=call["request_id"], instance=frame["instance"])

    def _authorize(self, frame: dict[str, Any], definition: Any) -> str | None:
        if not self.tool_allowed(frame, definition.name):
            return f"{definition.name} is not available to {frame['instance']}"
        result: str | None = self.modules.strategy.authorize_tool(frame_view(frame),
                                                                  definition)
        return result

    def tool_context(self, frame: dict[str, Any], call: Mapping[str, Any],
                     uncertain: bool = False) -> ToolContext:
        workspace = self.workspace(frame["instance"]) if self.workspace else None
        return ToolContext(
            config=self.tools.config, instance=frame["instance"],
            run_id=self.run_id, call_id=call["call_id"], request_id=call["request_id"],
            uncertain=uncertain, emit=self.emit, plan=FramePlan(frame), workspace=workspace,
            services={**self.services,
                      "results": ResultReader(self._journal(), frame["instance"])})

    async def _tool_step(self, frame: dict[str, Any], call: dict[str, Any],
                         uncertain: bool = False) -> tuple[StepKind, StepNext]:
        j = self._journal()
        prepared = await self._prepare_call(frame, call, uncertain)
        if isinstance(prepared, ToolOutcome):
            self.record_tool(frame, call, prepared)
            j.commit()
            return "tool", "continue"
        definition = prepared.definition
        if definition.execution == "delegate":
            await self._delegate(frame, call, prepared.arguments)
            j.commit()
            return "tool", "continue"
        self.emit("tool.started", {"run_id": j.run_id, "request_id": call["request_id"],
                                   "instance": frame["instance"], "name": call["name"],
                                   "arguments": prepared.arguments})
        if definition.execution == "command":
            return await self._dispatch_command(frame, call, prepared)
        if not definition.resume_inflight:
            j.head["op"] = {"id": f"t:{call['request_id']}", "kind": "tool",
                            "phase": "started", "execution": j.head["execution"],
                            "request_id": call["request_id"],
                            "instance": frame["instance"], "attempts": 1,
                            "arguments": prepared.arguments}
            j.commit()
        raw = await self.tools.invoke(prepared, self.tool_context(frame, call, uncertain))
        await self._finish_tool(frame, call, prepared, raw)
        return "tool", "continue"

    async def _prepare_call(self, frame: dict[str, Any], call: dict[str, Any],
                            uncertain: bool) -> Any:
        """Parse, resolve, validate and admit; then tool.before (which may only change the
        arguments, revalidated, or reject)."""
        def authorize(d: Any) -> str | None:
            return self._authorize(frame, d)

        prepared = self.tools.prepare(self._request(frame, call, uncertain), authorize=authorize)
        inst = frame["instance"]
        if isinstance(prepared, ToolOutcome) or not self.has_hooks(
                "tool.before", inst, tool=call["name"]):
            return prepared
        payload = {"call_id": call["call_id"], "request_id": call["request_id"],
                   "name": call["name"], "arguments": prepared.arguments, "instance": inst,
                   "uncertain": uncertain}
        payload, rejected = await self.run_stage("tool.before", payload, instance=inst,
                                                 key=f"tool:{call['request_id']}",
                                                 tool=call["name"])
        if rejected is not None:
            return failure_outcome("tool_rejected_by_hook", rejected.reason, status="rejected")
        if payload["arguments"] != prepared.arguments:
            return self.tools.revalidate(prepared, payload["arguments"], authorize=authorize)
        return prepared

    async def _finish_tool(self, frame: dict[str, Any], call: dict[str, Any], prepared: Any,
                           raw: Any, *, status: ToolStatus | None = None) -> None:
        """Save the raw result before tool.after runs; record the outcome; commit."""
        j = self._journal()
        inst = frame["instance"]
        outcome = self.tools.outcome(prepared, raw)
        if status is not None:
            outcome = dataclasses.replace(outcome, status=status)
        if raw.ok:  # a result over the cap keeps a reference to its full text
            ref = f"{inst}#{j.last_seq(f'src:{inst}') + 1}"
            outcome = dataclasses.replace(outcome, value=cap_with_reference(
                render(raw.value), self.tools.max_visible_chars, ref))
        if self.has_hooks("tool.after", inst, tool=call["name"]):
            op = j.head.get("op") or {"id": f"t:{call['request_id']}", "kind": "tool",
                                      "execution": j.head["execution"],
                                      "request_id": call["request_id"], "instance": inst,
                                      "attempts": 1, "arguments": prepared.arguments}
            if op.get("phase") != "raw_saved":
                op.update(phase="raw_saved", raw=j.store_value(raw.to_dict()))
                j.head["op"] = op
                j.commit()
            payload = {"call_id": call["call_id"], "request_id": call["request_id"],
                       "name": call["name"], "instance": inst, "status": outcome.status,
                       "value": outcome.value, "arguments": prepared.arguments,
                       "evidence_arguments": dict(outcome.evidence_arguments),
                       "error_code": outcome.error_code, "annotations": {}}
            payload, _ = await self.run_stage("tool.after", payload, instance=inst,
                                              key=f"tool-after:{call['request_id']}",
                                              tool=call["name"])
            outcome = dataclasses.replace(outcome, value=payload["value"])
        self.record_tool(frame, call, outcome, raw.to_dict())
        j.head["op"] = None
        j.commit()
        await self.observe("operation.finally", {
            "operation_id": f"t:{call['request_id']}", "kind": "tool", "instance": inst,
            "status": outcome.status}, instance=inst, tool=call["name"])

    def record_tool(self, frame: dict[str, Any], call: dict[str, Any], outcome: ToolOutcome,
                    raw: Any = None) -> None:
        """Source record keeps the full raw result (a blob when large); the view shows the
        capped, model-visible value. The caller commits."""
        j = self._journal()
        content = outcome.value if isinstance(outcome.value, str) else json.dumps(
            outcome.value, ensure_ascii=False)
        message = {"role": "tool", "tool_call_id": call["call_id"], "content": content}
        extra: dict[str, Any] = {"request_id": call["request_id"], "name": call["name"],
                                 "status": outcome.status}
        if raw is not None:
            extra["raw"] = j.store_value(raw)
        self.context.append(j, frame, "tool_result", message, extra=extra)
        add_evidence(frame, call["name"], outcome)
        call["state"] = "done"
        if all(c["state"] == "done" for c in frame["pending"]):
            frame["pending"] = []
        self.emit("tool.completed", {"run_id": j.run_id, "request_id": call["request_id"],
                                     "instance": frame["instance"], "name": call["name"],
                                     "status": outcome.status, "result": content})

    async def _resume_tool(self, op: dict[str, Any]) -> tuple[StepKind, StepNext]:
        frame = self.head["frames"][op["instance"]]
        call = next(c for c in frame["pending"] if c["request_id"] == op["request_id"])
        if op["phase"] == "raw_saved":  # the handler ran and its result is saved
            prepared = self.tools.prepare(self._request(frame, call, True))
            if isinstance(prepared, ToolOutcome):
                raise ConfigError("a saved tool call no longer resolves")
            prepared = dataclasses.replace(prepared, arguments=op["arguments"])
            raw = RawResult.from_dict(self._journal().load_value(op["raw"]))
            await self._finish_tool(frame, call, prepared, raw)
            return "tool", "continue"
        definition = self.tools.registry.resolve(call["name"])
        if not definition.resume_inflight:
            raise BlockRun(ToolOutcomeUnknown(
                f"tool call {call['name']} ({op['request_id']}) may have run before the "
                "interruption; its outcome is unknown and it is not re-run automatically",
                details={"request_id": op["request_id"], "tool": call["name"]}))
        self.head["op"] = None
        return await self._tool_step(frame, call, uncertain=True)

    # -- delegation -----------------------------------------------------------------------

    async def _delegate(self, frame: dict[str, Any], call: dict[str, Any],
                        arguments: Mapping[str, Any]) -> None:
        head = self.head
        template = next((t for t in self.snapshot.subagents
                         if t.id == arguments.get("subagent_id")), None)
        failure = None
        if frame["parent"] is not None:
            failure = _failure("delegation_nested", "a sub-agent cannot delegate")
        elif template is None:
            failure = _failure("subagent_not_found",
                               f"no sub-agent template {arguments.get('subagent_id')!r}")
        elif head["delegations"] >= self.limits.max_children:
            failure = _failure("delegation_limit", f"this run already created "
                               f"{self.limits.max_children} sub-agents")
        instance = f"sub-{head['delegations'] + 1}"
        if failure is None and template is not None and self.has_hooks(
                "subagent.before", frame["instance"]):
            payload = {"instance": instance, "parent_instance": frame["instance"],
                       "subagent_id": template.id, "task": str(arguments["task"]),
                       "run_id": self.run_id}
            _, rejected = await self.run_stage("subagent.before", payload,
                                               instance=frame["instance"],
                                               key=f"subagent:{call['request_id']}")
            if rejected is not None:
                failure = failure_outcome("subagent_rejected_by_hook", rejected.reason,
                                          status="rejected")
        if failure is not None or template is None:
            self.record_tool(frame, call, failure or _failure("delegation_failed", ""))
            return
        head["delegations"] += 1
        child = new_frame(instance, str(arguments["task"]), template=template.id,
                          tools=list(template.tools),
                          parent={"instance": frame["instance"],
                                  "request_id": call["request_id"]})
        head["frames"][instance] = child
        head["stack"].append(instance)
        prompt = f"{template.prompt}\n\nYour duty: {template.duty}".strip()
        self.context.create(self._journal(), child, system=self._system_prompt(child, prompt),
                            history=(), task=child["task"])
        call["state"] = "delegated"
        call["child"] = instance
        self.emit("subagent.started", {"run_id": self.run_id, "instance": instance,
                                       "template": template.id})

    def close_delegation(self, child: dict[str, Any]) -> None:
        parent = self.head["frames"][child["parent"]["instance"]]
        call = next(c for c in parent["pending"]
                    if c["request_id"] == child["parent"]["request_id"])
        result = {"subagent": child["template"], "instance": child["instance"],
                  **child["outcome"]}
        status: ToolStatus = "ok" if child["outcome"]["status"] == "completed" else "error"
        self.record_tool(parent, call, ToolOutcome(value=result, status=status,
                                                   raw_value=result, has_raw_value=True))

    # -- commands -------------------------------------------------------------------------

    async def _dispatch_command(self, frame: dict[str, Any], call: dict[str, Any],
                                prepared: Any) -> tuple[StepKind, StepNext]:
        j = self._journal()
        raw = await self.tools.invoke(prepared, self.tool_context(frame, call))
        if not raw.ok:
            self.record_tool(frame, call, self.tools.outcome(prepared, raw), raw.to_dict())
            j.commit()
            return "tool", "continue"
        j.head["op"] = {"id": f"c:{call['request_id']}", "kind": "command",
                        "phase": "dispatched", "request_id": call["request_id"],
                        "instance": frame["instance"], "spec": raw.value, "attempts": 1}
        j.commit()
        return "command", "command"

    def command_spec(self) -> dict[str, Any]:
        op = self.head.get("op")
        if not op or op["kind"] != "command":
            raise ConfigError("no command is waiting to run")
        spec: dict[str, Any] = op["spec"]
        return spec

    async def _resume_command(self, op: dict[str, Any], result: Any
                              ) -> tuple[StepKind, StepNext]:
        if result is None and self.commands is not None:
            state, result = self.commands.lookup(op["request_id"])
            if result is None and state != "absent":
                raise BlockRun(ToolOutcomeUnknown(
                    f"command {op['request_id']} started but its result is unknown; inspect "
                    "the workspace and resolve the marker before continuing",
                    details={"request_id": op["request_id"]}))
        if result is None:
            return "command", "command"  # never started: the runner may run it
        frame = self.head["frames"][op["instance"]]
        call = next(c for c in frame["pending"] if c["request_id"] == op["request_id"])
        prepared = self.tools.prepare(self._request(frame, call, True))
        if isinstance(prepared, ToolOutcome):
            raise ConfigError("a dispatched command no longer resolves in the catalog")
        value = dict(result)
        failed = (value.get("exit_code") != 0 or bool(value.get("timed_out"))
                  or bool(value.get("error")))
        self.head["op"] = None
        await self._finish_tool(frame, call, prepared, RawResult(ok=True, value=value),
                                status="error" if failed else "ok")
        return "command", "continue"
