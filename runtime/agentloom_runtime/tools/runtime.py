"""ToolRuntime: the single execution path for tool calls (docs/contract.md#tools).

    prepare (parse → resolve → available → schema → authorize)
      → [engine: tool.before hooks → revalidate]
      → invoke (bus "tool.execute" → handler, with the definition's timeout)
      → [engine: save the RawResult → tool.after hooks]
      → outcome (the model-visible value rendered as text, raw value kept, evidence
        arguments)
      → [engine: cap_with_reference(text, max_visible_chars, ref) before the view]

The phases are separate so the engine can persist between them; ``execute`` chains them
without persistence. ``outcome`` never truncates: the one cap is ``cap_with_reference``,
whose marker tells the model how to read the rest with ``read_result``. Everything a
handler returns is made storable here (lone surrogates become U+FFFD), so a tool result
can always be saved. Failures the model can act on (bad JSON, unknown tool, schema
errors, refusals, a handler's exception or timeout) come back as ``ToolOutcome`` error
results and are never raised. Only ``AgentLoomError``s other than ``ToolError`` escape a
handler (a failed save, a cancelled run, misuse): they must stop the run, not become an
ordinary failure the loop continues past.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentloom_runtime._json import as_text, has_surrogate, storable_text
from agentloom_runtime.bus import BusTimeout, Event, EventBus
from agentloom_runtime.contracts import ToolOutcome, ToolRequest, ToolStatus
from agentloom_runtime.errors import (
    AgentLoomError,
    ConfigError,
    ResumeMismatch,
    ToolError,
    ToolNotFound,
)
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition, freeze

from .registry import ToolRegistry

logger = logging.getLogger(__name__)

TOOL_EXECUTE = "tool.execute"
FORMAT = 1
MAX_SCHEMA_ERRORS = 5
_ERROR_MESSAGE_LIMIT = 1_000

Authorize = Callable[[ToolDefinition], str | None]
"""None admits the call; a text is the refusal the model reads."""


def failure_outcome(code: str, message: str, *, status: ToolStatus = "error") -> ToolOutcome:
    """A failure result the model can read: ``{"error": {"code", "message"}}``."""
    return ToolOutcome(value={"error": {"code": code, "message": message}}, status=status,
                       error_code=code)


@dataclass(frozen=True)
class PreparedCall:
    """A parsed, resolved, validated and admitted call."""

    request: ToolRequest
    definition: ToolDefinition
    arguments: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        r = self.request
        return {"format": FORMAT, "request_id": r.request_id, "call_id": r.call_id,
                "name": r.name, "instance": r.instance, "raw_arguments": r.arguments,
                "uncertain": r.uncertain, "arguments": self.arguments}


@dataclass(frozen=True)
class RawResult:
    """What the handler really produced; JSON, saved by the engine before tool.after."""

    ok: bool
    value: Any = None
    error: Mapping[str, str] | None = None  # {"code", "message"} when not ok

    @classmethod
    def failure(cls, code: str, message: str) -> RawResult:
        return cls(ok=False, error={"code": code, "message": _clip(storable_text(message))})

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "ok": self.ok, "value": self.value,
                "error": dict(self.error) if self.error is not None else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RawResult:
        if data.get("format") != FORMAT:
            raise ConfigError(f"unsupported RawResult format {data.get('format')!r}")
        error = data.get("error")
        return cls(ok=bool(data["ok"]), value=data.get("value"),
                   error=dict(error) if error is not None else None)


class ToolRuntime:
    module_id = "tool-runtime/v1"

    def __init__(self, registry: ToolRegistry, *, config: Mapping[str, Any],
                 bus: EventBus | None = None, max_visible_chars: int = 24_000) -> None:
        if max_visible_chars < 200:
            raise ConfigError("max_visible_chars must be at least 200")
        registry.freeze()  # the catalog is fixed for the life of this runtime
        self._registry = registry
        self._config: Mapping[str, Any] = freeze(dict(config))
        self._owns_bus = bus is None
        self._bus = bus if bus is not None else EventBus()
        self._registration = self._bus.register(TOOL_EXECUTE, self._handle)
        self.max_visible_chars = max_visible_chars
        self._closed = False

    @property
    def registry(self) -> ToolRegistry:
        return self._registry

    @property
    def bus(self) -> EventBus:
        return self._bus

    @property
    def config(self) -> Mapping[str, Any]:
        """The deep read-only config ``available()`` sees."""
        return self._config

    def catalog(self) -> dict[str, str]:
        return self._registry.catalog()

    def checkpoint_config(self) -> dict[str, Any]:
        return {"catalog": self.catalog(), "max_visible_chars": self.max_visible_chars}

    # -- catalog views -----------------------------------------------------------------

    def visible(self, instance: str, *, before_plan_only: bool = False) -> list[ToolDefinition]:
        return [d for d in self._registry.definitions()
                if d.available(self._config, instance)
                and (d.before_plan or not before_plan_only)]

    def schemas(self, instance: str, *, before_plan_only: bool = False) -> list[dict[str, Any]]:
        return [d.schema() for d in self.visible(instance, before_plan_only=before_plan_only)]

    # -- phases ------------------------------------------------------------------------

    def prepare(self, request: ToolRequest, *,
                authorize: Authorize | None = None) -> PreparedCall | ToolOutcome:
        arguments = parse_arguments(request.arguments)
        if isinstance(arguments, ToolOutcome):
            return arguments
        try:
            definition = self._registry.resolve(request.name)
        except ToolNotFound:
            return failure_outcome("tool_not_found", f"there is no tool named "
                                   f"{request.name[:80]!r}; use one of the listed tools")
        if not definition.available(self._config, request.instance):
            return failure_outcome("tool_not_available", f"tool {definition.name!r} is not "
                                   "available in this run", status="rejected")
        return self._admit(request, definition, arguments, authorize)

    def revalidate(self, prepared: PreparedCall, arguments: Any, *,
                   authorize: Authorize | None = None) -> PreparedCall | ToolOutcome:
        """Schema and admission again, after a tool.before hook patched the arguments."""
        if not isinstance(arguments, dict):
            return failure_outcome("tool_arguments_invalid", "arguments must be a JSON object")
        return self._admit(prepared.request, prepared.definition, arguments, authorize)

    def restore(self, data: Mapping[str, Any]) -> PreparedCall:
        """Rebuild a ``PreparedCall.to_dict()`` from a checkpoint against this catalog."""
        if data.get("format") != FORMAT:
            raise ConfigError(f"unsupported PreparedCall format {data.get('format')!r}")
        try:
            definition = self._registry.resolve(data["name"])
        except ToolNotFound:
            raise ResumeMismatch(f"saved call uses tool {data['name']!r}, which is not in "
                                 "the catalog") from None
        request = ToolRequest(call_id=data["call_id"], name=data["name"],
                              arguments=data["raw_arguments"], uncertain=data["uncertain"],
                              request_id=data["request_id"], instance=data["instance"])
        return PreparedCall(request, definition, dict(data["arguments"]))

    async def invoke(self, prepared: PreparedCall, context: ToolContext) -> RawResult:
        """Run the handler through the bus. Never raises for the tool's own failures."""
        definition, request = prepared.definition, prepared.request
        payload = {"name": definition.name, "arguments": _json_copy(prepared.arguments)}
        metadata = {"tool": definition.name, "tool_id": definition.tool_id,
                    "instance": request.instance, "call_id": request.call_id,
                    "request_id": request.request_id}
        try:
            value = await self._bus.request(
                TOOL_EXECUTE, payload, context=context, timeout=definition.timeout,
                metadata=metadata, correlation_id=request.request_id or None)
        except BusTimeout:
            return RawResult.failure("tool_timeout", f"tool {definition.name!r} did not "
                                     f"finish within {definition.timeout:g} seconds")
        except ToolError as exc:  # a failure the tool reports on purpose
            return RawResult.failure(exc.code, exc.message)
        except AgentLoomError:
            raise
        except Exception as exc:  # trusted code: the type and text are safe to show
            logger.warning("tool %s raised", definition.name, exc_info=exc)
            return RawResult.failure("tool_failed", f"{type(exc).__name__}: {exc}")
        try:
            return RawResult(ok=True, value=_json_copy(value))
        except (TypeError, ValueError) as exc:
            return RawResult.failure("tool_result_invalid",
                                     f"tool {definition.name!r} returned non-JSON data: {exc}")

    def outcome(self, prepared: PreparedCall, raw: RawResult, *,
                visible_value: Any = None) -> ToolOutcome:
        """The model-visible result (``visible_value``: a tool.after hook's replacement),
        rendered as text in full: the engine caps it with ``cap_with_reference``."""
        definition, arguments = prepared.definition, prepared.arguments
        evidence = {k: _json_copy(arguments[k])
                    for k in definition.evidence_fields if k in arguments}
        if raw.ok:
            shown = raw.value if visible_value is None else visible_value
            return ToolOutcome(value=as_text(shown), status="ok",
                               evidence_arguments=evidence, raw_value=raw.value,
                               has_raw_value=True)
        error = dict(raw.error or {"code": "tool_failed", "message": "the tool failed"})
        code = error.get("code", "tool_failed")
        status: ToolStatus = "unknown" if code == "tool_outcome_unknown" else "error"
        value = {"error": error} if visible_value is None else as_text(visible_value)
        return ToolOutcome(value=value, status=status, evidence_arguments=evidence,
                           error_code=code)

    async def execute(self, request: ToolRequest,
                      context_factory: Callable[[PreparedCall], ToolContext], *,
                      authorize: Authorize | None = None) -> ToolOutcome:
        """All phases in order, without hooks or persistence (tests, simple hosts)."""
        prepared = self.prepare(request, authorize=authorize)
        if isinstance(prepared, ToolOutcome):
            return prepared
        raw = await self.invoke(prepared, context_factory(prepared))
        return self.outcome(prepared, raw)

    async def aclose(self) -> None:
        """Close the bus if this runtime created it; otherwise cancel and release only
        ``tool.execute``. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_bus:
            await self._bus.aclose()
        else:
            await self._registration.aclose()

    # -- internals ---------------------------------------------------------------------

    def _admit(self, request: ToolRequest, definition: ToolDefinition,
               arguments: dict[str, Any], authorize: Authorize | None,
               ) -> PreparedCall | ToolOutcome:
        problems = self._registry.validate(definition.name, arguments)
        if problems:
            more = len(problems) - MAX_SCHEMA_ERRORS
            message = "; ".join(problems[:MAX_SCHEMA_ERRORS])
            if more > 0:
                message += f"; and {more} more"
            return failure_outcome("tool_arguments_invalid", _clip(
                f"arguments for {definition.name!r} do not match its schema: {message}"))
        if authorize is not None:
            refusal = authorize(definition)
            if refusal is not None:
                return failure_outcome("tool_not_authorized", refusal, status="rejected")
        return PreparedCall(request, definition, arguments)

    async def _handle(self, event: Event) -> Any:
        """The ``tool.execute`` handler: the one place a definition's handler is called."""
        if not isinstance(event.context, ToolContext):
            raise ConfigError("tool.execute needs a ToolContext as the request context")
        definition = self._registry.resolve(event.payload["name"])
        return await definition.handler(event.context, event.payload["arguments"])


