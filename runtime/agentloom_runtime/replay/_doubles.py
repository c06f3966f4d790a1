"""The replay's model and tools: they answer from the recording, never from the world.

``ReplayModel`` answers the k-th model call with the k-th recorded response, after
checking that the request is the one the run sent: against a *reference* request when
there is one (the requests of a replay of the run's own version: a full comparison,
with a diff), else against the recorded ``request_digest``. ``ReplayTools`` wraps each
tool definition of the catalog with a handler that answers from the recorded result of
the same call (by instance and call id): the definition (name, schema, prompt section)
stays what the model is shown, its handler is never called. A request that differs, a
call the recording lacks, or a tool call it has no result for raises ``ReplayDiverged``:
the engine stops the (throwaway) run there, and the divergence is kept for the report.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentloom_runtime.contracts import JSON, ModelRequest, ModelResponse
from agentloom_runtime.engine import RequestDigests
from agentloom_runtime.errors import RunError
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

from ._recording import Recording

DivergenceKind = Literal["request", "request_digest", "model_call", "tool_call",
                         "tool_arguments", "command_result"]
DIFF_LINES = 400  # a diff longer than this is cut (the rest is counted)


@dataclass
class Divergence:
    """Where a replay left the recording: ``step`` (1-based engine step of the replay),
    ``model_call`` (1-based, the calls made so far), what differs and how."""

    kind: DivergenceKind
    message: str
    model_call: int
    op_id: str | None = None
    purpose: str | None = None
    instance: str | None = None
    call_id: str | None = None
    diff: dict[str, Any] = field(default_factory=dict)
    step: int = 0

    def to_dict(self) -> JSON:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


class ReplayDiverged(RunError):
    """The replay left the recording (the throwaway run stops; see ``Divergence``)."""

    code = "replay_diverged"


class RecordingEnded(RunError):
    """The run asked for a model call the recording has no response for: where the
    recorded run stopped (a blocked run's unanswered call) or a longer path."""

    code = "replay_recording_ended"


class ReplayModel:
    module_id = "replay-model/v1"

    def __init__(self, recording: Recording,
                 reference: Sequence[ModelRequest] | None = None) -> None:
        self.recording = recording
        self.reference = reference
        self.requests: list[ModelRequest] = []
        self.divergence: Divergence | None = None
        self.ended = False
        self._digests = RequestDigests()

    def checkpoint_config(self) -> JSON:
        return {}

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        index = len(self.requests)
        self.requests.append(request)
        calls = self.recording.calls
        recorded = calls[index] if index < len(calls) else None
        where: dict[str, Any] = {
            "model_call": index + 1, "purpose": request.purpose, "instance": request.instance,
            "op_id": recorded.op_id if recorded is not None else None}
        if self.reference is not None and index < len(self.reference):
            before = self.reference[index]
            if not same_request(before, request):
                self._diverge(Divergence(
                    kind="request", message="the model request differs from the recorded "
                    "run's", diff=diff_requests(before, request), **where))
        elif recorded is not None and recorded.digest is not None \
                and recorded.digest != self._digests(request):
            self._diverge(Divergence(
                kind="request_digest", message="the model request's digest differs from "
                "the recorded one (the run records only a digest of each request)",
                diff={"recorded_digest": recorded.digest,
                      "replayed_digest": self._digests(request)}, **where))
        if recorded is None:
            self.ended = True
            raise RecordingEnded(f"the recording has no response for model call {index + 1}")
        if (recorded.purpose, recorded.instance) != (request.purpose, request.instance):
            self._diverge(Divergence(
                kind="model_call", message=f"the run made a {recorded.purpose} call of "
                f"{recorded.instance} here; the replay makes a {request.purpose} call of "
                f"{request.instance}", **where))
        return recorded.response

    def _diverge(self, divergence: Divergence) -> None:
        self.divergence = divergence
        raise ReplayDiverged(divergence.message)

    async def aclose(self) -> None:
        return None


class ReplayTools:
    """Wraps the catalog's definitions; records each call's arguments (a later replay
    of another version compares its own with them)."""

    def __init__(self, recording: Recording,
                 reference: Mapping[tuple[str, str], Any] | None = None) -> None:
        self.recording = recording
        self.reference = reference
        self.arguments: dict[tuple[str, str], Any] = {}
        self.divergence: Divergence | None = None
        self.ended = False
        self.model_calls = 0  # set by the driver: how many model calls came before

    def wrap(self, definitions: Sequence[ToolDefinition]) -> list[ToolDefinition]:
        return [dataclasses.replace(d, handler=self._handler(d)) for d in definitions]

    def _handler(self, definition: ToolDefinition) -> Any:
        async def answer(context: ToolContext, arguments: dict[str, Any]) -> Any:
            key = (context.instance, context.call_id)
            self.arguments[key] = arguments
            recorded = self.recording.tools.get(key)
            if recorded is None and context.request_id == self.recording.in_flight:
                self.ended = True  # where the recorded run stopped: its outcome is unknown
                raise RecordingEnded(f"the recorded run stopped on the call "
                                     f"{context.call_id} of {definition.name}")
            if recorded is None or recorded.name != definition.name:
                self.diverge("tool_call", f"the recording has no result for the call "
                             f"{context.call_id} of {definition.name} ({context.instance})",
                             call_id=context.call_id, instance=context.instance)
            before = (self.reference or {}).get(key, arguments)
            if before != arguments:
                self.diverge("tool_arguments", f"the call {context.call_id} of "
                             f"{definition.name} has other arguments than in the run",
                             call_id=context.call_id, instance=context.instance,
                             diff={"arguments": unified(before, arguments)})
            assert recorded is not None
            return recorded.answer(definition.execution)

        return answer

    def diverge(self, kind: DivergenceKind, message: str, **fields: Any) -> None:
        self.divergence = Divergence(kind=kind, message=message,
                                     model_call=self.model_calls, **fields)
        raise ReplayDiverged(message)


# -- comparing requests -------------------------------------------------------------------


def _plain(request: ModelRequest) -> dict[str, Any]:
    messages = [dict(m) for m in request.messages]
    system = messages.pop(0)["content"] if messages and messages[0].get("role") == "system" \
        else None
    return {"purpose": request.purpose, "instance": request.instance, "system": system,
            "messages": messages, "tools": [dict(t) for t in request.tools],
            "options": dict(request.options)}


def same_request(a: ModelRequest, b: ModelRequest) -> bool:
    return _plain(a) == _plain(b)


def diff_requests(recorded: ModelRequest, replayed: ModelRequest) -> dict[str, Any]:
    """Per part that differs (``purpose``, ``instance``, ``system`` prompt, ``messages``,
    ``tools``, ``options``): a unified diff from the recorded request to the replayed
    one; ``messages`` also says where the first differing message is."""
    a, b = _plain(recorded), _plain(replayed)
    out: dict[str, Any] = {}
    for part in ("purpose", "instance", "system", "messages", "tools", "options"):
        if a[part] == b[part]:
            continue
        out[part] = a[part] + " -> " + b[part] if part in ("purpose", "instance") \
            else unified(a[part], b[part])
    if "messages" in out:
        first = next((i for i, (x, y) in enumerate(zip(a["messages"], b["messages"],
                                                       strict=False)) if x != y),
                     min(len(a["messages"]), len(b["messages"])))
        out["first_message"] = {"index": first, "recorded_count": len(a["messages"]),
                                "replayed_count": len(b["messages"])}
    return out


def unified(recorded: Any, replayed: Any) -> str:
    """A unified diff of two JSON values (strings as their lines)."""
    def lines(value: Any) -> list[str]:
        text = value if isinstance(value, str) else json.dumps(
            value, indent=1, sort_keys=True, ensure_ascii=False)
        return text.splitlines()

    diff = list(difflib.unified_diff(lines(recorded), lines(replayed), "recorded",
                                     "replayed", n=2, lineterm=""))
    if len(diff) > DIFF_LINES:
        diff = [*diff[:DIFF_LINES], f"… {len(diff) - DIFF_LINES} more lines"]
    return "\n".join(diff)
