"""The step function's service: one model/tool cycle of a run per invocation, fenced.

Input (the state machine's payload): ``{"run_id", "generation", "command": null |
{"request_id"}, "failure"?}``. Output (tiny: ids, the next move, the engine status —
never text): ``{"run_id", "generation", "next", "status", "cycle", "command",
"next_execution"}`` with ``next`` one of ``continue | command | rollover | done | blocked
| stale``.

1. Claim: the run's fence (``agentloom.aws.fence``) names the generation that may drive
   it; an older generation's step returns ``stale`` and does nothing.
2. Attach: a warm container keeps the engine of the run it stepped last and reuses it
   while the checkpoint head version has not moved (one head read); otherwise it attaches
   afresh.
3. Step through one cycle (``_cycle``): engine steps up to and including one model call,
   then that call's tool steps, each its own durable commit exactly as when every step had
   an invocation (so a crash or a retry between two steps is what it always was); a
   command, a stopped run, the rollover point or too little time left before the
   function's timeout (``AGENTLOOM_STEP_RESERVE_SECONDS``) ends the invocation early.
   The platform's records (session stream, cursors, usage, the reusable view
   of a completing run) go in the step's own checkpoint commit (``SessionCommits``, as
   in embedded mode); a run that stopped gives its session lease back
   (``RunTracker.stopped``).
4. The next move: ``command`` — the marker is claimed on EFS and the payload carries the
   session's task-definition revision and the RunTask overrides (``SandboxRegistry``); the
   step after the task reads the ``CommandResult`` by request id from the session's
   ``results/`` (a missing one with a marker is an unknown outcome: the run blocks — unless
   the state machine reports that the task never started, ``command.task``: then the
   step writes a ``sandbox_not_started`` result, the command did not run and the run goes
   on); ``rollover`` — after ``rollover_cycles`` commits in one generation the fence moves on
   and the state machine starts the next execution.

A step that finds an operation of its own execution in flight (its invocation died, e.g.
a timeout mid model call; the state machine retried) raises ``OperationInFlight``: the
state machine then records the failure (``failure`` input), and the in-flight operation
is examined in a new execution by the engine's own rules — an unknown outcome blocks the
run with the resolve way out, never leaves it ``running``. A Rollover that gave up (its
StartExecution failed after its retries) reaches RecordFailure too: the fence already
names the next generation, which never started, so the run stands ``interrupted`` (the
``resume`` way out) and the failure is recorded as an event. A step whose commit loses the
head's compare-and-set (a concurrent duplicate) changed nothing and returns ``continue``
(the next step goes on from the committed head).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentloom.aws import fence
from agentloom.aws.platform import AwsPlatform
from agentloom.aws.sandbox import SandboxRegistry
from agentloom.aws.step_input import StepInput, StepInputError
from agentloom.aws.workspaces import EfsWorkspaces
from agentloom.observability import Observer, Relay
from agentloom.platform.agents import snapshot_of
from agentloom.platform.domain import Run
from agentloom.platform.host import scope_of
from agentloom.platform.store import WriteConflict
from agentloom.sandbox.fargate import NOT_STARTED, never_started
from agentloom_runtime.contracts import StepResult
from agentloom_runtime.engine import Engine, RunSummary
from agentloom_runtime.errors import (
    AgentLoomError,
    CheckpointConflict,
    ConfigError,
)
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.workspace import CommandResult, CommandSpec, WorkspaceError

log = logging.getLogger(__name__)
MODEL_STEPS = frozenset({"action", "compaction", "verification"})  # kinds that call the model


class StepFailed(AgentLoomError):
    """A step failed in a way the engine did not classify. Its message — the Lambda
    error the state machine keeps in its history — names only the error's type and code:
    never the original message, which may quote content."""

    code = "step_failed"


class OperationInFlight(AgentLoomError):
    """An operation of this execution is in flight and its step is gone."""

    code = "operation_in_flight"


@dataclass
class _Attached:
    engine: Engine
    workspaces: EfsWorkspaces
    version: int


class StepService:
    def __init__(self, platform: AwsPlatform, sandbox: SandboxRegistry) -> None:
        self.platform = platform
        self.store = platform.store
        self.tracker = platform.tracker
        self.host = platform.host
        self.sandbox = sandbox
        self.rollover_cycles = platform.config.rollover_cycles
        self.reserve_seconds = platform.config.step_reserve_seconds
        self._loop = asyncio.new_event_loop()  # engines (and their HTTP clients) live on it
        self._attached: dict[str, _Attached] = {}
        self._snapshots: dict[tuple[str, int], AgentSnapshot] = {}
        self._runs: dict[str, Run] = {}
        self.attaches = 0  # cold attachments (benchmarks)

    def close(self) -> None:
        """Close the attached engine and the loop (tests; a container just ends)."""
        for run_id in list(self._attached):
            self._loop.run_until_complete(self._drop(run_id))
        self._loop.close()

    # -- the invocation ------------------------------------------------------------------

    def handle(self, event: Mapping[str, Any], *,
               remaining_seconds: float | None = None) -> dict[str, Any]:
        """One invocation; ``remaining_seconds``: the time left before the function's
        timeout (the Lambda context's), None for no deadline."""
        deadline = None if remaining_seconds is None else time.monotonic() + remaining_seconds
        try:
            return self._handle(event, deadline)
        except (StepInputError, OperationInFlight):
            raise
        except Exception as exc:
            code = exc.code if isinstance(exc, AgentLoomError) else "unexpected"
            # the frames, never the message (it may quote a question or a tool's output)
            log.error("step failed: %s (%s)\n%s", type(exc).__name__, code,
                      "".join(traceback.format_tb(exc.__traceback__)))
            raise StepFailed(f"the step failed: {type(exc).__name__} ({code}); see the "
                             "step function's log", details={"code": code}) from None

    def _handle(self, event: Mapping[str, Any], deadline: float | None) -> dict[str, Any]:
        step = StepInput.parse(event)
        run = self._run(step.run_id)
        summary = self.tracker.summary(run.run_id)
        if summary is None:
            raise StepInputError(f"run {run.run_id} was never started",
                                 details={"run_id": run.run_id})
        claimed = fence.claim(self.store, run.run_id, step.generation, summary.version,
                              cluster=self.sandbox.config.cluster)
        if claimed is None:
            return self._unclaimed(step, summary)
        if step.failure is not None:
            return self._loop.run_until_complete(self._record_failure(step, run, summary))
        return self._loop.run_until_complete(self._step(step, run, summary, claimed, deadline))

    def _unclaimed(self, step: StepInput, summary: RunSummary) -> dict[str, Any]:
        """Stale — unless this generation's rollover reply was lost (a retried step)."""
        found = fence.read(self.store, step.run_id)
        if found is not None and fence.rollover_pending(found.value, step.generation):
            if step.failure is not None:  # the Rollover state gave up on StartExecution
                self._failure_event(step, during="rollover")
                return self._reply(step, "stale", summary.status, 0)
            following = found.value.generation
            return self._reply(step, "rollover", summary.status, 0, next_execution={
                "name": fence.execution_name(step.run_id, following),
                "generation": following})
        return self._reply(step, "stale", summary.status, 0)

    def _reply(self, step: StepInput, next_: str, status: str, cycle: int, *,
               command: dict[str, Any] | None = None,
               next_execution: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"run_id": step.run_id, "generation": step.generation, "next": next_,
                "status": status, "cycle": cycle, "command": command,
                "next_execution": next_execution}

    def _run(self, run_id: str) -> Run:
        """The run's record; what a step reads of it (ids, agent version) never changes,
        so a warm container reads it once (its status is the checkpoint head's)."""
        run = self._runs.get(run_id)
        if run is None:
            found = self.store.runs.find(run_id)
            if found is None:
                raise StepInputError(f"run {run_id} does not exist",
                                     details={"run_id": run_id})
            run = self._runs[run_id] = found.value
            while len(self._runs) > 64:
                self._runs.pop(next(iter(self._runs)))
        return run

    def _snapshot(self, run: Run) -> AgentSnapshot:
        key = (run.agent_id, run.version)
        if key not in self._snapshots:
            version = self.store.agents.version(run.agent_id, run.version)
            if version is None:
                raise StepInputError(f"agent {run.agent_id} has no version {run.version}")
            self._snapshots[key] = snapshot_of(version.snapshot)
        return self._snapshots[key]

    async def _attach(self, run: Run, version: int) -> _Attached:
        """The warm engine when the head has not moved since it last committed."""
        warm = self._attached.get(run.run_id)
        if warm is not None and warm.version == version and warm.engine.status == "running":
            return warm
        for other in list(self._attached):
            await self._drop(other)
        engine, workspaces = self.host.engine(scope_of(run), self._snapshot(run), attach=True)
        assert isinstance(workspaces, EfsWorkspaces)  # aws_host's
        self.attaches += 1
        if self.tracker.commits is not None:  # its completing commit saves the view
            self.tracker.commits.watch(run.run_id, view=engine.main_view)
        attached = _Attached(engine, workspaces, engine.version)
        self._attached[run.run_id] = attached
        return attached

    async def _drop(self, run_id: str) -> None:
        gone = self._attached.pop(run_id, None)
        if self.tracker.commits is not None:
            self.tracker.commits.unwatch(run_id)
        if gone is not None:
            with contextlib.suppress(Exception):
                await gone.engine.close()

    # -- one step ------------------------------------------------------------------------

    async def _step(self, step: StepInput, run: Run, summary: RunSummary,
                    claimed: fence.Fence, deadline: float | None) -> dict[str, Any]:
        if summary.status != "running":
            self._finish(run)
            return self._reply(step, _ended(summary.status), summary.status, 0)
        attached = await self._attach(run, summary.version)
        engine = attached.engine
        self._clear_markers(attached)
        if step.request_id is None:
            self._undispatch(attached, step.generation)
        else:
            self._task_ended(attached, step)
        relay = Relay.of(engine) or Relay()
        try:
            with relay.observing(run_id=run.run_id, session_id=run.session_id,
                                 space_id=run.space_id, snapshot=self._snapshot(run),
                                 host="lambda", generation=step.generation) as observer:
                result = await self._cycle(attached, observer, claimed, deadline)
        except CheckpointConflict:
            await self._drop(run.run_id)
            return self._conflict(step, run, summary)
        cycle = engine.version - claimed.start_version
        if result.next == "done":
            await self._drop(run.run_id)
            self._finish(run)
            return self._reply(step, _ended(result.status), result.status, cycle)
        if result.next == "command":
            return self._reply(step, "command", result.status, cycle,
                               command=self._dispatch(attached, result, step.generation))
        if cycle >= self.rollover_cycles:
            try:
                generation = fence.advance(self.store, run.run_id, expect=step.generation)
            except WriteConflict:
                return self._reply(step, "stale", result.status, cycle)
            await self._drop(run.run_id)
            return self._reply(step, "rollover", result.status, cycle, next_execution={
                "name": fence.execution_name(run.run_id, generation),
                "generation": generation})
        return self._reply(step, "continue", result.status, cycle)

    async def _cycle(self, attached: _Attached, observer: Observer, claimed: fence.Fence,
                     deadline: float | None) -> StepResult:
        """Engine steps until one model/tool cycle is committed: the steps before and
        including one model call, then that call's tool steps (a command hands over to
        the sandbox task); each step is its own durable commit, as if each had its own
        invocation. Another step starts only with ``reserve_seconds`` left before the
        invocation's deadline, and never past the execution's rollover point."""
        engine = attached.engine
        called_model = False
        while True:
            with observer.step(engine) as scope:
                result = scope.finished(await engine.step())
            attached.version = engine.version
            called_model = called_model or result.kind in MODEL_STEPS
            if result.kind == "command":  # a result recorded: its marker is over
                self._clear_markers(attached)
            if result.next != "continue" or (called_model and not result.tools_next) or \
                    engine.version - claimed.start_version >= self.rollover_cycles or \
                    (deadline is not None and deadline - time.monotonic() < self.reserve_seconds):
                return result

    def _conflict(self, step: StepInput, run: Run, before: RunSummary) -> dict[str, Any]:
        now = self.tracker.summary(run.run_id)
        if now is None or now.status != "running":  # cancelled or stopped meanwhile
            self._finish(run)
            status = now.status if now else "unknown"
            return self._reply(step, _ended(status), status, 0)
        if now.version != before.version:
            return self._reply(step, "continue", now.status, 0)  # another step committed
        raise OperationInFlight(
            f"run {run.run_id}: a {now.in_flight or 'step'} operation of this execution is "
            "in flight and the step that started it is gone; the failure is recorded and "
            "the operation examined in a new execution", details={"run_id": run.run_id})

    def _finish(self, run: Run) -> None:
        """The run stopped: its status recorded and the session lease given back with it
        (the records went with each commit; ``sync`` catches up after a crash between)."""
        self.tracker.sync(run.session_id, runs=[run.run_id])
        self.tracker.stopped(run.session_id, run.run_id)

    # -- commands ------------------------------------------------------------------------

    def _dispatch(self, attached: _Attached, result: StepResult,
                  generation: int) -> dict[str, Any]:
        spec = CommandSpec.from_dict(attached.engine.command_spec())
        markers = attached.workspaces.commands
        try:
            markers.claim(spec.request_id, {"state": "dispatched", "runner": "fargate",
                                            "generation": generation,
                                            "started_at": time.time()})
        except WorkspaceError as err:
            # this request's own marker: a retried step (the task was not started: the
            # state machine starts it only after this step returned)
            if spec.request_id not in err.details.get("request_ids", []):
                raise
        instance = attached.workspaces.instance(result.instance)
        return self.sandbox.command(attached.workspaces, spec, str(instance.root))

    def _undispatch(self, attached: _Attached, generation: int) -> None:
        """A step of this generation without a request id while a command waits: the
        state machine never reached RunCommand after that dispatch (the dispatching step
        was retried), so its marker holds no task and the command is dispatched again."""
        try:
            waiting = str(attached.engine.command_spec()["request_id"])
        except ConfigError:
            return
        markers = attached.workspaces.commands
        marker = next((m for m in markers.pending() if m.get("request_id") == waiting), None)
        if marker is not None and marker.get("state") == "dispatched" and \
                marker.get("generation") == generation and \
                not (markers.results / f"{waiting}.json").exists():
            markers.remove(waiting)

    def _task_ended(self, attached: _Attached, step: StepInput) -> None:
        """The sandbox task of the waiting command ended with an error. One that never
        started (``never_started``) gets a ``sandbox_not_started`` result: the engine
        records the command as failed, not run, and the run goes on (the model reads
        why). One that started and failed is only logged: its result file, when it
        wrote one, says what happened; without one the outcome is unknown."""
        task = step.command.task if step.command is not None else None
        if task is None or not task.Error or step.request_id is None:
            return
        request_id = step.request_id
        reason = never_started(task.Error, task.Cause)
        if reason is None:
            log.warning("run %s: the sandbox task of command %s failed (%s)", step.run_id,
                        request_id, task.Error[:120])
            return
        try:
            waiting = attached.engine.command_spec()["request_id"]
        except ConfigError:
            return
        markers = attached.workspaces.commands
        if waiting != request_id or markers.read_result(request_id) is not None or \
                not any(m.get("request_id") == request_id for m in markers.pending()):
            return  # another command's, or its task wrote a result after all
        log.warning("run %s: the sandbox task of command %s never started (%s)",
                    step.run_id, request_id, reason)
        markers.write_result(CommandResult(
            request_id=request_id, exit_code=None, error=NOT_STARTED,
            stderr_head=f"the sandbox task did not start, so the command did not run: "
                        f"{reason}"))

    def _clear_markers(self, attached: _Attached) -> None:
        """Markers whose task is over: a result was written and the engine no longer
        waits for it (recorded), so file tools and new commands are not refused; the
        result file goes with the marker (the run's commit holds it)."""
        try:
            waiting: str | None = attached.engine.command_spec()["request_id"]
        except ConfigError:
            waiting = None
        markers = attached.workspaces.commands
        for marker in markers.pending():
            request_id = str(marker.get("request_id", ""))
            if request_id and request_id != waiting and \
                    (markers.results / f"{request_id}.json").exists():
                markers.remove(request_id)
                markers.forget(request_id)  # its commit holds the output

    # -- a failed step (RecordFailure) ---------------------------------------------------

    async def _record_failure(self, step: StepInput, run: Run,
                              summary: RunSummary) -> dict[str, Any]:
        """The state machine gave up on a step. An operation in flight is examined in a
        new execution (an unknown outcome blocks with the resolve way out); without one
        the run is left to resume (interrupted), the error code recorded as an event."""
        await self._drop(run.run_id)
        self._failure_event(step, during="step")
        status = summary.status
        if status == "running" and summary.in_flight is not None:
            engine, _ = self.host.engine(scope_of(run), self._snapshot(run), attach=True)
            try:
                await engine.begin_execution()
                await engine.step()
                status = engine.status
            except AgentLoomError as err:
                log.warning("run %s: recording the failure: %s", run.run_id, err.code)
            finally:
                await engine.close()
        self._finish(run)
        after = self.tracker.summary(run.run_id)
        status = after.status if after else status
        return self._reply(step, _ended(status), status, 0)


    def _failure_event(self, step: StepInput, *, during: str) -> None:
        error = str((step.failure or {}).get("Error", "States.TaskFailed"))[:200]
        self.tracker.event(step.run_id, "run.step_failed", {
            "run_id": step.run_id, "generation": step.generation, "code": error,
            "during": during})


def _ended(status: str) -> str:
    return "blocked" if status == "blocked" else "done"

