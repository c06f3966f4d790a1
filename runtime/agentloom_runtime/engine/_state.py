"""The durable state of a run: typed, versioned, small (ADR 0003).

The checkpoint head is one JSON document per run; everything that grows (source records,
view entries, model outputs, compaction snapshots, verdicts) lives in append-only logs
and the head holds *references* (log seqs) to it. At steady state the head stays ≤ 2 KB
whatever the length of the history.

Format history (a run saved in another format is refused with a clear message; there is
no migration: resume it with the runtime that started it, or ask the question again):

- 1: untyped head; evidence copied tool results into frames; tool results stored twice.
- 2: typed head; evidence and answers by reference; typed operations by ``kind`` and
     ``phase``; operator verdicts; per-execution iteration budget; run-unique call ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from agentloom_runtime.contracts import (
    ContextFrame,
    Message,
    Purpose,
    RunStatus,
    StepKind,
    StepNext,
)

if TYPE_CHECKING:
    from agentloom_runtime.errors import AgentLoomError

FORMAT = 2

CommitPoint = Literal[
    "run.start",            # meta record, main frame, first records
    "execution.begin",      # resume: a new execution with a fresh call budget
    "run.cancel",
    "run.stop",             # blocked / failed with a typed error
    "run.close",            # run.after / subagent.after done, frame closed
    "inputs.injected",      # queued supplements entered the view
    "model.sent",           # a model operation is about to leave (budget consumed)
    "model.raw_saved",      # the raw response, before model.chat.after hooks
    "action.done",          # assistant message recorded; calls queued or a candidate
    "review.done",          # completion decision recorded
    "compaction.done",      # a validated view replaced the old one
    "compaction.failed",    # summary calls were made but the result was refused
    "hook.started",         # a non-replay-safe hook binding is about to run
    "hook.done",            # ... and its cursor after it
    "tool.started",         # a side-effecting handler is about to run
    "tool.raw_saved",       # the handler's raw result, before tool.after hooks
    "tool.done",            # the tool result recorded (also refusals and failures)
    "delegation.opened",    # a child frame was pushed
    "command.dispatched",   # a command spec saved; the host runs it (next=command)
    "verdict.recorded",     # an operator resolved an unknown outcome
]

OpKind = Literal["model", "tool", "command"]


class ErrorInfo(TypedDict):
    code: str
    message: str
    type: str


class Outcome(TypedDict):
    """How a frame ended. ``answer`` is the view seq of the answer, not its text."""

    status: RunStatus
    answer: int | None
    reason: str
    annotations: NotRequired[dict[str, Any]]


class ParentRef(TypedDict):
    instance: str
    request_id: str


class PendingCall(TypedDict):
    """One tool call of the frame's current group. ``call_id`` is run-unique (the id the
    model used is kept in the source record); arguments live in the source record of
    the assistant message (``src``, call ``index``), inline only when short."""

    call_id: str
    name: str
    request_id: str
    state: Literal["queued", "delegated", "returned", "done"]
    src: int
    index: int
    queued_in: int  # the execution that queued it: a later one cannot know it never ran
    arguments: NotRequired[str]
    child: NotRequired[str]
    result: NotRequired[int]  # "returned": the ops seq of the child's result

class Frame(ContextFrame):
    """An instance's record. ``instance``, ``task``, ``plan`` and the fields the context
    manager keeps (``view``, ``history_watermark``, ``inputs``, ``counters``) are
    declared by ``contracts.ContextFrame``."""

    parent: ParentRef | None
    template: str | None
    tools: list[str] | None
    status: RunStatus
    iterations: int
    iterations_base: int  # iterations at the start of this execution
    pending: list[PendingCall]
    candidate: int | None  # view seq of the candidate answer
    evidence: list[int]  # source seqs of the latest tool results (the review reads them)
    outcome: Outcome | None
    task_src: NotRequired[int]  # the full task's source record, when ``task`` is a preview
    compaction_memory: NotRequired[dict[str, Any]]
    compaction_failed_in: NotRequired[int]  # the execution of the last failed attempt


class ModelOp(TypedDict):
    kind: Literal["model"]
    phase: Literal["sent", "raw_saved"]
    id: str
    execution: int
    purpose: Purpose
    instance: str
    index: int  # position among the model calls of this step
    request_hash: str | None
    attempts: int
    started_at: float
    final_input: NotRequired[dict[str, Any] | None]
    ops_seq: NotRequired[int]


class ToolOp(TypedDict):
    kind: Literal["tool"]
    phase: Literal["started", "raw_saved"]
    id: str
    execution: int
    request_id: str
    instance: str
    name: str
    attempts: int
    started_at: float
    raw: NotRequired[dict[str, Any]]  # {"ops": seq} of the saved RawResult


class CommandOp(TypedDict):
    kind: Literal["command"]
    phase: Literal["dispatched"]
    id: str
    execution: int
    request_id: str
    instance: str
    name: str
    attempts: int
    started_at: float
    spec: dict[str, Any]


Operation = ModelOp | ToolOp | CommandOp


class HookCursor(TypedDict):
    key: str
    point: str
    cursor: int
    execution: int
    running: int | None
    fields: dict[str, Any]


class ExecOptions(TypedDict):
    retry_unknown_models: bool
    confirm_hooks: bool


class RetryOp(TypedDict):
    id: str
    attempts: int
    purpose: Purpose
    final_input: dict[str, Any] | None


class UsageTotals(TypedDict):
    """Provider usage summed over every model call of the run (all purposes, instances
    and executions). ``cost`` is in the price's currency, 0.0 without prices."""

    calls: int
    input_tokens: int
    output_tokens: int
    cost: float


