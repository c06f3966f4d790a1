"""Shared helpers for the hook tests: minimal valid payloads and scopes per point."""

from __future__ import annotations

import copy
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from agentloom_runtime.hooks import (
    Continue,
    HookBinding,
    HookDefinition,
    HookManager,
    HookRegistry,
    HookScope,
)

_ERROR = {"type": "ToolError", "code": "tool_error", "message": "boom"}

PAYLOADS: dict[str, dict[str, Any]] = {
    "model.chat.before": {"messages": [{"role": "user", "content": "hi"}], "tools": [],
                          "purpose": "action", "instance": "main",
                          "options": {"temperature": 0.2, "max_output_tokens": 1000}},
    "model.chat.after": {"purpose": "action", "instance": "main", "content": "hello",
                         "tool_calls": []},
    "model.embedding.before": {"purpose": "document", "texts": ["a", "b"]},
    "model.embedding.after": {"purpose": "document", "vectors": [[0.1, 0.2], [0.3, 0.4]]},
    "tool.before": {"call_id": "c1", "request_id": "r1", "name": "echo",
                    "arguments": {"text": "x"}, "instance": "main"},
    "tool.after": {"call_id": "c1", "request_id": "r1", "name": "echo", "instance": "main",
                   "arguments": {"text": "x"}, "status": "ok", "value": {"text": "x"},
                   "evidence_arguments": {"text": "x"}, "raw_value": {"text": "x"},
                   "has_raw_value": True},
    "context.prepare.before": {"instance": "main", "messages": [{"role": "user", "content": "q"}]},
    "context.prepare.after": {"instance": "main", "messages": [{"role": "user", "content": "q"}]},
    "context.compact.before": {"instance": "main", "messages": [{"role": "user", "content": "q"}]},
    "context.compact.after": {"instance": "main", "messages": [{"role": "user", "content": "s"}],
                              "summary": "summary text"},
    "run.before": {"run_id": "run-1", "instance": "main", "task": "do it"},
    "run.after": {"run_id": "run-1", "instance": "main", "status": "completed", "result": "ok"},
    "subagent.before": {"instance": "sub-1", "parent_instance": "main",
                        "subagent_id": "writer", "task": "write"},
    "subagent.after": {"instance": "sub-1", "parent_instance": "main",
                       "subagent_id": "writer", "status": "completed", "result": "done"},
    "operation.error": {"operation_id": "op-1", "kind": "tool", "instance": "main",
                        "error": _ERROR},
    "operation.finally": {"operation_id": "op-1", "kind": "tool", "instance": "main",
                          "status": "failed", "error": _ERROR},
}
POINTS = tuple(PAYLOADS)


def payload(point: str) -> dict[str, Any]:
    return copy.deepcopy(PAYLOADS[point])


def scope(point: str, **overrides: Any) -> HookScope:
    values: dict[str, Any] = {"run_id": "run-1", "instance": "main"}
    if point.startswith("model.chat."):
        values["purpose"] = "action"
    elif point.startswith("model.embedding."):
        values["purpose"] = "document"
    elif point.startswith("tool."):
        values["tool"] = "echo"
    values.update(overrides)
    return HookScope(**values)


Handler = Callable[..., Any]


def returning(result: Any) -> Handler:
    """A handler returning ``result`` (defined in this file: source identity)."""
    async def handler(ctx: Any, data: dict[str, Any]) -> Any:
        return result
    return handler


async def cont(ctx: Any, data: dict[str, Any]) -> Continue:
    return Continue()


def manager(hooks: Sequence[tuple[str, Handler]] | Sequence[HookDefinition],
            bindings: Sequence[HookBinding], **kwargs: Any) -> HookManager:
    registry = HookRegistry()
    for item in hooks:
        if isinstance(item, HookDefinition):
            registry.register(item)
        else:
            registry.register(HookDefinition(item[0], "1", item[1]))
    return HookManager(registry, bindings, **kwargs)


def single(point: str, handler: Handler, **definition: Any) -> HookManager:
    registry = HookRegistry([HookDefinition("h", "1", handler, **definition)])
    return HookManager(registry, [HookBinding("h", "1", point)])


DYNAMIC = textwrap.dedent('''
    async def handler(ctx, payload, *, limit=3, tags=("a", "b")):
        names = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}
        def inner(x):
            return x in {"one", "two", "three", "four", "five", "six"}
        if payload.get("tool") in names and inner(payload.get("k")):
            return {"ratio": 1.5, "big": 10**30, "raw": b"\\x00\\x01", "c": 2j}
        return None
''')


def dynamic(source: str = DYNAMIC) -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<generated>", "exec", dont_inherit=True), namespace)
    return namespace["handler"]
