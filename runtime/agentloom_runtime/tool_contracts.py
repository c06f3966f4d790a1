"""Tool definitions and the trusted context a handler receives (docs/contract.md#tools)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .bus import freeze_json

freeze = freeze_json  # a deep read-only copy of JSON config (one rule, in bus.py)

WORKSPACE_GROUP = "workspace"
"""The tool group that grants the workspace file tools (not ``workspace_command``): a
name agent files and sub-agent templates may list instead of the tools."""

Handler = Callable[["ToolContext", dict[str, Any]], Awaitable[Any]]
Availability = Callable[[Mapping[str, Any], str], bool]
PromptSection = Callable[[Mapping[str, Any], "str | None"], str]
"""(config, template) -> text appended to the system prompt of an instance that may use
the tool (``template``: its sub-agent template id, None for main); '' adds nothing. The
prompt is recorded when the instance starts, so a resume never re-renders it."""

ToolExecution = Literal["inline", "command", "delegate"]
"""inline: the handler runs inside the step. command: the step returns next=command and a
CommandRunner executes the spec the handler built. delegate: the call opens a child frame."""


def _always(config: Mapping[str, Any], instance: str) -> bool:
    return True


def _no_prompt(config: Mapping[str, Any], template: str | None) -> str:
    return ""


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Handler
    implementation_id: str
    tool_id: str = ""
    available: Availability = _always
    before_plan: bool = False  # usable in Plan mode before a plan exists
    resume_inflight: bool = False  # safe to run again when an earlier attempt's fate is unknown
    read_only: bool = False
    timeout: float = 60.0
    evidence_fields: tuple[str, ...] = ()
    execution: ToolExecution = "inline"
    prompt: PromptSection = _no_prompt  # e.g. the bound skills' names and descriptions

    def __post_init__(self) -> None:
        if not self.tool_id:
            object.__setattr__(self, "tool_id", self.name)

    def schema(self) -> dict[str, Any]:
        """The model-visible function schema."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}

    def fingerprint(self) -> str:
        """Everything that must not change under a resumed run (handler code excluded:
        bump ``implementation_id`` when behaviour changes)."""
        data = {"name": self.name, "description": self.description,
                "parameters": self.parameters, "implementation_id": self.implementation_id,
                "tool_id": self.tool_id, "before_plan": self.before_plan,
                "resume_inflight": self.resume_inflight, "read_only": self.read_only,
                "timeout": self.timeout, "evidence_fields": list(self.evidence_fields),
                "execution": self.execution}
        raw = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(raw).hexdigest()


class PlanAccess(Protocol):
    def get(self) -> list[dict[str, Any]]: ...

    def replace(self, steps: list[dict[str, Any]]) -> None: ...


@dataclass(frozen=True)
class ToolContext:
    """Built by the host for one call. Handlers never see the engine, frames or keys."""

    config: Mapping[str, Any]
    instance: str
    run_id: str
    call_id: str
    request_id: str
    uncertain: bool = False
    emit: Callable[[str, Mapping[str, Any]], None] = lambda topic, data: None
    plan: PlanAccess | None = None
    workspace: Any = None  # WorkspaceStorage of this instance, when the host binds one
    services: Mapping[str, Any] = field(default_factory=dict)
    template: str | None = None  # the instance's sub-agent template id; None for main
