"""GenAI-named spans built from the engine's typed events (OpenTelemetry semantic
conventions for generative AI; status "development").

Tree per run execution::

    invoke_agent {agent}            gen_ai.agent.id/name/version, gen_ai.conversation.id
    └── agentloom.step              one Engine.step(): kind, next, status, version
        ├── chat {model}            model.started → model.completed (action, compaction,
        │                           verification): gen_ai.request.model,
        │                           gen_ai.provider.name, gen_ai.usage.*_tokens
        └── execute_tool {name}     tool.started → tool.completed: gen_ai.tool.name,
                                    gen_ai.tool.call.id (the engine's request id)

The events carry no usage, so a chat span stays open until its step ends and then gets
the step's usage delta (``Engine.usage()`` after minus before: exactly what the step's
commits added to the checkpoint). A call whose response was saved before a crash and is
*replayed* on resume (``model.completed`` / ``tool.completed`` without a start in this
step) gets a span marked ``agentloom.replayed=true`` and no usage: its tokens were
counted by the commit that saved them. The first step after ``run.resumed`` is marked
``agentloom.resumed=true``. A command's ``execute_tool`` span covers its dispatch; when
the span cannot outlive the step (Lambda: one step per invocation) it ends there with
``agentloom.tool.phase=dispatched`` and the step that records the result opens
``execute_tool`` again with ``agentloom.tool.phase=recorded``.

Attributes are ids, names, enumerations and numbers only: never message text, tool
arguments or results.

Where the spans go: through the OpenTelemetry *API* only (a core dependency: without an
SDK every span is a no-op). Embedded (``serve``, the CLI): set the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) and install
the ``otel`` extra; ``configure_from_env`` then installs an SDK tracer provider with a
batching OTLP/HTTP exporter (``OTEL_SERVICE_NAME`` names the service). Lambda: the AWS
Distro for OpenTelemetry layer configures the global provider and exports to X-Ray
(docs/operations.md, "Reading traces and logs"); ``configure_from_env`` does nothing there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

if TYPE_CHECKING:
    from agentloom_runtime.contracts import StepResult
import os
import threading

from agentloom_runtime.errors import ConfigError

_ENV = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_lock = threading.Lock()
_configured = False


def otlp_provider(endpoint: str | None = None) -> trace.TracerProvider:
    """An SDK tracer provider exporting over OTLP/HTTP in batches (not made global).
    ``endpoint``: the full traces URL; else the exporter reads the ``OTEL_*`` env."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as err:
        raise ConfigError("OTLP trace export needs the otel extra: pip install "
                          "'agentloom[otel]' (or unset OTEL_EXPORTER_OTLP_ENDPOINT)",
                          details={"missing": err.name}) from None
    service = os.environ.get("OTEL_SERVICE_NAME", "agentloom")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider


def configure_from_env() -> bool:
    """Install the OTLP provider globally when an OTLP endpoint is configured and no
    provider is yet (once per process). True when this call installed it."""
    global _configured
    with _lock:
        if _configured or not any(os.environ.get(name) for name in _ENV):
            return False
        _configured = True
        if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            return False  # the application configured its own provider: keep it
        trace.set_tracer_provider(otlp_provider())
        return True

FAILED_TOOL = frozenset({"error", "unknown"})


