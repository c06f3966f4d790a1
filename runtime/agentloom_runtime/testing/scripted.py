"""``ScriptedModel``: a ModelGateway double that plays a fixed script.

A fake, not a mock: each call consumes the next step, and anything the test did not plan
for fails loudly — a call past the end of the script, a call with the wrong ``purpose``,
or steps left over at the end (``assert_consumed``). Replies pass through the same
validation as the real gateway, so a script cannot hand the runtime a response that a
provider's answer would never produce (duplicate call ids, non-JSON arguments, …).
``validate=False`` hands them over as given instead (``as_given``): for the tests of
what the runtime itself does with a response no gateway would let through (duplicate
ids in one message, unsanitized text).

Recorded requests (``requests``) keep the caller's message dicts by reference, in a
shallow copy of the message list: what the caller appends to its list later does not
show, but a message changed in place would. Never mutate a recorded request or a message
after sending it (the runtime never does: a message is a value once it is in a view).
"""

from __future__ import annotations

import inspect
import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

from agentloom_runtime.contracts import JSON, ModelRequest, ModelResponse, Purpose, ToolCall
from agentloom_runtime.model.gateway import validate_message

Reply: TypeAlias = (ModelResponse | Mapping[str, Any] | Callable[[ModelRequest], Any]
                    | BaseException)
"""A response, a normalized assistant message dict, a callable of the request returning
either (or an awaitable of either, for ``ScriptedModel``), or an exception to raise."""

Decision = Literal["complete", "continue", "blocked"]

_call_ids = itertools.count(1)


class ScriptExhausted(AssertionError):
    """The model was called more times than the script has steps."""


class UnexpectedCall(AssertionError):
    """The call does not match the step (wrong purpose) or came after ``aclose``."""


class ScriptNotConsumed(AssertionError):
    """Steps were left over: the code under test stopped earlier than the test expected."""


@dataclass(frozen=True)
class Step:
    """One scripted reply, optionally only valid for a request of ``purpose``."""

    reply: Reply
    purpose: Purpose | None = None


def as_step(item: Reply | Step) -> Step:
    """Wrap a bare reply; refuse anything that could never play, at construction time."""
    step = item if isinstance(item, Step) else Step(item)
    if not isinstance(step.reply, ModelResponse | Mapping | BaseException) \
            and not callable(step.reply):
        raise TypeError(f"not a script step: {type(step.reply).__name__}")
    return step


def to_response(value: Any) -> ModelResponse:
    """Validate a reply the way the gateway validates a provider's message."""
    if isinstance(value, ModelResponse):
        return validate_message(value.message(), usage=value.usage)
    if isinstance(value, Mapping):
        usage = value.get("usage")
        return validate_message(value, usage=usage if isinstance(usage, Mapping) else None)
    raise TypeError(f"a script step produced {type(value).__name__}, not a ModelResponse")


def as_given(value: Any) -> ModelResponse:
    """A reply as given, unvalidated and unsanitized (``validate=False``)."""
    if isinstance(value, ModelResponse):
        return value
    if isinstance(value, Mapping):
        return ModelResponse.from_dict(value)
    raise TypeError(f"a script step produced {type(value).__name__}, not a ModelResponse")


def describe(request: ModelRequest) -> str:
    return f"purpose={request.purpose!r}, instance={request.instance!r}, " \
           f"{len(request.messages)} messages, {len(request.tools)} tools"


def snapshot(request: ModelRequest) -> ModelRequest:
    """The request with its own message list (the messages themselves are shared): the
    caller may go on appending to its list. O(messages) pointers, never a deep copy."""
    return replace(request, messages=list(request.messages))


class ScriptedModel:
    """Plays ``steps`` in order; records every request in ``requests``."""

    module_id = "scripted/v1"

    def __init__(self, steps: Iterable[Reply | Step] = (), *, validate: bool = True) -> None:
        self._steps = [as_step(s) for s in steps]
        self._next = 0
        self._validate = validate
        self.requests: list[ModelRequest] = []
        self.closed = False

    def __repr__(self) -> str:
        return f"ScriptedModel({self._next}/{len(self._steps)} steps played)"

    # -------------------------------------------------------------- building replies

    @staticmethod
    def answer(text: str, *, reasoning: str | None = None) -> ModelResponse:
        """A final answer."""
        return ModelResponse(content=text, reasoning_content=reasoning)

    @staticmethod
    def call(name: str, args: Mapping[str, Any] | None = None, id: str | None = None,
             *, content: str | None = None) -> ModelResponse:
        """One tool call; the id defaults to a fresh ``call_<n>`` unique in this process."""
        call_id = id if id is not None else f"call_{next(_call_ids)}"
        arguments = json.dumps(dict(args or {}), ensure_ascii=False)
        return ModelResponse(content=content,
                             tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),))

    @staticmethod
    def verdict(decision: Decision, reason: str = "", next_action: str = "") -> ModelResponse:
        """A completion review in the JSON shape ``evidence-review/v1`` parses."""
        if decision not in ("complete", "continue", "blocked"):
            raise ValueError(f"unknown decision {decision!r}")
        return ModelResponse(content=json.dumps(
            {"decision": decision, "reason": reason, "next_action": next_action},
            ensure_ascii=False))

    # -------------------------------------------------------------- the port

    def checkpoint_config(self) -> JSON:
        return {}

    def extend(self, *steps: Reply | Step) -> None:
        self._steps.extend(as_step(s) for s in steps)

    @property
    def remaining(self) -> int:
        return len(self._steps) - self._next

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(snapshot(request))
        number = len(self.requests)
        if self.closed:
            raise UnexpectedCall(f"model call #{number} after aclose() ({describe(request)})")
        if self._next >= len(self._steps):
            raise ScriptExhausted(f"unexpected model call #{number} ({describe(request)}): "
                                  f"the script has only {len(self._steps)} steps")
        step = self._steps[self._next]
        self._next += 1
        if step.purpose is not None and step.purpose != request.purpose:
            raise UnexpectedCall(f"model call #{number} expected purpose={step.purpose!r}, "
                                 f"got ({describe(request)})")
        reply = step.reply
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            reply = reply(request)
            if inspect.isawaitable(reply):
                reply = await reply
        return to_response(reply) if self._validate else as_given(reply)

    def assert_consumed(self) -> None:
        if self.remaining:
            raise ScriptNotConsumed(f"{self.remaining} of {len(self._steps)} scripted steps "
                                    f"were not played ({len(self.requests)} calls made)")

    async def aclose(self) -> None:
        self.closed = True
