"""Data contracts and ports of the runtime (docs/contract.md#modules).

Messages are OpenAI chat-completions dicts (``{"role": ..., "content": ...}``), the wire
format every model gateway speaks; they are JSON and go into checkpoints unchanged.
Ports are small Protocols. Every injectable module carries a versioned ``module_id`` and
``checkpoint_config()``: both are bound into the checkpoint and a resume with different
values is refused. Two areas keep their ports beside this module, with the vocabulary
only they speak: ``tool_contracts`` (tool definitions and the handler's context) and
``hook_contracts`` (the hook manager, its scope, bindings and stage outcomes).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NotRequired, Protocol, TypedDict, runtime_checkable

if TYPE_CHECKING:  # PEP 705; annotations only (typing.ReadOnly from Python 3.13)
    from typing_extensions import ReadOnly

Message = dict[str, Any]
ToolSchema = dict[str, Any]  # {"type": "function", "function": {name, description, parameters}}
JSON = dict[str, Any]

Purpose = Literal["action", "compaction", "verification"]

# Here, not in ``snapshot``, so the engine reads it without importing pydantic.
DEFAULT_RUN_TOKENS = 2_000_000
"""The per-run token cap of a version that sets none (docs/contract.md#call-budgets)."""


# ---------------------------------------------------------------- model


@dataclass(frozen=True)
class ModelRequest:
    messages: Sequence[Message]
    tools: Sequence[ToolSchema] = ()
    purpose: Purpose = "action"
    instance: str = "main"
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, exactly as the model produced it

    def to_dict(self) -> Message:
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class ModelResponse:
    """A normalized, validated assistant message: an answer or tool calls."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning_content: str | None = None
    usage: Mapping[str, Any] | None = None

    def message(self) -> Message:
        msg: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.reasoning_content is not None:
            msg["reasoning_content"] = self.reasoning_content
        return msg

    def to_dict(self) -> JSON:
        data = self.message()
        if self.usage is not None:
            data["usage"] = dict(self.usage)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelResponse:
        calls = tuple(
            ToolCall(id=c["id"], name=c["function"]["name"],
                     arguments=c["function"]["arguments"])
            for c in data.get("tool_calls") or ()
        )
        return cls(content=data.get("content"), tool_calls=calls,
                   reasoning_content=data.get("reasoning_content"), usage=data.get("usage"))


ModelCall = Callable[[ModelRequest], Awaitable[ModelResponse]]
"""What the host hands a policy: budgeted, hooked, durable access to the model."""


@runtime_checkable
class Module(Protocol):
    module_id: str

    def checkpoint_config(self) -> JSON: ...


class ModelGateway(Module, Protocol):
    async def invoke(self, request: ModelRequest) -> ModelResponse: ...

    async def aclose(self) -> None: ...


# ---------------------------------------------------------------- tools


@dataclass(frozen=True)
class ToolRequest:
    call_id: str
    name: str
    arguments: str  # JSON text from the model
    uncertain: bool = False  # True on resume: an earlier attempt may have run
    request_id: str = ""
    instance: str = "main"


ToolStatus = Literal["ok", "error", "rejected", "unknown"]


@dataclass(frozen=True)
class ToolOutcome:
    value: Any  # model-visible result (JSON-able)
    status: ToolStatus = "ok"
    evidence_arguments: Mapping[str, Any] = field(default_factory=dict)
    raw_value: Any = None
    has_raw_value: bool = False
    error_code: str | None = None

    def to_dict(self) -> JSON:
        return {"value": self.value, "status": self.status,
                "evidence_arguments": dict(self.evidence_arguments),
                "raw_value": self.raw_value, "has_raw_value": self.has_raw_value,
                "error_code": self.error_code}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolOutcome:
        return cls(value=data.get("value"), status=data.get("status", "ok"),
                   evidence_arguments=data.get("evidence_arguments") or {},
                   raw_value=data.get("raw_value"),
                   has_raw_value=bool(data.get("has_raw_value")),
                   error_code=data.get("error_code"))


# ---------------------------------------------------------------- context


@dataclass(frozen=True)
class ContextInput:
    task: str
    plan: Sequence[Mapping[str, Any]]
    messages: Sequence[Message]
    instance: str
    tools: Sequence[ToolSchema]
    counters: Mapping[str, int]


@dataclass(frozen=True)
class CompactionResult:
    messages: Sequence[Message]
    metrics: Mapping[str, Any] = field(default_factory=dict)
    summary: str | None = None


class TokenEstimator(Module, Protocol):
    def estimate(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> int: ...


class CompactionPolicy(Module, Protocol):
    """What a compaction policy must implement: ``compact`` (docs/contract.md#modules).
    The optional capabilities the engine also calls — ``should_compact``, ``estimate``,
    ``validate_request`` (the hard limit), ``validate_compaction_result`` — are methods of
    ``agentloom_runtime.context.CompactionPolicyBase``, which supplies their defaults:
    subclass it to implement any of them. The engine wraps a policy that does not derive
    from it in one that does (``context.policy.with_defaults``), so a bare policy gets the
    defaults (no up-front decision, no estimate, no hard limit, nothing to object to).
    ``NoCompaction`` is the explicit "never compact"."""

    async def compact(self, context: ContextInput, call: ModelCall, *,
                      memory: Any = None) -> CompactionResult | None:
        """A smaller view, or None (skipped, deferred or failed). ``memory`` is the
        JSON-serializable failure memory the host keeps across resumes."""
        ...


class LogRecord(Protocol):
    """One entry of a run's append-only log (``checkpoint.store.LogEntry``)."""

    @property
    def seq(self) -> int: ...

    @property
    def body(self) -> JSON: ...


class RunJournal(Protocol):
    """A run's unit of work as a module sees it (``checkpoint.journal.Journal``): what
    it appends is written with the head in the step's next commit; ``read`` returns the
    stored entries of a stream after ``after`` followed by the ones not yet committed."""

    def append(self, stream: str, body: JSON) -> int:
        """Queue an entry; returns its seq in ``stream``."""
        ...

    def last_seq(self, stream: str) -> int: ...

    def read(self, stream: str, after: int = 0,
             limit: int | None = None) -> Sequence[LogRecord]: ...


class ContextFrame(TypedDict):
    """An instance's frame (its record in the checkpoint head) as a ContextManager sees
    it: it reads ``instance``, ``task``, ``plan`` and ``pending`` (no supplement enters
    the view while a tool group is pending) and keeps ``view``, ``history_watermark``,
    ``inputs`` and ``counters``. The engine's ``Frame`` (``engine._state``) extends it."""

    instance: str
    task: str
    plan: list[dict[str, Any]]
    pending: ReadOnly[Sequence[Mapping[str, Any]]]
    view: NotRequired[dict[str, int]]  # {"snapshot": revision, "base": view seq}
    history_watermark: NotRequired[int]  # the session seq the history was inherited up to
    inputs: NotRequired[list[str]]  # queued supplements
    counters: NotRequired[dict[str, int]]


class ContextManager(Module, Protocol):
    """Source records, the model-visible view and queued inputs of one instance
    (``journal-context/v1``: ``context.manager.JournalContextManager``). ``journal`` is
    the run's unit of work; ``frame`` the instance's record in the checkpoint head. A
    source record whose model-visible form differs (a capped result, a hook-processed
    answer, a rewritten call id) carries it as ``visible``; sessions project that.
    View messages are tagged with ``_seq`` (their source record);
    ``model_messages`` strips such host-private keys."""

    def create(self, journal: RunJournal, frame: ContextFrame, *, system: str,
               history: Sequence[Message], task: str,
               counters: dict[str, int] | None = None, history_watermark: int = 0) -> None:
        """Open the instance's records: the system prompt, the inherited history, the
        task."""
        ...

    def prepare(self, journal: RunJournal, frame: ContextFrame,
                tools: Sequence[ToolSchema]) -> ContextInput:
        """What a compaction policy decides on (a working copy; never the frame)."""
        ...

    def restore(self, journal: RunJournal, frame: ContextFrame) -> list[Message]:
        """Rebuild the view from the journal (after a load)."""
        ...

    def view(self, journal: RunJournal, frame: ContextFrame) -> list[Message]: ...

    def model_view(self, journal: RunJournal, frame: ContextFrame) -> list[Message]:
        """The view as the model sees it (host-private keys stripped)."""
        ...

    def model_messages(self, view: Sequence[Message]) -> list[Message]:
        """``view`` as the model sees it (host-private keys stripped)."""
        ...

    def append(self, journal: RunJournal, frame: ContextFrame, kind: str, message: Message,
               visible: Message | None = None, *, extra: JSON | None = None) -> int:
        """Append a source record (and its view entry); returns the record's seq."""
        ...

    def queue_input(self, frame: ContextFrame, text: str) -> None: ...

    def drain_inputs(self, journal: RunJournal, frame: ContextFrame) -> int:
        """Move queued inputs into the view at a safe boundary; returns how many."""
        ...

    def commit_compaction(self, journal: RunJournal, frame: ContextFrame,
                          result: CompactionResult) -> int:
        """Replace the view with a validated compaction result; returns its revision."""
        ...


# ---------------------------------------------------------------- workspace


class WorkspaceProvider(Protocol):
    """Resolves an instance's workspace from host identity only, never from the model."""

    def for_instance(self, space: str, agent: str, session: str, run: str,
                     instance: str) -> Any: ...

    def checkpoint_binding(self) -> JSON: ...

    def verify_binding(self, saved: Mapping[str, Any] | None) -> None:
        """Raise ``ResumeMismatch`` unless ``saved`` names the same volume."""
        ...


LookupState = Literal["absent", "started", "done"]


class CommandMarkers(Protocol):
    """The host's durable record of command executions (docs/contract.md#markers)."""

    def lookup(self, request_id: str) -> tuple[LookupState, dict[str, Any] | None]: ...

    def describe(self, request_id: str) -> dict[str, Any]:
        """What the host knows about an execution of unknown outcome, for an operator."""
        ...

    def release(self, request_id: str) -> None:
        """Remove the marker, after an operator's verdict was committed."""
        ...

    def forget(self, request_id: str) -> None:
        """The command's result is held by a commit now: remove the host's copy of it
        (idempotent). A marker still there keeps it (the marker's own rules clear both)."""
        ...


# ---------------------------------------------------------------- completion / strategy


@dataclass(frozen=True)
class CompletionInput:
    task: str
    plan: Sequence[Mapping[str, Any]]
    evidence: Sequence[Mapping[str, Any]]
    messages: Sequence[Message]
    candidate: str
    instance: str


@dataclass(frozen=True)
class CompletionDecision:
    decision: Literal["complete", "continue", "blocked"]
    reason: str = ""
    next_action: str = ""

    def to_dict(self) -> JSON:
        return {"decision": self.decision, "reason": self.reason,
                "next_action": self.next_action}


class CompletionPolicy(Module, Protocol):
    async def review(self, data: CompletionInput, call: ModelCall) -> CompletionDecision: ...


@dataclass(frozen=True)
class FrameView:
    """What a strategy may read about an instance; never the frame itself."""

    instance: str
    plan: Sequence[Mapping[str, Any]]
    iterations: int


class ExecutionStrategy(Module, Protocol):
    def instructions(self, frame: FrameView) -> str: ...

    def candidate_feedback(self, frame: FrameView, candidate: str) -> str | None:
        """None accepts the candidate; a text sends it back to the model as feedback."""
        ...

    def authorize_tool(self, frame: FrameView, tool: Any) -> str | None:
        """None allows the call; a text is the refusal shown to the model."""
        ...

    def before_plan_only(self, frame: FrameView) -> bool:
        """True while only ``before_plan`` tools may be offered to the model."""
        ...


# ---------------------------------------------------------------- step results


StepNext = Literal["continue", "command", "done"]
"""What ``Engine.step()`` obliges the host to do: ``continue`` — step again; ``command``
— run ``engine.command_spec()`` with a ``StepCommandRunner`` and pass its result to the
next ``step(command_result=...)``; ``done`` — the run stopped (see ``status``)."""
RunStatus = Literal["running", "completed", "blocked", "failed", "cancelled"]
StepKind = Literal["action", "compaction", "verification", "tool", "command", "input", "none"]


class StepCommandRunner(Protocol):
    """What a driver hands a step's command to (``next == "command"``): it runs
    ``spec`` (``engine.command_spec()``) for ``instance`` and returns the
    ``command_result`` of the next step. Adapters execute it with a sandbox
    (``workspace.CommandRunner``: the spec, the instance's workspace)."""

    async def run(self, spec: JSON, instance: str) -> JSON: ...


@dataclass(frozen=True)
class StepResult:
    """Small and serializable: ids and status only, never message text."""

    run_id: str
    next: StepNext
    status: RunStatus
    instance: str
    kind: StepKind
    version: int
    request_id: str | None = None  # set with next == "command"
    error_code: str | None = None
    # the next step is tool work of this cycle, not a model call: a host that runs one
    # model/tool cycle per invocation steps on while it is true
    tools_next: bool = False

    def to_dict(self) -> JSON:
        return {"run_id": self.run_id, "next": self.next, "status": self.status,
                "instance": self.instance, "kind": self.kind, "version": self.version,
                "request_id": self.request_id, "error_code": self.error_code,
                "tools_next": self.tools_next}


# ---------------------------------------------------------------- read API


@dataclass(frozen=True)
class RunOutcome:
    status: RunStatus
    answer: str | None
    reason: str = ""
    annotations: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PendingToolCall:
    instance: str
    request_id: str
    name: str
    state: str
    arguments: str


@dataclass(frozen=True)
class UnknownOperation:
    """An operation whose outcome is unknown: what an operator needs to give a verdict.
    ``host`` is what the host knows (marker state, process gone, exit seen...)."""

    operation_id: str
    kind: Literal["model", "tool", "command"]
    instance: str
    started_at: float
    attempts: int
    request_id: str | None = None
    tool: str | None = None
    arguments: str | None = None
    purpose: str | None = None
    command: Mapping[str, Any] | None = None
    host: Mapping[str, Any] = field(default_factory=dict)
    verdicts: tuple[str, ...] = ()  # the verdicts that apply

    def to_dict(self) -> JSON:
        return {"operation_id": self.operation_id, "kind": self.kind,
                "instance": self.instance, "started_at": self.started_at,
                "attempts": self.attempts, "request_id": self.request_id,
                "tool": self.tool, "arguments": self.arguments, "purpose": self.purpose,
                "command": dict(self.command) if self.command else None,
                "host": dict(self.host), "verdicts": list(self.verdicts)}


VerdictKind = Literal["ran", "did_not_run", "run_again", "send_again", "treat_as_failed"]
EXIT_CODES = range(-64, 256)  # 0..255 an exit status; -N: killed by signal N (returncode)


def exit_code_problem(code: object) -> str | None:
    """What is wrong with a verdict's exit code, or None: it is an exit status (0..255)
    or a signal (-1..-64, as Python's ``returncode`` gives it). The engine refuses a
    verdict with another (``ConfigError`` ``invalid_exit_code``), and so do the CLI and
    the API before sending one."""
    if code is None or (isinstance(code, int) and not isinstance(code, bool)
                        and code in EXIT_CODES):
        return None
    return f"exit code {code!r}: an exit status 0..255, or -1..-64 for a process killed " \
        "by that signal"


@dataclass(frozen=True)
class Verdict:
    """An operator's decision on an unknown outcome. ``ran`` / ``did_not_run`` /
    ``run_again`` apply to tools and commands; ``send_again`` / ``treat_as_failed`` to
    model calls. ``output`` (with ``ran``) is what the operator saw the call produce,
    ``exit_code`` its exit status or signal (``exit_code_problem``)."""

    kind: VerdictKind
    by: str
    note: str = ""
    output: str | None = None
    exit_code: int | None = None
