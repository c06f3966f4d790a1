"""``FunctionModel``: a ModelGateway double whose reply is a function of the request.

Where ``ScriptedModel`` plays replies in a fixed order, ``FunctionModel(fn)`` asks
``fn(request)`` every time, so the answer can depend on the purpose, the last tool
result or the number of messages — useful when the number of calls is not the point of
the test (compaction, reviews, retries). ``fn`` returns (or, if async, resolves to):

- a ``ModelResponse`` (e.g. ``ScriptedModel.call("read", {...})`` or
  ``ScriptedModel.verdict("complete")``);
- a ``str``: a final answer with that text;
- a normalized assistant message dict (``{"role": "assistant", "content": ...}``);
- an exception instance, which is raised (a ``ModelError`` to simulate a provider
  failure).

Replies go through the gateway's validation, like ``ScriptedModel``'s (``validate=False``
hands them over as given, as ``ScriptedModel`` can). Requests are
recorded in ``requests`` (a shallow copy of each message list; never mutate them). A
call after ``aclose()`` raises ``UnexpectedCall``. It has the attributes a test driver
uses on ``ScriptedModel`` (``requests``, ``closed``, ``assert_consumed``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

from agentloom_runtime.contracts import JSON, ModelRequest, ModelResponse

from .scripted import UnexpectedCall, as_given, describe, snapshot, to_response

FunctionReply: TypeAlias = ModelResponse | str | Mapping[str, Any] | BaseException
ReplyFunction: TypeAlias = Callable[[ModelRequest],
                                    FunctionReply | Awaitable[FunctionReply]]


class FunctionModel:
    """Answers every request with ``fn(request)``; records the requests."""

    module_id = "function-model/v1"

    def __init__(self, fn: ReplyFunction, *, validate: bool = True) -> None:
        if not callable(fn):
            raise TypeError(f"FunctionModel needs a callable, not {type(fn).__name__}")
        self.fn = fn
        self._validate = validate
        self.requests: list[ModelRequest] = []
        self.closed = False

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", type(self.fn).__name__)
        return f"FunctionModel({name}, {len(self.requests)} calls)"

    def checkpoint_config(self) -> JSON:
        return {}

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(snapshot(request))
        if self.closed:
            raise UnexpectedCall(f"model call #{len(self.requests)} after aclose() "
                                 f"({describe(request)})")
        reply: Any = self.fn(request)
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, BaseException):
            raise reply
        response = ModelResponse(content=reply) if isinstance(reply, str) else reply
        return to_response(response) if self._validate else as_given(response)

    def assert_consumed(self) -> None:
        """Nothing to check: a function has no scripted steps to leave unplayed (here so
        a test driver can treat both doubles alike)."""

    async def aclose(self) -> None:
        self.closed = True
