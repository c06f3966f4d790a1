"""The engine tests' shared builders (convention 14): one snapshot factory, one engine
builder (``build_engine``, through the production factory), one driver, the side-effect
counter, the crash stores (after the N-th commit, after a matching commit), the
representative run (its script and its engine), the mailing run (its reply function and
a snapshot it outgrows) and the delegating run (``SUBS``, ``by_instance``). Model
doubles are the shipped ones (``agentloom_runtime.testing``: ``ScriptedModel``, ``FunctionModel``,
``KeyedScriptModel``; ``validate=False`` for replies no gateway would let through)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, cast

from agentloom_runtime.checkpoint import BaseCheckpointStore, InMemoryCheckpointStore
from agentloom_runtime.context import NoCompaction
from agentloom_runtime.context.estimators import Utf8BytesEstimator
from agentloom_runtime.contracts import (
    CompactionPolicy,
    ModelGateway,
    ModelRequest,
    ModelResponse,
    StepCommandRunner,
    StepResult,
)
from agentloom_runtime.engine import Engine, create_engine
from agentloom_runtime.snapshot import AgentSnapshot, parse_snapshot
from agentloom_runtime.testing import FunctionModel, KeyedScriptModel, ScriptedModel
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition
from agentloom_runtime.workspace import CommandResult, MarkerStore, WorkspaceProvider

COUNT_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}},
                "required": ["text"], "additionalProperties": False}
NO_COMPACTION = NoCompaction()  # stateless: one instance serves every test


def make_snapshot(**overrides: Any) -> AgentSnapshot:
    data: dict[str, Any] = {"agent_id": "tester", "prompt": "You are a test agent.",
                            "model": {"model": "scripted"}}
    data.update(overrides)
    return parse_snapshot(data)


class StoreWrapper(Protocol):
    """A test's store: it intercepts ``commit`` (to crash, fail, log or race) and hands
    everything else to ``inner`` (``CrashingStore``, ``CrashWhen`` and the tests' own)."""

    inner: Any

    def commit(self, commit: Any) -> int: ...


def build_engine(*, store: BaseCheckpointStore | StoreWrapper | None = None,
                 model: ModelGateway | None = None, script: Sequence[Any] | None = None,
                 tools: Sequence[ToolDefinition] | None = None,
                 snapshot: AgentSnapshot | Mapping[str, Any] | None = None,
                 run_id: str | None = None,
                 compaction: CompactionPolicy | Literal["default"] = NO_COMPACTION,
                 **kw: Any) -> Engine:
    """``create_engine`` with test defaults, through the production factory.

    ``store``: a fresh in-memory store when omitted (or a ``StoreWrapper`` over one).
    ``model`` or ``script`` (a ``ScriptedModel`` of those steps; neither: a
    ``ScriptedModel`` that fails on any call). Crash tests pass
    ``model=KeyedScriptModel(...)``: its answers depend on the request only, so a
    resumed run is answered alike. ``tools``: trusted definitions (none when omitted).
    ``snapshot``: ``make_snapshot()`` when omitted. ``run_id``: attach to that run
    (``checkpoint=``). ``compaction``: none unless asked for (``"default"`` = the
    snapshot's policy). Other keywords go to ``create_engine``."""
    if model is not None and script is not None:
        raise TypeError("pass model or script, not both")
    return create_engine(
        make_snapshot() if snapshot is None else snapshot,
        save=InMemoryCheckpointStore() if store is None else cast(BaseCheckpointStore, store),
        model_gateway=model if model is not None else ScriptedModel(script or ()),
        tools=list(tools or ()), compaction_policy=compaction, checkpoint=run_id, **kw)


async def drive(engine: Engine, limit: int = 500, *,
                runner: StepCommandRunner | None = None) -> StepResult:
    """Step until the run is done; fail if it does not end within ``limit`` steps. A step
    that asks for a command has ``runner`` run ``command_spec()`` and passes the result
    to the next step (without a runner, that is a test failure)."""
    command_result: dict[str, Any] | None = None
    for _ in range(limit):
        result = await engine.step(command_result=command_result)
        command_result = None
        if result.next == "done":
            return result
        if result.next == "command":
            if runner is None:
                raise AssertionError("the run asks for a command and no runner was given")
            command_result = await runner.run(engine.command_spec(), result.instance)
    raise AssertionError(f"the run did not end within {limit} steps")


class FakeRunner:
    """A command runner that follows the runner contract (marker, result, marker
    removed) without a sandbox; every command exits 0 printing ``ok``."""

    def __init__(self, lock_dir: Path) -> None:
        self.markers = MarkerStore(lock_dir)
        self.ran: list[str] = []

    def ensure_available(self) -> None:
        return None

    async def run(self, spec: dict[str, Any], instance: str) -> dict[str, Any]:
        self.markers.claim(spec["request_id"], {"state": "started"})
        self.ran.append(spec["command"])
        result = CommandResult(request_id=spec["request_id"], exit_code=0,
                               stdout_head="ok\n", duration_s=0.01)
        self.markers.write_result(result)
        self.markers.remove(spec["request_id"])
        return result.to_dict()


def command_host(root: Path, run: str = "r") -> tuple[FakeRunner, dict[str, Any]]:
    """What a host lends the engine for ``workspace_command`` (a local workspace under
    ``root``, its command markers and a ``FakeRunner``): the runner, and the keywords
    for ``build_engine``."""
    provider = WorkspaceProvider(root)
    lock_dir = provider.lock_dir("local", "tester", "s")
    runner = FakeRunner(lock_dir)
    return runner, {
        "commands": MarkerStore(lock_dir), "services": {"command_runner": runner},
        "workspace": lambda inst: provider.for_instance("local", "tester", "s", run,
                                                        inst).store()}


def saved_head(store: BaseCheckpointStore, run_id: str) -> dict[str, Any]:
    """The stored head of ``run_id`` (internals: prefer the read API where it answers)."""
    loaded = store.load_head(run_id)
    assert loaded is not None, f"run {run_id} does not exist"
    return dict(loaded.body)


def records(store: BaseCheckpointStore, run_id: str, kind: str | None = None,
            instance: str = "main") -> list[dict[str, Any]]:
    """The bodies of an instance's source records, optionally of one ``kind``."""
    bodies = [dict(e.body) for e in store.read(run_id, f"src:{instance}")]
    return bodies if kind is None else [b for b in bodies if b["kind"] == kind]


class SideEffects:
    """Counts real executions of side-effecting tools."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def tools(self) -> list[ToolDefinition]:
        async def send_mail(context: ToolContext, arguments: dict[str, Any]) -> Any:
            self.calls.append(arguments["to"])
            return {"sent": True, "to": arguments["to"]}

        async def count_words(context: ToolContext, arguments: dict[str, Any]) -> Any:
            return {"count": len(arguments["text"].split())}

        mail_schema = {"type": "object", "properties": {"to": {"type": "string"}},
                       "required": ["to"], "additionalProperties": False}
        return [
            ToolDefinition(name="send_mail", description="send an e-mail",
                           parameters=mail_schema, handler=send_mail,
                           implementation_id="send-mail/v1", evidence_fields=("to",)),
            ToolDefinition(name="count_words", description="count words",
                           parameters=COUNT_SCHEMA, handler=count_words,
                           implementation_id="count-words/v1", resume_inflight=True,
                           read_only=True),
        ]


class Crash(BaseException):
    """The process dies: not an Exception, so nothing in the engine handles it."""


class CrashingStore:
    """Wraps a store; after the N-th successful commit the 'process' dies."""

    def __init__(self, inner: Any, crash_after: int | None = None) -> None:
        self.inner = inner
        self.crash_after = crash_after
        self.commits = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def commit(self, commit: Any) -> int:
        version = self.inner.commit(commit)
        self.commits += 1
        if self.crash_after is not None and self.commits == self.crash_after:
            raise Crash(f"crash after commit {self.commits}")
        return int(version)


class CrashWhen(CrashingStore):
    """Dies right after the first commit whose head matches ``when``."""

    def __init__(self, inner: Any, when: Callable[[dict[str, Any]], bool]) -> None:
        super().__init__(inner)
        self.when: Callable[[dict[str, Any]], bool] | None = when

    def commit(self, commit: Any) -> int:
        version = super().commit(commit)
        if self.when is not None and self.when(commit.head):
            self.when = None
            raise Crash("died after a matching commit")
        return version


PLAN_OPEN = {"steps": [{"id": "1", "title": "count words", "status": "in_progress"},
                       {"id": "2", "title": "send mail", "status": "pending"}]}
PLAN_DONE = {"steps": [{"id": "1", "title": "count words", "status": "completed"},
                       {"id": "2", "title": "send mail", "status": "completed"}]}


def representative_script() -> list[Any]:
    return [
        ScriptedModel.call("update_plan", PLAN_OPEN, id="c1"),
        ScriptedModel.call("count_words", {"text": "one two three"}, id="c2"),
        ScriptedModel.call("send_mail", {"to": "ops@example.com"}, id="c3"),
        ScriptedModel.call("update_plan", PLAN_DONE, id="c4"),
        ScriptedModel.answer("Counted 3 words and mailed ops."),
    ]


def representative_engine(store: Any, effects: SideEffects,
                          run_id: str | None = None) -> Engine:
    """The representative run on ``store``: plan mode, ``representative_script`` answered
    by the request (``KeyedScriptModel``: a resumed run is answered alike), the tools of
    ``effects``; attached to ``run_id`` when given."""
    return build_engine(store=store, snapshot=make_snapshot(mode="plan"),
                        model=KeyedScriptModel(representative_script()),
                        tools=effects.tools(), run_id=run_id)


# -- the mailing run: long enough to compact ---------------------------------------------

MAILS = 14
MAILED = [f"user{k}@example.com" for k in range(MAILS)]
COMPACTING: dict[str, Any] = {
    "model": {"model": "m", "context_window": 9000, "max_output_tokens": 512,
              "safety_margin_tokens": 64},
    "context_policy": {"context_ratio": 0.5, "target_ratio": 0.3}}
"""``make_snapshot(**COMPACTING)``: a context the mailing run outgrows several times
(with ``compaction="default"``, the snapshot's budget policy, as in production)."""


def mailing(request: ModelRequest) -> ModelResponse:
    """A ``FunctionModel`` reply: mails ``MAILED`` one per action, judged from the
    addresses in the request (in summaries too), so compaction and re-sends cannot
    confuse it; a summary names the mails sent so far; reviews complete."""
    if request.purpose == "verification":
        return ScriptedModel.verdict("complete")
    sent = [int(n) for m in request.messages
            for n in re.findall(r"user(\d+)@", str(m.get("content")))]
    if request.purpose == "compaction":
        return ModelResponse(content=f"Mails sent so far: user0 .. user{max(sent)}"
                                     "@example.com.")
    k = max(sent) + 1 if sent else 0
    if k >= MAILS:
        return ScriptedModel.answer(f"sent {MAILS} mails")
    return ScriptedModel.call("send_mail", {"to": f"user{k}@example.com"}, id=f"c{k}")


SMALL_OUTPUT = 16  # a connection's smallest output limit: what a call may add beyond its input


def estimated(fn: Callable[[ModelRequest], ModelResponse], *,
              completion: int = 10) -> FunctionModel:
    """``fn``'s replies with a provider usage that matches the engine's own estimate: the
    request's UTF-8 bytes estimate as its prompt tokens, ``completion`` as its output
    (at most ``SMALL_OUTPUT``, the limit of a snapshot with ``model.max_output_tokens``
    set to it). A token cap then holds exactly when the engine checks it before a call."""
    estimator = Utf8BytesEstimator()

    def reply(request: ModelRequest) -> ModelResponse:
        given = estimator.estimate(request.messages, request.tools)
        return dataclasses.replace(fn(request), usage={
            "prompt_tokens": given, "completion_tokens": completion,
            "total_tokens": given + completion})

    return FunctionModel(reply)


# -- the delegating run: two children ---------------------------------------------------

SUBS = [{"id": "counter", "name": "Counter", "duty": "count words", "tools": ["count_words"]},
        {"id": "mailer", "name": "Mailer", "duty": "send mail", "tools": ["send_mail"]}]


def by_instance(request: ModelRequest) -> ModelResponse:
    """Deterministic per request: the reply depends on instance and progress only."""
    if request.purpose == "verification":
        return ScriptedModel.verdict("complete")
    step = sum(1 for m in request.messages if m.get("role") == "assistant")
    names = {t["function"]["name"] for t in request.tools}
    if request.instance == "main":
        script = [
            ScriptedModel.call("delegate_task", {"subagent_id": "counter",
                                                 "task": "count: a b c"}, id="d1"),
            ScriptedModel.call("delegate_task", {"subagent_id": "mailer",
                                                 "task": "mail ops"}, id="d2"),
            ScriptedModel.answer("both children finished"),
        ]
        return script[step]
    assert "delegate_task" not in names, "children cannot delegate"
    if "count_words" in names:
        script = [ScriptedModel.call("count_words", {"text": "a b c"}, id="k1"),
                  ScriptedModel.answer("3 words")]
    else:
        assert "count_words" not in names
        script = [ScriptedModel.call("send_mail", {"to": "ops@example.com"}, id="m1"),
                  ScriptedModel.answer("mailed")]
    return script[step]
