from __future__ import annotations

from typing import Any

from agentloom_runtime.snapshot import AgentSnapshot, parse_snapshot
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

COUNT_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}},
                "required": ["text"], "additionalProperties": False}


def make_snapshot(**overrides: Any) -> AgentSnapshot:
    data: dict[str, Any] = {"agent_id": "tester", "prompt": "You are a test agent.",
                            "model": {"model": "scripted"}}
    data.update(overrides)
    return parse_snapshot(data)


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


PLAN_OPEN = {"steps": [{"id": "1", "title": "count words", "status": "in_progress"},
                       {"id": "2", "title": "send mail", "status": "pending"}]}
PLAN_DONE = {"steps": [{"id": "1", "title": "count words", "status": "completed"},
                       {"id": "2", "title": "send mail", "status": "completed"}]}


def representative_script() -> list[Any]:
    from agentloom_runtime.testing import ScriptedModel

    return [
        ScriptedModel.call("update_plan", PLAN_OPEN, id="c1"),
        ScriptedModel.call("count_words", {"text": "one two three"}, id="c2"),
        ScriptedModel.call("send_mail", {"to": "ops@example.com"}, id="c3"),
        ScriptedModel.call("update_plan", PLAN_DONE, id="c4"),
        ScriptedModel.answer("Counted 3 words and mailed ops."),
    ]


async def drive(engine: Any, limit: int = 500) -> Any:
    """Step until the run is done; fail if it does not end within ``limit`` steps."""
    for _ in range(limit):
        result = await engine.step()
        if result.next == "done":
            return result
    raise AssertionError(f"the run did not end within {limit} steps")
