"""``Observer``: logs, traces and metrics of one run, the same on every host.

A host makes one per run it drives (``Observer.for_run``), passes ``observer.emit`` to
``create_engine(emit=...)`` (forwarding to its own event sink, e.g. the platform's
``RunTracker.event``), wraps each ``Engine.step()`` in ``with observer.step(engine) as
s: s.finished(await engine.step(...))`` (``agentloom.local.runs.drive(observer=...)``
does), and closes it when it stops driving. ``watch``/``of`` keep the observer with its
engine where the code that builds an engine is not the code that drives it. The
embedded worker and the CLI drive many steps per observer; the step Lambda one
(``host="lambda"``: Powertools Logger JSON lines, EMF metrics, tool spans that do not
outlive the invocation).

Nothing here may break a step: a failing log, span or metric is logged and dropped.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol
from weakref import WeakKeyDictionary

from opentelemetry import trace

from agentloom.observability._logs import RunLog
from agentloom.observability._metrics import EmfMetrics, LogMetrics, MetricsSink
from agentloom.observability._traces import (
    FAILED_TOOL,
    AgentInfo,
    GenAiSpans,
    StepUsage,
    configure_from_env,
)
from agentloom_runtime.errors import CheckpointConflict

if TYPE_CHECKING:  # the step handler's cold import stays small
    from agentloom_runtime.contracts import StepResult
    from agentloom_runtime.snapshot import AgentSnapshot


SAFE_KEYS: frozenset[str] = frozenset({
    "run_id", "op_id", "operation_id", "request_id", "purpose", "instance", "name",
    "status", "code", "way_out", "execution", "verdict", "decision", "template",
    "hook_id", "version", "point", "kind", "error_type",
})
MAX_VALUE_CHARS = 120
# a log record's own attributes cannot be extra fields (logging raises KeyError)
RENAMED = {"name": "tool"}


def safe_fields(data: Mapping[str, Any]) -> dict[str, str | int | float | bool]:
    """The allow-listed scalar fields of ``data`` (strings capped; a tool's ``name`` as
    ``tool``); ``tool_calls`` (the names a model asked for) becomes their count."""
    out: dict[str, str | int | float | bool] = {}
    for key in SAFE_KEYS.intersection(data):
        value = data[key]
        shown = RENAMED.get(key, key)
        if isinstance(value, bool | int | float):
            out[shown] = value
        elif isinstance(value, str):
            out[shown] = value[:MAX_VALUE_CHARS]
    calls = data.get("tool_calls")
    if isinstance(calls, list | tuple):
        out["tool_calls"] = len(calls)
    return out

Host = Literal["embedded", "lambda"]
Forward = Callable[[Any, Mapping[str, Any]], None]
TRACER_NAME = "agentloom"
log = logging.getLogger(__name__)
_WATCHED: WeakKeyDictionary[Any, Observer] = WeakKeyDictionary()
_RELAYS: WeakKeyDictionary[Any, Relay] = WeakKeyDictionary()
_LIFECYCLE = frozenset({"run.started", "run.resumed", "run.finished", "run.stopped",
                        "run.cancelled", "run.resolved", "subagent.started"})


class _Usage(Protocol):
    @property
    def calls(self) -> int: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cost(self) -> float | None: ...


class Observed(Protocol):
    """What ``step`` reads of an engine (``Engine`` satisfies it)."""

    @property
    def version(self) -> int: ...

    def usage(self) -> _Usage: ...


@dataclass
class StepScope:
    result: StepResult | None = None

    def finished(self, result: StepResult) -> StepResult:
        self.result = result
        return result


class Observer:
    def __init__(self, info: AgentInfo, *, log_: RunLog, metrics: MetricsSink,
                 tracer: trace.Tracer, host: Host, forward: Forward | None = None) -> None:
        self.info = info
        self.log = log_
        self.metrics = metrics
        self.spans = GenAiSpans(tracer, info, keep_tools=host == "embedded")
        self.forward = forward
        self._closed = False

    @classmethod
    def for_run(cls, *, run_id: str, session_id: str, space_id: str,
                snapshot: AgentSnapshot, host: Host = "embedded",
                generation: int | None = None, stage: str | None = None,
                forward: Forward | None = None,
                tracer_provider: trace.TracerProvider | None = None,
                metrics: MetricsSink | None = None) -> Observer:
        """``stage`` defaults to ``AGENTLOOM_STAGE`` (``local`` when unset); the tracer
        to the global provider (a no-op unless an SDK is configured: ``tracing``)."""
        info = AgentInfo(agent_id=snapshot.agent_id, name=snapshot.name,
                         version=snapshot.version, session_id=session_id, run_id=run_id,
                         space_id=space_id, model=snapshot.model.model,
                         provider=snapshot.model.dialect, generation=generation)
        keys: dict[str, str | int] = {"run_id": run_id, "session_id": session_id,
                                      "space_id": space_id}
        if generation is not None:
            keys["generation"] = generation
        stage = stage or os.environ.get("AGENTLOOM_STAGE", "local")
        if host == "embedded" and tracer_provider is None:
            configure_from_env()
        if metrics is None:
            metrics = EmfMetrics(stage=stage, metadata=keys) if host == "lambda" \
                else LogMetrics(keys)
        tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(TRACER_NAME)
        return cls(info, log_=RunLog(keys, structured=host == "lambda"), metrics=metrics,
                   tracer=tracer, host=host, forward=forward)

    def watch(self, engine: Any) -> None:
        """Remember this observer as ``engine``'s (for the code that drives it later)."""
        _WATCHED[engine] = self

    @staticmethod
    def of(engine: Any) -> Observer | None:
        return _WATCHED.get(engine)

    # -- the engine's emit callback ------------------------------------------------------

    def emit(self, topic: Any, data: Mapping[str, Any]) -> None:
        try:
            if self.forward is not None:
                self.forward(topic, data)
        finally:
            self._guarded(self._observe, str(topic), data)

    def _observe(self, topic: str, data: Mapping[str, Any]) -> None:
        self.spans.on_event(topic, data)
        level = logging.INFO if topic in _LIFECYCLE else logging.DEBUG
        self.log.write(level, topic, safe_fields(data))
        if topic == "tool.completed" and data.get("status") in FAILED_TOOL:
            self.metrics.add("ToolFailures", 1)
        elif topic == "run.stopped" and data.get("status") == "blocked":
            self.metrics.add("BlockedRuns", 1)
            if data.get("way_out") == "resolve":
                self.metrics.add("UnknownOutcomes", 1)

    # -- steps ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def step(self, engine: Observed) -> Iterator[StepScope]:
        """One ``Engine.step()``: its span, duration and the usage its commits added.
        The step id in logs is the checkpoint version the step starts from."""
        before = self._guarded(engine.usage)
        version = engine.version
        self._guarded(self.log.set_step, version)
        self._guarded(self.spans.begin_step, version)
        scope = StepScope()
        started = time.perf_counter()
        error: BaseException | None = None
        try:
            yield scope
        except BaseException as err:
            error = err
            raise
        finally:
            elapsed_ms = (time.perf_counter() - started) * 1000
            used = self._guarded(_delta, before, self._guarded(engine.usage))
            self._guarded(self._stepped, scope.result, used, elapsed_ms, error)

    def _stepped(self, result: StepResult | None, used: StepUsage | None, elapsed_ms: float,
                 error: BaseException | None) -> None:
        self.spans.end_step(result, used, error)
        self.metrics.add("Steps", 1)
        self.metrics.add("StepDuration", round(elapsed_ms, 3))
        fields: dict[str, Any] = {"duration_ms": round(elapsed_ms, 1)}
        if used is not None and used.calls:
            self.metrics.add("ModelInputTokens", used.input_tokens)
            self.metrics.add("ModelOutputTokens", used.output_tokens)
            fields.update(input_tokens=used.input_tokens, output_tokens=used.output_tokens)
            if used.cost is not None:
                self.metrics.add("Cost", used.cost)
        if result is not None:
            fields.update(kind=result.kind, next=result.next, status=result.status)
            if result.error_code:
                fields["code"] = result.error_code
        if error is not None:
            fields["error_type"] = type(error).__name__
        # a step another writer superseded (a cancel, a duplicate invocation) is how the
        # fence works, not a failure: its driver reports it in its own words
        quiet = error is None or isinstance(error, CheckpointConflict)
        self.log.write(logging.INFO if quiet else logging.WARNING, "step", fields)
        self.log.set_step(None)

    def close(self) -> None:
        """End the run's spans and write its metrics (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._guarded(self.spans.close)
        self._guarded(self.metrics.flush)

    def __enter__(self) -> Observer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _guarded(call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except Exception:
            log.warning("observability failed in %s", getattr(call, "__name__", call),
                        exc_info=True)
            return None


class Relay:
    """The emit callback of an engine that outlives its observers — the step Lambda's
    warm engine serves many invocations, each observed by its own ``Observer``
    (``host="lambda"``, its execution generation). Build the engine with
    ``emit=relay.emit``; wrap each invocation in ``with relay.observing(...) as obs``.
    Between invocations events go to ``forward`` alone."""

    def __init__(self, forward: Forward | None = None) -> None:
        self.forward = forward
        self.current: Observer | None = None

    def emit(self, topic: Any, data: Mapping[str, Any]) -> None:
        current = self.current
        if current is not None:
            current.emit(topic, data)
        elif self.forward is not None:
            self.forward(topic, data)

    def watch(self, engine: Any) -> None:
        """Remember this relay as ``engine``'s (``Relay.of``)."""
        _RELAYS[engine] = self

    @staticmethod
    def of(engine: Any) -> Relay | None:
        return _RELAYS.get(engine)

    @contextlib.contextmanager
    def step(self, engine: Observed, **for_run: Any) -> Iterator[StepScope]:
        """One observed invocation of one step: ``observing`` + ``Observer.step``::

            with relay.step(engine, run_id=…, session_id=…, space_id=…, snapshot=…,
                            host="lambda", generation=g) as scope:
                result = scope.finished(await engine.step())
        """
        with self.observing(**for_run) as observer, observer.step(engine) as scope:
            yield scope

    @contextlib.contextmanager
    def observing(self, **for_run: Any) -> Iterator[Observer]:
        """``Observer.for_run(**for_run)`` (forwarding to this relay's ``forward``) for
        the duration of the block; closed (spans ended, metrics flushed) at its end."""
        observer = Observer.for_run(forward=self.forward, **for_run)
        self.current = observer
        try:
            yield observer
        finally:
            self.current = None
            observer.close()


def _delta(before: _Usage | None, after: _Usage | None) -> StepUsage | None:
    if before is None or after is None:
        return None
    cost = None if after.cost is None else round(after.cost - (before.cost or 0.0), 9)
    return StepUsage(calls=after.calls - before.calls,
                     input_tokens=after.input_tokens - before.input_tokens,
                     output_tokens=after.output_tokens - before.output_tokens, cost=cost)
