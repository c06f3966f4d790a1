"""The Engine: a durable step machine (seed 002 §6, §14; ARCHITECTURE §4).

``await engine.step()`` performs exactly one durable cycle of the active frame — one model
call (action, compaction or completion review) or one tool call — in this order:

1. an operation left in flight by a crash is resumed by the rules of seed 002 §14;
2. the next call of the frame's pending tool group runs;
3. queued supplements are injected at this safe boundary;
4. a candidate answer goes to the completion review;
5. the context is prepared and compacted when the policy triggers;
6. the action model call; tool calls open a pending group, an answer becomes a candidate.

Every change is committed through the ``Journal`` with compare-and-set on the head
version, so a duplicate or stale step raises ``CheckpointConflict`` and changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from agentloom_runtime.contracts import Message, RunStatus, StepKind, StepNext, StepResult
from agentloom_runtime.errors import (
    AgentLoomError,
    BudgetExceeded,
    CheckpointConflict,
    ConfigError,
    PersistenceError,
    RunError,
)

from .core import BlockRun, Emit, EngineCore
from .frames import new_frame
from .hook_stages import HookRejected, in_flight
from .inbox import post_input, pull_inputs
from .journal import Journal
from .modules import bindings_hash, compare_bindings
from .tool_steps import ToolSteps

FORMAT = 1
__all__ = ["BlockRun", "Emit", "Engine", "EngineCore"]


class Engine(ToolSteps):
    """Assembled by ``create_engine``; one object per run attachment."""

    # -- attach ---------------------------------------------------------------------------

    async def start(self, task: str, *, run_id: str | None = None,
                    history: Sequence[Message] = (), counters: Mapping[str, int] | None = None,
                    history_watermark: int = 0,
                    labels: Mapping[str, str] | None = None) -> str:
        """Create a run (version 1): meta record, main frame, first records. ``history``
        is the session history the run inherits (up to ``history_watermark``)."""
        if not task.strip():
            raise ConfigError("the task is empty")
        run_id = run_id or uuid.uuid4().hex
        head: dict[str, Any] = {
            "format": FORMAT, "run_id": run_id, "status": "running", "error": None,
            "bindings": bindings_hash(self.bindings), "execution": 1, "calls": 0,
            "total_calls": 0, "exec_options": {}, "delegations": 0, "stack": ["main"],
            "frames": {}, "streams": {}, "op": None, "step_ops": [], "next_request": 0,
            "labels": dict(labels or {}),
        }
        self.j = Journal(self.store, run_id, 0, head)
        self.j.append("meta", {"snapshot": self._snapshot_data(), "bindings": self.bindings})
        frame = new_frame("main", task)
        head["frames"]["main"] = frame
        self.context.create(self.j, frame, system=self._system_prompt(frame), history=history,
                            task=task, counters=dict(counters or {}),
                            history_watermark=history_watermark)
        self.j.commit()
        self.emit("run.started", {"run_id": run_id, "task": task})
        return run_id

    def attach(self, run_id: str) -> None:
        """Load an existing run; refuse if its bindings differ from this engine's."""
        loaded = self.store.load_head(run_id)
        if loaded is None:
            raise ConfigError(f"run {run_id} does not exist")
        head = loaded.body
        if head.get("format") != FORMAT:
            raise ConfigError(f"run {run_id} has checkpoint format {head.get('format')}; "
                              f"this runtime reads format {FORMAT}")
        self.j = Journal(self.store, run_id, loaded.version, head)
        if head["bindings"] != bindings_hash(self.bindings):
            saved = self.j.read("meta", 0, 1)[0].body["bindings"]
            compare_bindings(saved, self.bindings)

    async def begin_execution(self, *, retry_unknown_models: bool = False,
                              confirm_hooks: bool = False) -> None:
        """A new execution (resume): a fresh call budget; history and totals are kept.
        A blocked run becomes running again; its in-flight operation is re-examined."""
        j = self._journal()
        head = j.head
        if head["status"] in ("completed", "cancelled"):
            raise ConfigError(f"run {j.run_id} is {head['status']}; it cannot be resumed")
        head["execution"] += 1
        head["calls"] = 0
        head["exec_options"] = {"retry_unknown_models": retry_unknown_models,
                                "confirm_hooks": confirm_hooks}
        head["status"], head["error"] = "running", None
        for inst in head["stack"]:
            head["frames"][inst]["status"] = "running"
        j.commit()
        self.emit("run.resumed", {"run_id": j.run_id, "execution": head["execution"]})

    def queue_input(self, text: str) -> int:
        """A supplement for the running task (see ``inbox``): safe while a step runs, even
        in another process; injected at the next safe boundary."""
        return post_input(self.store, self._journal().run_id, text)

    def _pull_inbox(self) -> None:
        """Move new supplements into the main frame's durable queue (committed with this
        step's next commit; a crash before it simply pulls them again)."""
        head = self.head
        for seq, text in pull_inputs(self.store, head["run_id"], head.get("inbox_seen", 0)):
            self.context.queue_input(head["frames"]["main"], text)
            head["inbox_seen"] = seq

    async def cancel(self, reason: str = "cancelled") -> None:
        j = self._journal()
        j.head["status"] = "cancelled"
        j.head["error"] = {"code": "run_cancelled", "message": reason}
        j.commit()
        self.emit("run.cancelled", {"run_id": j.run_id})

    # -- the step -------------------------------------------------------------------------

    async def step(self, *, command_result: Mapping[str, Any] | None = None) -> StepResult:
        if self._closed:
            raise ConfigError("the engine is closed")
        j = self._journal()
        if j.stale:
            raise CheckpointConflict("this engine's state is stale after a failed save; "
                                     "load the run again", details={"run_id": j.run_id})
        if j.head["status"] != "running":
            return self._result("done", "none")
        self._active = asyncio.current_task()
        try:
            kind, next_ = await self._advance(command_result)
        except BlockRun as block:
            await self._stop(block.error, block.status)
            return self._result("done", "none", block.error.code)
        except PersistenceError:
            raise
        except RunError as err:
            await self._stop(err, "blocked")
            return self._result("done", "none", err.code)
        finally:
            self._active = None
        if j.head["status"] != "running":
            return self._result("done", kind)
        request_id = j.head["op"]["request_id"] if next_ == "command" else None
        return self._result(next_, kind, request_id=request_id)

    async def _advance(self, command_result: Mapping[str, Any] | None, *,
                       resuming: bool = False) -> tuple[StepKind, StepNext]:
        head = self.head
        op = head.get("op")
        if op and not resuming:
            if op["kind"] != "command":  # a dispatched command is the next step's to record
                in_flight(head, op, f"operation {op['id']}")
            return await self._resume_operation(op, command_result)
        if head.get("closing"):
            await self._close_step(head["frames"][head["closing"]])
            return "none", "continue"
        if not head.get("run_checked"):
            await self._run_before()
        self._pull_inbox()
        frame = self.active_frame()
        call = next((c for c in frame["pending"] if c["state"] == "queued"), None)
        if call is not None:
            return await self._tool_step(frame, call)
        if frame.get("inputs") and not head.get("op") and self.context.drain_inputs(
                self._journal(), frame):
            frame["candidate"] = None  # the model answers again, with the supplement in view
            self._journal().commit()
            return "input", "continue"
        if frame["candidate"] is not None:
            await self._review_step(frame)
            return "verification", "continue"
        if frame["iterations"] >= self.limits.max_iterations:
            raise BlockRun(BudgetExceeded(
                f"instance {frame['instance']} reached {self.limits.max_iterations} "
                "action iterations", details={"instance": frame["instance"]}))
        if await self._maybe_compact(frame):
            return "compaction", "continue"
        await self._action_step(frame)
        return "action", "continue"

    async def _run_before(self) -> None:
        """run.before: observe or reject the run, once, before its first action."""
        head = self.head
        main = head["frames"]["main"]
        if self.has_hooks("run.before", "main"):
            payload = {"run_id": head["run_id"], "instance": "main", "task": main["task"],
                       "mode": self.snapshot.mode}
            _, rejected = await self.run_stage("run.before", payload, instance="main",
                                               key="run.before")
            if rejected is not None:
                raise BlockRun(HookRejected(f"run.before hook {rejected.hook_id} rejected "
                                            f"the run: {rejected.reason}"))
        head["run_checked"] = True

    async def _close_step(self, frame: dict[str, Any]) -> None:
        """run.after / subagent.after for a finished frame: only annotations change."""
        point = self.after_point(frame)
        if point is not None:
            outcome = frame["outcome"]
            payload = {"run_id": self.run_id, "instance": frame["instance"],
                       "task": frame["task"], "status": outcome["status"],
                       "result": outcome["answer"], "annotations": {}}
            if frame["parent"] is not None:
                payload.update(parent_instance=frame["parent"]["instance"],
                               subagent_id=frame["template"])
            payload, _ = await self.run_stage(point, payload, instance=frame["instance"],
                                              key=f"close:{frame['instance']}")
            outcome["annotations"] = payload.get("annotations") or {}
        self.head.pop("closing", None)
        self.complete_close(frame)
        self._journal().commit()

    async def _stop(self, error: AgentLoomError, status: RunStatus) -> None:
        """Record a stopped run. A save failure here propagates: nothing is pretended.
        operation.error hooks observe the error; they can never replace it."""
        j = self._journal()
        if j.stale:
            raise PersistenceError("cannot record the stop of a stale run",
                                   details={"run_id": j.run_id}) from error
        op = j.head.get("op") or {}
        instance = j.head["stack"][-1]
        await self.observe("operation.error", {
            "operation_id": op.get("id", f"step:{j.version}"), "kind": op.get("kind", "step"),
            "instance": instance, "error": {"type": type(error).__name__, "code": error.code,
                                            "message": error.message}}, instance=instance)
        j.head["status"] = status
        j.head["error"] = {"code": error.code, "message": error.message,
                           "type": type(error).__name__}
        for inst in j.head["stack"]:
            j.head["frames"][inst]["status"] = status
        j.commit()
        self.emit("run.stopped", {"run_id": j.run_id, "status": status, "code": error.code,
                                  "message": error.message})

    def _result(self, next_: StepNext, kind: StepKind, error_code: str | None = None,
                request_id: str | None = None) -> StepResult:
        head = self.head
        status: RunStatus = head["status"]
        if error_code is None and head.get("error"):
            error_code = head["error"].get("code")
        return StepResult(run_id=head["run_id"], next=next_, status=status,
                          instance=head["stack"][-1], kind=kind, version=self.version,
                          request_id=request_id, error_code=error_code)

    # -- close ----------------------------------------------------------------------------

    async def close(self) -> None:
        """Seed 002 §4: stop accepting work, close the tool bus, then the modules in
        order, each object once."""
        if self._closed:
            return
        self._closed = True
        active = self._active
        if active is not None and active is not asyncio.current_task() and not active.done():
            active.cancel()  # a step in flight: cancel it and wait for its cleanup
            with contextlib.suppress(asyncio.CancelledError):
                await active
        await self.tools.aclose()
        for module in self.modules.close_order():
            closer = getattr(module, "aclose", None)
            if closer is not None:
                await closer()