class BudgetLimits(TypedDict):
    """The run's budget as an operator raised it (overrides the version's limits)."""

    max_tokens: int | None
    max_cost: float | None


class Head(TypedDict):
    format: int
    run_id: str
    status: RunStatus
    error: ErrorInfo | None
    bindings: str
    execution: int
    calls: int
    total_calls: int
    exec_options: ExecOptions
    delegations: int
    stack: list[str]
    frames: dict[str, Frame]
    streams: dict[str, int]
    op: Operation | None
    step_ops: list[int]
    next_request: int
    labels: dict[str, str]
    inbox_seen: int
    run_checked: bool
    closing: NotRequired[str]
    hook: NotRequired[HookCursor]
    step_done: NotRequired[list[int]]
    retry_op: NotRequired[RetryOp]
    release_marker: NotRequired[str]  # a command marker to remove after a verdict
    usage: NotRequired[UsageTotals]  # absent until the first response with usage
    budget: NotRequired[BudgetLimits]  # absent until an operator raises the budget


# -- constructors: one per record kind ---------------------------------------------------


def new_head(run_id: str, bindings: str, labels: dict[str, str]) -> Head:
    return Head(format=FORMAT, run_id=run_id, status="running", error=None,
                bindings=bindings, execution=1, calls=0, total_calls=0,
                exec_options=ExecOptions(retry_unknown_models=False, confirm_hooks=False),
                delegations=0, stack=["main"], frames={}, streams={}, op=None, step_ops=[],
                next_request=0, labels=labels, inbox_seen=0, run_checked=False)


def new_frame(instance: str, task: str, *, parent: ParentRef | None = None,
              template: str | None = None, tools: list[str] | None = None) -> Frame:
    return Frame(instance=instance, task=task, parent=parent, template=template,
                 tools=tools, status="running", iterations=0, iterations_base=0,
                 pending=[], candidate=None, plan=[], evidence=[], outcome=None)


def model_op(*, op_id: str, execution: int, purpose: Purpose, instance: str, index: int,
             request_hash: str | None, attempts: int, started_at: float,
             final_input: dict[str, Any] | None) -> ModelOp:
    op = ModelOp(kind="model", phase="sent", id=op_id, execution=execution, purpose=purpose,
                 instance=instance, index=index, request_hash=request_hash,
                 attempts=attempts, started_at=started_at)
    if final_input is not None:
        op["final_input"] = final_input
    return op


def tool_op(*, call: PendingCall, execution: int, instance: str, started_at: float,
            attempts: int = 1) -> ToolOp:
    return ToolOp(kind="tool", phase="started", id=f"t:{call['request_id']}",
                  execution=execution, request_id=call["request_id"], instance=instance,
                  name=call["name"], attempts=attempts, started_at=started_at)


def command_op(*, call: PendingCall, execution: int, instance: str, spec: dict[str, Any],
               started_at: float) -> CommandOp:
    return CommandOp(kind="command", phase="dispatched", id=f"c:{call['request_id']}",
                     execution=execution, request_id=call["request_id"], instance=instance,
                     name=call["name"], attempts=1, started_at=started_at, spec=spec)


def error_info(code: str, message: str, type_name: str) -> ErrorInfo:
    return ErrorInfo(code=code, message=message, type=type_name)


@dataclass(frozen=True)
class MainView:
    """The main instance's model-visible view, for a host that keeps session views
    (messages carry the context manager's private ``_``-keys, e.g. ``_session_seq``)."""

    compacted: bool
    messages: list[Message]
    counters: dict[str, int]


@dataclass(frozen=True)
class Progress:
    """What one ``Engine.step`` dispatch did: the kind of step and what comes next."""

    kind: StepKind
    next: StepNext = "continue"


def mark_stopped(head: Head, error: AgentLoomError, status: RunStatus) -> None:
    head["status"] = status
    head["error"] = error_info(error.code, error.message, type(error).__name__)
    for inst in head["stack"]:
        head["frames"][inst]["status"] = status