def reference_marker(ref: str, shown: int, total: int) -> str:
    """The note after a capped tool result: how much is shown and how to read on."""
    return (f"\n…[truncated: showing {shown} of {total} characters. The full result is "
            f"kept: call read_result with ref \"{ref}\" and offset {shown} to read on]")


def cap_with_reference(text: str, limit: int, ref: str) -> str:
    """``text`` when it has at most ``limit`` characters; else its head plus
    ``reference_marker``, at most ``limit`` characters in all (when the marker itself
    fits). The one truncation of model-visible tool results."""
    if len(text) <= limit:
        return text
    # the marker for ``limit`` shown is at least as long as the real one (keep < limit)
    keep = max(0, limit - len(reference_marker(ref, limit, len(text))))
    return text[:keep] + reference_marker(ref, keep, len(text))


def parse_arguments(text: Any) -> dict[str, Any] | ToolOutcome:
    """A call's argument text as the runtime reads it: a JSON object of valid Unicode, or
    the failure result the model gets instead (the engine shows the model that failure
    in place of the text, in later requests)."""
    if not isinstance(text, str):
        return failure_outcome("tool_arguments_invalid", "arguments must be JSON text")
    if not text.strip():
        return {}  # some providers send "" for a call without arguments
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        return failure_outcome("tool_arguments_invalid",
                               _clip(f"arguments are not valid JSON: {exc}"))
    if not isinstance(value, dict):
        return failure_outcome("tool_arguments_invalid", "arguments must be a JSON object, "
                               f"got {type(value).__name__}")
    if has_surrogate(value):  # never run on a name made up with U+FFFD in it
        return failure_outcome("tool_arguments_invalid", "arguments hold invalid Unicode (a "
                               "lone surrogate escape such as \\ud800 in a string); write "
                               "every path, name and text as valid Unicode")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _json_copy(value: Any) -> Any:
    """A detached, storable JSON copy: the handler cannot alter the saved arguments, the
    live raw value equals the one a resume reads back (tuples become lists), and a lone
    surrogate anywhere (keys included) becomes U+FFFD, as ``_json.storable`` does. With
    ``ensure_ascii=False`` a surrogate stays a raw character of the JSON text, always
    inside a string, so replacing it there is the same as replacing it in the value."""
    return json.loads(storable_text(json.dumps(value, ensure_ascii=False, allow_nan=False)))


def _clip(text: str, limit: int = _ERROR_MESSAGE_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
