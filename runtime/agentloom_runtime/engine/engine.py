"""The Engine: a durable step machine (docs/contract.md#loop-order).

Lifecycle, as a host drives it::

    engine = create_engine(snapshot, save=store, ...)     # or checkpoint=run_id to attach
    run_id = await engine.start(task)                      # or: await engine.begin_execution()
    while True:
        result = await engine.step(command_result=outcome)   # exactly one durable cycle
        if result.next == "done":     break                  # see engine.status / outcome()
        if result.next == "command":  outcome = await runner.run(engine.command_spec())
    await engine.close()

One ``step()`` is one model call (action, compaction or completion review) or one tool
call, committed with compare-and-set on the head version: a duplicate or stale step
raises ``CheckpointConflict`` and changes nothing. The dispatch reads in the loop order;
each unit (``_action``, ``_review``, ``_compaction``, ``_tools``, ``_delegation``,
``_commands``, ``_closing``) gets one ``StepContext`` and ends with one named commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentloom_runtime.checkpoint.journal import Journal
from agentloom_runtime.checkpoint.store import BaseCheckpointStore
from agentloom_runtime.contracts import (
    JSON,
    Message,
    PendingToolCall,
    RunOutcome,
    RunStatus,
    StepKind,
    StepNext,
    StepResult,
    UnknownOperation,
    Verdict,
)
from agentloom_runtime.errors import (
    AgentLoomError,
    BudgetExceeded,
    CheckpointConflict,
    ConfigError,
    PersistenceError,
    RunError,
)
from agentloom_runtime.events import Emit
from agentloom_runtime.tools import PreparedCall, ToolRuntime

from . import _resolve
from ._action import action_step, visible_schemas
from ._closing import after_stage, close_frame, finish_delegation
from ._commands import dispatch_command, find_command_result, record_command
from ._compaction import compaction_step
from ._context import BlockRun, HostPorts, StepContext, in_flight
from ._delegation import open_delegation
from ._frames import answer_text, call_arguments, keep_task, task_text
from ._hooks import HookRejected, HookRunner
from ._inbox import post_input, pull_inbox
from ._model_call import ModelCaller, RunUsage, run_usage
from ._modules import RuntimeModules, Verifier, bindings_hash, verify_bindings
from ._review import review_step
from ._state import (
    FORMAT,
    Frame,
    MainView,
    PendingCall,
    Progress,
    error_info,
    mark_stopped,
    new_frame,
    new_head,
)
from ._tools import prepare_call, record_tool, resume_tool, run_inline

if TYPE_CHECKING:  # pydantic stays off the engine's import path
    from agentloom_runtime.snapshot import AgentSnapshot


class Engine:
    """One run attachment, assembled by ``create_engine``. Public surface: the lifecycle
    (``start``, ``attach``, ``begin_execution``, ``step``, ``command_spec``,
    ``queue_input``, ``resolve``, ``cancel``, ``close``) and a typed read API
    (``run_id``, ``version``, ``status``, ``error``, ``outcome()``, ``unknown()``,
    ``pending()``, ``main_view()``, ``way_out()``, ``usage()``)."""

    def __init__(self, *, store: BaseCheckpointStore, modules: RuntimeModules,
                 bindings: JSON, snapshot: AgentSnapshot, tools: ToolRuntime,
                 host: HostPorts, emit: Emit | None = None,
                 verifiers: Mapping[str, Verifier] | None = None) -> None:
        self._store = store
        self._modules = modules
        self._bindings = bindings
        self._snapshot = snapshot
        self._tools = tools
        self._host = host
        self._emit: Emit = emit or (lambda topic, data: None)
        self._verifiers = dict(verifiers or {})
        self._ctx: StepContext | None = None
        self._hooks: HookRunner | None = None
        self._model: ModelCaller | None = None
        self._closed = False
        self._active: asyncio.Task[Any] | None = None

    # -- attach -----------------------------------------------------------------------

    def _bind(self, journal: Journal) -> StepContext:
        ctx = StepContext(journal, self._modules, self._snapshot, self._tools, self._host,
                          self._emit)
        self._ctx, self._hooks = ctx, HookRunner(ctx)
        self._model = ModelCaller(ctx, self._hooks)
        return ctx

    def _c(self) -> StepContext:
        if self._ctx is None:
            raise ConfigError("no run attached: call start() or attach()")
        return self._ctx

    async def start(self, task: str, *, run_id: str | None = None,
                    history: Sequence[Message] = (), counters: Mapping[str, int] | None = None,
                    history_watermark: int = 0,
                    labels: Mapping[str, str] | None = None) -> str:
        """Create a run (version 1): meta record, main frame, first records. ``history``
        is the session history the run inherits (up to ``history_watermark``)."""
        if not task.strip():
            raise ConfigError("the task is empty")
        run_id = run_id or uuid.uuid4().hex
        head = new_head(run_id, bindings_hash(self._bindings), dict(labels or {}))
        ctx = self._bind(Journal(self._store, run_id, 0, head))
        start = {"counters": dict(counters or {}), "history_watermark": history_watermark}
        ctx.journal.append("meta", {"snapshot": self._snapshot.model_dump(mode="json"),
                                    "bindings": self._bindings, "start": start})  # replay
        frame = new_frame("main", task)
        head["frames"]["main"] = frame
        ctx.context.create(ctx.journal, frame, system=ctx.system_prompt(frame),
                           history=history, task=task, counters=dict(counters or {}),
                           history_watermark=history_watermark)
        keep_task(ctx, frame)
        ctx.commit("run.start")
        ctx.emit("run.started", {"run_id": run_id, "task": task})
        return run_id

    def attach(self, run_id: str) -> None:
        """Load an existing run; refuse if its bindings differ from this engine's (each
        binding judged by its owner: ``ResumeMismatch`` names what changed)."""
        loaded = self._store.load_head(run_id)
        if loaded is None:
            raise ConfigError(f"run {run_id} does not exist")
        head = loaded.body
        if head.get("format") != FORMAT:
            raise ConfigError(
                f"run {run_id} was saved in checkpoint format {head.get('format')}; this "
                f"runtime reads format {FORMAT} only. Resume it with the version that "
                "started it, or ask the question again in a new run.")
        ctx = self._bind(Journal(self._store, run_id, loaded.version, head))
        if head["bindings"] != bindings_hash(self._bindings):
            saved = ctx.journal.read("meta", 0, 1)[0].body["bindings"]
            verify_bindings(saved, self._bindings, self._verifiers)

    async def begin_execution(self, *, retry_unknown_models: bool = False,
                              confirm_hooks: bool = False,
                              raise_budget: _resolve.RaiseBudget | None = None) -> None:
        """A new execution (resume): a fresh call and iteration budget; history and totals
        are kept. A stopped run becomes running; its in-flight operation is re-examined
        (an unknown outcome blocks again until ``resolve``). ``raise_budget``: the
        operator's raised run budget (recorded in ``budgets``, same commit)."""
        ctx = self._c()
        head = ctx.head
        if head["status"] in _resolve.TERMINAL:
            raise ConfigError(f"run {ctx.run_id} is {head['status']}; it cannot be resumed "
                              "(ask the question again in a new run)",
                              details={"code": "run_ended"})
        if raise_budget is not None:
            _resolve.raise_budget(ctx, raise_budget)
        _resolve.new_execution(ctx, retry_unknown_models=retry_unknown_models,
                               confirm_hooks=confirm_hooks)
        ctx.commit("execution.begin")
        ctx.emit("run.resumed", {"run_id": ctx.run_id, "execution": head["execution"]})

    async def resolve(self, verdict: Verdict) -> None:
        """Record an operator's verdict on the unknown outcome that blocks the run, in one
        commit with a new execution; then step on. See ``unknown()`` for what applies."""
        ctx = self._c()
        release = _resolve.apply(ctx, self._hooks_runner(), verdict, self.unknown())
        ctx.commit("verdict.recorded")
        if release is not None and self._host.commands is not None:
            self._host.commands.release(release)
        ctx.emit("run.resolved", {"run_id": ctx.run_id, "verdict": verdict.kind,
                                  "by": verdict.by})

    def queue_input(self, text: str) -> int:
        """A supplement for the running task: safe while a step runs, even in another
        process; injected at the next safe boundary."""
        return post_input(self._store, self._c().run_id, text)

    async def cancel(self, reason: str = "cancelled") -> None:
        ctx = self._c()
        ctx.head["status"] = "cancelled"
        ctx.head["error"] = error_info("run_cancelled", reason, "RunCancelled")
        ctx.commit("run.cancel")
        ctx.emit("run.cancelled", {"run_id": ctx.run_id})

    # -- read API ---------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self._c().run_id

    @property
    def version(self) -> int:
        return self._c().journal.version

    @property
    def status(self) -> RunStatus:
        return self._c().head["status"]

    @property
    def error(self) -> Mapping[str, str] | None:
        error = self._c().head["error"]
        return None if error is None else {"code": error["code"], "message": error["message"],
                                           "type": error["type"]}

    @property
    def labels(self) -> Mapping[str, str]:
        return dict(self._c().head["labels"])

    def outcome(self) -> RunOutcome | None:
        """How the run ended (None while it has not)."""
        ctx = self._c()
        outcome = ctx.frame("main")["outcome"]
        if outcome is None or ctx.head["status"] == "running":
            return None
        return RunOutcome(status=outcome["status"],
                          answer=answer_text(ctx, ctx.frame("main"), outcome["answer"]),
                          reason=outcome["reason"],
                          annotations=dict(outcome.get("annotations") or {}))

    def pending(self) -> list[PendingToolCall]:
        ctx = self._c()
        return [PendingToolCall(instance=inst, request_id=c["request_id"], name=c["name"],
                                state=c["state"], arguments=call_arguments(ctx, f, c))
                for inst in ctx.head["stack"] for f in [ctx.frame(inst)]
                for c in f["pending"]]

    def unknown(self) -> UnknownOperation | None:
        """The operation whose outcome is unknown, when the run is stopped on one."""
        return _resolve.describe(self._c())

    def way_out(self) -> str | None:
        """What moves a stopped run on: ``resume``, ``resolve``, ``confirm_hooks``,
        ``new_question``; None while running or when nothing can."""
        return _resolve.way_out(self._c().head)

    def usage(self) -> RunUsage:
        """Provider usage of the run so far (every purpose, instance and execution), its
        cost (None without prices) and its budget."""
        return run_usage(self._c())

    def main_view(self) -> MainView:
        ctx = self._c()
        main = ctx.frame("main")
        view = [m for m in ctx.context.view(ctx.journal, main) if m.get("role") != "system"]
        return MainView(compacted=bool(main.get("view", {}).get("snapshot")),
                        messages=[dict(m) for m in view],
                        counters=dict(main.get("counters", {})))

    def command_spec(self) -> dict[str, Any]:
        op = self._c().head["op"]
        if op is None or op["kind"] != "command":
            raise ConfigError("no command is waiting to run")
        return dict(op["spec"])

    # -- the step ---------------------------------------------------------------------

    async def step(self, *, command_result: Mapping[str, Any] | None = None) -> StepResult:
        """One durable step. ``StepResult.next`` obliges the host: ``continue`` — step
        again; ``command`` — run ``command_spec()`` and pass its result to the next
        ``step(command_result=...)``; ``done`` — the run stopped (``status``, ``outcome()``,
        ``unknown()``, ``way_out()``). ``CheckpointConflict``: another step owns the run."""
        if self._closed:
            raise ConfigError("the engine is closed")
        ctx = self._c()
        if ctx.journal.stale:
            raise CheckpointConflict("this engine's state is stale after a failed save; "
                                     "load the run again", details={"run_id": ctx.run_id})
        if ctx.head["status"] != "running":
            return self._result("done", "none")
        self._active = asyncio.current_task()
        try:
            progress = await self._advance(dict(command_result) if command_result else None)
        except BlockRun as block:
            await self._stop(block.error, block.status)
            return self._result("done", "none", block.error.code)
        except CheckpointConflict:
            raise
        except PersistenceError as err:
            self._record_save_failure(err)
            return self._result("done", "none", err.code)
        except RunError as err:
            await self._stop(stopped := _resolve.stop_error(ctx, err), "blocked")
            return self._result("done", "none", stopped.code)
        finally:
            self._active = None
        if ctx.head["status"] != "running":
            return self._result("done", progress.kind)
        op = ctx.head["op"]
        request_id = op["request_id"] if progress.next == "command" and op and \
            op["kind"] == "command" else None
        return self._result(progress.next, progress.kind, request_id=request_id)

    async def _advance(self, command_result: dict[str, Any] | None) -> Progress:
        """Loop order, top-down (docs/contract.md#loop-order): in flight, closing, the pending tool
        group, supplements, the review, compaction, and the action call."""
        ctx = self._c()
        head = ctx.head
        _resolve.release_marker(ctx)
        if head["op"] is not None:
            resumed = await self._resume_operation(command_result)
            if resumed is not None:
                return resumed
        if "closing" in head:
            await after_stage(ctx, self._hooks_runner(), ctx.frame(head["closing"]))
            ctx.commit("run.close")
            return Progress("none")
        if not head["run_checked"]:
            await self._run_before()
        pull_inbox(ctx)
        frame = ctx.active()
        call = next((c for c in frame["pending"] if c["state"] in ("queued", "returned")),
                    None)
        if call is not None and call["state"] == "returned":
            await finish_delegation(ctx, self._hooks_runner(), frame, call)
            return Progress("tool")
        if call is not None:
            return await self._tool_step(frame, call)
        if frame.get("inputs") and ctx.context.drain_inputs(ctx.journal, frame):
            frame["candidate"] = None  # the model answers again, with the supplement in view
            ctx.commit("inputs.injected")
            return Progress("input")
        if frame["candidate"] is not None:
            if await review_step(ctx, self._caller(), frame):
                close_frame(ctx, self._hooks_runner(), frame)
            ctx.commit("review.done")
            return Progress("verification")
        limit = self._modules.limits.max_iterations
        if frame["iterations"] - frame["iterations_base"] >= limit:
            raise BlockRun(BudgetExceeded(
                f"instance {frame['instance']} reached {limit} action iterations in this "
                "execution; resume to continue with a fresh budget",
                details={"instance": frame["instance"]}))
        tools = visible_schemas(ctx, frame)
        if await compaction_step(ctx, self._hooks_runner(), self._caller(), frame, tools):
            return Progress("compaction")
        await action_step(ctx, self._hooks_runner(), self._caller(), frame)
        return Progress("action")

    async def _resume_operation(self, command_result: dict[str, Any] | None
                                ) -> Progress | None:
        """An operation left in flight: its rules (docs/contract.md#recovery). None: the step goes
        on as usual (a model call whose response is saved, or that is to be sent again,
        is met again by the same dispatch)."""
        ctx = self._c()
        head = ctx.head
        op = head["op"]
        assert op is not None
        if op["kind"] == "command":  # a dispatched command is the next step's to record
            result = find_command_result(ctx, op, command_result)
            if result is None:
                return Progress("command", "command")  # never started: the host runs it
            await record_command(ctx, self._hooks_runner(), op, result)
            return Progress("command")
        in_flight(head, op, f"operation {op['id']}")
        if op["kind"] == "tool":
            if await resume_tool(ctx, self._hooks_runner(), op):
                return Progress("tool")
            frame = ctx.frame(op["instance"])
            call = next(c for c in frame["pending"] if c["request_id"] == op["request_id"])
            return await self._tool_step(frame, call, uncertain=True)
        _resolve.resume_model_op(ctx, op)  # blocks, or arranges the re-send
        return None

    async def _tool_step(self, frame: Frame, call: PendingCall,
                         uncertain: bool = False) -> Progress:
        ctx, hooks = self._c(), self._hooks_runner()
        # A call queued by an earlier execution may have started before it ended (a
        # resume_inflight tool is not announced): its handler is told so.
        uncertain = uncertain or call["queued_in"] < ctx.head["execution"]
        prepared = await prepare_call(ctx, hooks, frame, call, uncertain)
        if not isinstance(prepared, PreparedCall):
            record_tool(ctx, frame, call, prepared)
            ctx.commit("tool.done")
            return Progress("tool")
        execution = prepared.definition.execution
        if execution == "delegate":
            await open_delegation(ctx, hooks, frame, call, prepared.arguments)
            return Progress("tool")
        if execution == "command":
            ctx.emit("tool.started", {"run_id": ctx.run_id, "request_id": call["request_id"],
                                      "instance": frame["instance"], "name": call["name"],
                                      "arguments": prepared.arguments})
            if await dispatch_command(ctx, frame, call, prepared):
                return Progress("command", "command")
            return Progress("tool")
        await run_inline(ctx, hooks, frame, call, prepared, uncertain)
        return Progress("tool")

    async def _run_before(self) -> None:
        """run.before: observe or reject the run, once, before its first action."""
        ctx, hooks = self._c(), self._hooks_runner()
        main = ctx.frame("main")
        if hooks.has("run.before", "main"):
            payload = {"run_id": ctx.run_id, "instance": "main", "task": task_text(ctx, main),
                       "mode": self._snapshot.mode}
            _, rejected = await hooks.run("run.before", payload, instance="main",
                                          key="run.before", operation_id=f"run:{ctx.run_id}")
            if rejected is not None:
                raise BlockRun(HookRejected(f"run.before hook {rejected.hook_id} rejected "
                                            f"the run: {rejected.reason}"))
        ctx.head["run_checked"] = True

    async def _stop(self, error: AgentLoomError, status: RunStatus) -> None:
        """Record a stopped run. A save failure here is recorded as such (never a
        pretended success). operation.error hooks observe; they cannot replace it."""
        ctx = self._c()
        if ctx.journal.stale:
            self._record_save_failure(PersistenceError(error.message))
            return
        head = ctx.head
        op = head["op"]
        instance = head["stack"][-1]
        await self._hooks_runner().observe("operation.error", {
            "operation_id": op["id"] if op else f"step:{ctx.journal.version}",
            "kind": op["kind"] if op else "step", "instance": instance,
            "error": {"type": type(error).__name__, "code": error.code,
                      "message": error.message}}, instance=instance)
        mark_stopped(head, error, status)
        try:
            ctx.commit("run.stop")
        except PersistenceError as err:
            self._record_save_failure(err)
            return
        ctx.emit("run.stopped", {"run_id": ctx.run_id, "status": status, "code": error.code,
                                 "message": error.message, "way_out": self.way_out()})

    def _record_save_failure(self, err: PersistenceError) -> None:
        """A failed save: the stored run recorded as blocked on its last good version."""
        ctx = self._c()
        saved = _resolve.block_after_failed_save(self._store, ctx.run_id, err)
        if saved is None:
            return
        journal, error = saved
        if journal is not None:
            self._bind(journal)
        ctx.emit("run.stopped", {"run_id": ctx.run_id, "status": "blocked",
                                 "code": err.code, "message": error.message,
                                 "way_out": "resume"})

    def _result(self, next_: StepNext, kind: StepKind, error_code: str | None = None,
                request_id: str | None = None) -> StepResult:
        ctx = self._c()
        head = ctx.head
        if error_code is None and head["error"]:
            error_code = head["error"]["code"]
        return StepResult(run_id=ctx.run_id, next=next_, status=head["status"],
                          instance=head["stack"][-1], kind=kind, version=ctx.journal.version,
                          request_id=request_id, error_code=error_code,
                          tools_next=ctx.tools_next())

    def _hooks_runner(self) -> HookRunner:
        assert self._hooks is not None
        return self._hooks

    def _caller(self) -> ModelCaller:
        assert self._model is not None
        return self._model

    # -- close ------------------------------------------------------------------------

    async def close(self) -> None:
        """docs/contract.md#closing: stop accepting work, close the tool bus, then the modules in
        order, each object once."""
        if self._closed:
            return
        self._closed = True
        active = self._active
        if active is not None and active is not asyncio.current_task() and not active.done():
            active.cancel()  # a step in flight: cancel it and wait for its cleanup
            with contextlib.suppress(asyncio.CancelledError):
                await active
        await self._tools.aclose()
        for module in self._modules.close_order():
            closer = getattr(module, "aclose", None)
            if closer is not None:
                await closer()
