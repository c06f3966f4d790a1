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
