"""Builders and a fake summarizer for the context tests (no network, no real model)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentloom_runtime.contracts import ContextInput, Message, ModelRequest, ModelResponse

SYSTEM: Message = {"role": "system", "content": "You are a careful agent."}
TASK = "Compile the quarterly report."


class Summarizer:
    """A fake ``ModelCall``: replies from a list (text or exception), then a default."""

    def __init__(self, *replies: str | BaseException, default: str = "Summary: did things.")\
            -> None:
        self.replies = list(replies)
        self.default = default
        self.requests: list[ModelRequest] = []

    async def __call__(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        reply = self.replies.pop(0) if self.replies else self.default
        if isinstance(reply, BaseException):
            raise reply
        return ModelResponse(content=reply)

    @property
    def materials(self) -> list[str]:
        return [str(r.messages[-1]["content"]) for r in self.requests]


def call_group(seq: int, n: int, size: int = 100, name: str = "search") -> list[Message]:
    calls = [{"id": f"c{seq}_{i}", "type": "function",
              "function": {"name": name, "arguments": json.dumps({"q": i})}}
             for i in range(n)]
    out: list[Message] = [{"role": "assistant", "content": None, "tool_calls": calls}]
    out += [{"role": "tool", "tool_call_id": c["id"], "content": f"r{seq}:" + "x" * size}
            for c in calls]
    return out


def conversation(turns: int, *, result_size: int = 400, task_at_end: bool = False,
                 seqs: bool = True) -> list[Message]:
    """system, [task], then ``turns`` × (user, call group, assistant answer) [, task]."""
    body: list[Message] = []
    for t in range(turns):
        body.append({"role": "user", "content": f"question {t}: " + "q" * 80})
        body += call_group(t, 1, result_size)
        body.append({"role": "assistant", "content": f"answer {t}: " + "a" * 80})
    task = {"role": "user", "content": TASK}
    messages = [SYSTEM, *body, task] if task_at_end else [SYSTEM, task, *body]
    if seqs:
        messages = [m if m is SYSTEM else {**m, "_seq": i} for i, m in enumerate(messages)]
    return messages


def context(messages: Sequence[Message], *, counters: dict[str, int] | None = None,
            plan: Sequence[dict[str, Any]] = (), tools: Sequence[dict[str, Any]] = ())\
        -> ContextInput:
    return ContextInput(task=TASK, plan=list(plan), messages=list(messages), instance="main",
                        tools=list(tools), counters=dict(counters or {}))


def record(seq: int, run: str, kind: str, message: Message | None,
           instance: str = "main", **extra: Any) -> dict[str, Any]:
    return {"seq": seq, "run_id": run, "instance": instance, "kind": kind,
            "message": message, **extra}


def assistant_calls(*ids: str, name: str = "search") -> Message:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": i, "type": "function",
                            "function": {"name": name, "arguments": "{}"}} for i in ids]}


def tool(call_id: str, content: str = "ok") -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}
