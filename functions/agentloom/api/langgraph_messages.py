"""The LangGraph facade's view of a thread's messages (``agentloom.api.langgraph``):
session records as LangChain's message dicts, revealed as the run's events go by."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentloom.platform.identity import Principal
from agentloom.platform.views import MessageItem

if TYPE_CHECKING:
    from agentloom.platform.sessions import SessionService


def lc_message(item: MessageItem) -> dict[str, Any] | None:
    """A session message as LangChain's message dict (system prompts are not shown)."""
    message, kind = item.message, item.kind
    role = message.get("role")
    content = message.get("content")
    out: dict[str, Any] = {"id": f"msg-{item.seq}", "content": content if isinstance(
        content, str) else json.dumps(content) if content is not None else ""}
    if kind == "tool_result" or role == "tool":
        return {**out, "type": "tool", "tool_call_id": message.get("tool_call_id")}
    if role == "user":
        return {**out, "type": "human"}
    if role == "assistant":
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            try:
                args = json.loads(function.get("arguments") or "{}")
            except ValueError:
                args = {"raw": function.get("arguments")}
            calls.append({"name": function.get("name"), "args": args, "id": call.get("id"),
                          "type": "tool_call"})
        return {**out, "type": "ai", "tool_calls": calls}
    return None


@dataclass
class ThreadMessages:
    """The thread's messages (main instance) as of a point in a run: those before the
    run and its question, then each of the run's messages as the event that made it
    goes by (a model reply at ``model.completed``, a tool result at ``tool.completed``)
    — the same parts whether the run is followed live or joined after it ended."""

    svc: SessionService
    who: Principal
    session_id: str
    run_id: str | None = None
    after: int = 0
    shown: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._read()
        if self.pending and self.pending[0]["type"] == "human":
            self.shown.append(self.pending.pop(0))

    def _read(self) -> None:
        while True:
            page = self.svc.messages(self.who, self.session_id, after=self.after, limit=200,
                                     instance="main")
            for item in page.items:
                message = lc_message(item)
                if message is not None:
                    mine = self.run_id is not None and item.run_id == self.run_id
                    (self.pending if mine else self.shown).append(message)
            self.after = page.next_after
            if len(page.items) < 200:
                return

    def reveal(self, kind: str) -> list[dict[str, Any]]:
        """The run's messages up to its next ``kind`` one (``ai`` | ``tool``)."""
        if not any(m["type"] == kind for m in self.pending):
            self._read()
        new: list[dict[str, Any]] = []
        while self.pending:
            new.append(self.pending.pop(0))
            if new[-1]["type"] == kind:
                break
        self.shown += new
        return new

    def values(self) -> dict[str, Any]:
        return {"messages": list(self.shown)}
