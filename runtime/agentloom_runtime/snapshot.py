"""The published agent snapshot: one typed, versioned, frozen model.

A team edits a draft; publishing freezes it into an ``AgentSnapshot``. A run holds the
snapshot it started with for its whole life — later drafts never change an old run. The
agent file the CLI reads is this model in YAML.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import SnapshotError

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConnection(_Frozen):
    """Where and how to reach the chat model. Keys are references, never values."""

    dialect: Literal["openai", "deepseek"] = "openai"
    base_url: str = "https://api.openai.com/v1"
    model: str = Field(min_length=1, max_length=200)
    api_key_ref: str | None = Field(
        default=None, description="Name of the secret holding the key (env var in embedded "
        "mode, secret id in AWS). The key itself never appears in a snapshot.")
    context_window: int = Field(default=32_768, ge=1_024, le=10_000_000)
    max_output_tokens: int = Field(default=4_096, ge=16, le=1_000_000)
    safety_margin_tokens: int = Field(default=1_024, ge=0, le=1_000_000)
    temperature: float | None = Field(default=None, ge=0, le=2)
    timeout_seconds: float = Field(default=120.0, gt=0, le=900)

    @model_validator(mode="after")
    def _budget(self) -> ModelConnection:
        if self.context_window - self.max_output_tokens - self.safety_margin_tokens <= 0:
            raise ValueError("context_window must exceed max_output_tokens + "
                             "safety_margin_tokens (no input budget left)")
        return self


class ContextPolicy(_Frozen):
    context_ratio: float = Field(default=0.8, gt=0, le=1)
    target_ratio: float = Field(default=0.6, gt=0, lt=1)
    user_turns: int | None = Field(default=None, ge=1)
    model_steps: int | None = Field(default=None, ge=1)
    max_compaction_calls: int = Field(default=4, ge=1, le=16)

    @model_validator(mode="after")
    def _ratios(self) -> ContextPolicy:
        if not 0 < self.target_ratio < self.context_ratio <= 1:
            raise ValueError("ratios must satisfy 0 < target_ratio < context_ratio <= 1")
        return self


class SubAgentTemplate(_Frozen):
    """A duty template for delegation: no model, mode or nested subs (seed 002 §7)."""

    id: str = Field(pattern=NAME)
    name: str = Field(min_length=1, max_length=100)
    duty: str = Field(min_length=1, max_length=2_000)
    prompt: str = Field(default="", max_length=50_000)
    tools: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()
    knowledge_bases: tuple[str, ...] = ()


class HookBindingSpec(_Frozen):
    hook_id: str = Field(min_length=1, max_length=200)
    version: str = Field(min_length=1, max_length=50)
    point: str = Field(min_length=1, max_length=100)
    priority: int = Field(default=100, ge=-10_000, le=10_000)
    match: dict[str, list[str]] = Field(default_factory=dict)
    timeout: float = Field(default=1.0, gt=0, le=60)
    config: dict[str, Any] = Field(default_factory=dict)


class Limits(_Frozen):
    max_model_calls: int = Field(default=96, ge=1, le=10_000)
    max_iterations: int = Field(default=64, ge=1, le=10_000)
    max_children: int = Field(default=8, ge=0, le=8)


class AgentSnapshot(_Frozen):
    """A published, immutable agent version."""

    format: Literal[1] = 1
    space_id: str = Field(default="local", pattern=NAME)
    agent_id: str = Field(pattern=NAME)
    version: int = Field(default=1, ge=1)
    name: str = Field(default="", max_length=200)
    prompt: str = Field(default="", max_length=200_000)
    model: ModelConnection
    mode: Literal["react", "plan"] = "react"
    tools: tuple[str, ...] = Field(
        default=(), description="Built-in tool groups or names: 'workspace' (file tools), "
        "'workspace_command', 'update_plan' is always bound.")
    skills: tuple[str, ...] = ()
    knowledge_bases: tuple[str, ...] = ()
    subagents: tuple[SubAgentTemplate, ...] = Field(default=(), max_length=10)
    hooks: tuple[HookBindingSpec, ...] = ()
    context_policy: ContextPolicy | None = None
    limits: Limits = Limits()

    @model_validator(mode="after")
    def _unique_subagents(self) -> AgentSnapshot:
        ids = [s.id for s in self.subagents]
        if len(ids) != len(set(ids)):
            raise ValueError("sub-agent ids must be unique")
        return self


def format_validation_error(err: ValidationError) -> str:
    lines = []
    for item in err.errors()[:20]:
        where = ".".join(str(p) for p in item["loc"]) or "(top level)"
        lines.append(f"  {where}: {item['msg']}")
    return "\n".join(lines)


def parse_snapshot(data: Any, *, source: str = "snapshot") -> AgentSnapshot:
    if not isinstance(data, dict):
        raise SnapshotError(f"{source}: expected a mapping at the top level")
    try:
        return AgentSnapshot.model_validate(data)
    except ValidationError as err:
        raise SnapshotError(f"{source} is not a valid agent:\n{format_validation_error(err)}",
                            details={"errors": len(err.errors())}) from None


def load_agent_file(path: str | Path) -> AgentSnapshot:
    """Read an agent YAML file; every problem becomes a ``SnapshotError`` naming the field."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise SnapshotError(f"cannot read agent file {p}: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SnapshotError(f"{p} is not valid YAML: {err}") from None
    return parse_snapshot(data, source=str(p))