@dataclass(frozen=True)
class StepUsage:
    """What one step added to the run's usage."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None


@dataclass(frozen=True)
class AgentInfo:
    agent_id: str
    name: str
    version: int
    session_id: str
    run_id: str
    space_id: str
    model: str
    provider: str
    generation: int | None = None


@dataclass
class _Chat:
    span: Span
    replayed: bool
    completed: bool = False


@dataclass
class _Step:
    span: Span
    chats: list[_Chat] = field(default_factory=list)
    orphans: list[Span] = field(default_factory=list)  # tool results without a start
    replayed: bool = False


class GenAiSpans:
    def __init__(self, tracer: trace.Tracer, info: AgentInfo, *, keep_tools: bool) -> None:
        self.tracer = tracer
        self.info = info
        self.keep_tools = keep_tools  # a command's span may stay open across steps
        self.agent: Span | None = None
        self.current: _Step | None = None
        self.chats: dict[str, _Chat] = {}
        self.tools: dict[str, Span] = {}
        self.resumed = False

    def _agent(self) -> Span:
        if self.agent is None:
            info = self.info
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": info.agent_id,
                "gen_ai.agent.name": info.name or info.agent_id,
                "gen_ai.agent.version": str(info.version),
                "gen_ai.conversation.id": info.session_id,
                "gen_ai.provider.name": info.provider, "gen_ai.request.model": info.model,
                "agentloom.run.id": info.run_id, "agentloom.space.id": info.space_id}
            if info.generation is not None:
                attrs["agentloom.execution.generation"] = info.generation
            if self.resumed:
                attrs["agentloom.resumed"] = True
            self.agent = self.tracer.start_span(
                f"invoke_agent {info.name or info.agent_id}", kind=SpanKind.INTERNAL,
                attributes=attrs)
        return self.agent

    def _parent(self) -> Any:
        span = self.current.span if self.current is not None else self._agent()
        return trace.set_span_in_context(span)

    # -- steps ---------------------------------------------------------------------------

    def begin_step(self, version: int) -> None:
        span = self.tracer.start_span("agentloom.step", context=trace.set_span_in_context(
            self._agent()), attributes={"agentloom.run.id": self.info.run_id,
                                        "agentloom.step.version": version})
        if self.resumed:
            span.set_attribute("agentloom.resumed", True)
            self.resumed = False
        self.current = _Step(span)

    def end_step(self, result: StepResult | None, usage: StepUsage | None,
                 error: BaseException | None) -> None:
        step = self.current
        if step is None:
            return
        self.current = None
        self._end_chats(step, usage)
        command = result is not None and result.kind == "command"
        for span in step.orphans:
            # a command's result is recorded by a later step than its start; any other
            # result without a start is a saved one replayed after a crash
            span.set_attribute(*(("agentloom.tool.phase", "recorded") if command
                                 else ("agentloom.replayed", True)))
            step.replayed |= not command
            span.end()
        if result is not None:
            step.span.set_attributes({"agentloom.step.kind": result.kind,
                                      "agentloom.step.next": result.next,
                                      "agentloom.run.status": result.status})
            if result.error_code:
                step.span.set_attribute("agentloom.error.code", result.error_code)
        if not (self.keep_tools and result is not None and result.next == "command"):
            self._end_tools("dispatched")
        if step.replayed:
            step.span.set_attribute("agentloom.replayed", True)
        if error is not None:
            self._fail(step.span, type(error).__name__)
        step.span.end()

    def _end_chats(self, step: _Step, usage: StepUsage | None) -> None:
        sent = [c for c in step.chats if not c.replayed]
        if usage is not None and sent and (usage.input_tokens or usage.output_tokens):
            sent[-1].span.set_attributes({"gen_ai.usage.input_tokens": usage.input_tokens,
                                          "gen_ai.usage.output_tokens": usage.output_tokens})
            if usage.cost is not None:
                sent[-1].span.set_attribute("agentloom.usage.cost", usage.cost)
        for chat in step.chats:
            if not chat.completed:
                self._fail(chat.span, "no_response")
            chat.span.end()
        self.chats = {k: c for k, c in self.chats.items() if c not in step.chats}

    def close(self) -> None:
        if self.current is not None:
            self.end_step(None, None, None)
        self._end_tools("abandoned")
        for chat in self.chats.values():
            self._fail(chat.span, "abandoned")
            chat.span.end()
        self.chats.clear()
        if self.agent is not None:
            self.agent.end()
            self.agent = None

    # -- events --------------------------------------------------------------------------

    def on_event(self, topic: str, data: Mapping[str, Any]) -> None:
        handler = _HANDLERS.get(topic)
        if handler is not None:
            handler(self, data)

    def _chat(self, data: Mapping[str, Any], *, replayed: bool = False) -> _Chat:
        info = self.info
        span = self.tracer.start_span(
            f"chat {info.model}", context=self._parent(), kind=SpanKind.CLIENT, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": info.model,
                "gen_ai.provider.name": info.provider, "gen_ai.conversation.id":
                info.session_id, "agentloom.model.purpose": str(data.get("purpose", "")),
                "agentloom.instance": str(data.get("instance", "")),
                "agentloom.operation.id": str(data.get("op_id", ""))})
        if replayed:
            span.set_attribute("agentloom.replayed", True)
        chat = _Chat(span, replayed)
        if self.current is not None:
            self.current.chats.append(chat)
            self.current.replayed |= replayed
        return chat

    def _model_started(self, data: Mapping[str, Any]) -> None:
        self.chats[str(data.get("op_id"))] = self._chat(data)

    def _model_completed(self, data: Mapping[str, Any]) -> None:
        chat = self.chats.get(str(data.get("op_id")))
        if chat is None:
            chat = self._chat(data, replayed=True)
            self.chats[str(data.get("op_id"))] = chat
        chat.completed = True
        calls = data.get("tool_calls")
        chat.span.set_attribute("agentloom.model.tool_calls",
                           len(calls) if isinstance(calls, list | tuple) else 0)
        # ended when the step ends (it receives the step's usage then)

    def _tool(self, data: Mapping[str, Any]) -> Span:
        name = str(data.get("name", ""))
        return self.tracer.start_span(f"execute_tool {name}", context=self._parent(),
                                      attributes={"gen_ai.operation.name": "execute_tool",
                                                  "gen_ai.tool.name": name,
                                                  "gen_ai.tool.call.id": str(
                                                      data.get("request_id", "")),
                                                  "agentloom.instance": str(
                                                      data.get("instance", ""))})

    def _tool_started(self, data: Mapping[str, Any]) -> None:
        self.tools[str(data.get("request_id"))] = self._tool(data)

    def _tool_completed(self, data: Mapping[str, Any]) -> None:
        span = self.tools.pop(str(data.get("request_id")), None)
        status = str(data.get("status", ""))
        orphan = span is None
        if span is None:
            span = self._tool(data)
        span.set_attribute("agentloom.tool.status", status)
        if status in FAILED_TOOL:
            self._fail(span, status)
        if orphan and self.current is not None:
            self.current.orphans.append(span)  # ended with its step (phase decided there)
        else:
            span.end()

    def _resumed(self, data: Mapping[str, Any]) -> None:
        self.resumed = True
        if self.agent is not None:
            self.agent.set_attribute("agentloom.resumed", True)

    def _end_tools(self, phase: str) -> None:
        for span in self.tools.values():
            span.set_attribute("agentloom.tool.phase", phase)
            span.end()
        self.tools.clear()

    @staticmethod
    def _fail(span: Span, error_type: str) -> None:
        span.set_status(Status(StatusCode.ERROR, error_type))
        span.set_attribute("error.type", error_type)


_HANDLERS: dict[str, Any] = {
    "model.started": GenAiSpans._model_started,
    "model.completed": GenAiSpans._model_completed,
    "tool.started": GenAiSpans._tool_started,
    "tool.completed": GenAiSpans._tool_completed,
    "run.resumed": GenAiSpans._resumed,
}
