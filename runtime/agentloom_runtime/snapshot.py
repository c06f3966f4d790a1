"""The published agent snapshot: one typed, versioned, frozen model.

A team edits a draft; publishing freezes it into an ``AgentSnapshot``. A run holds the
snapshot it started with for its whole life — later drafts never change an old run. The
agent file the CLI reads is this model in YAML.

A snapshot without ``context_policy`` gets the default budget policy; only one marked
``legacy: true`` (a version published before budget policies existed) keeps
``context_policy is None``, which selects the character policy (docs/contract.md#compaction).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .contracts import DEFAULT_RUN_TOKENS as DEFAULT_RUN_TOKENS  # re-exported: its old home
from .errors import SnapshotError
from .tool_contracts import WORKSPACE_GROUP

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
MAX_AGENT_FILE_BYTES = 1024 * 1024

# Built-in tools a snapshot can name (workspace/file_tools.py defines them; a unit test
# keeps this table equal to it). The WORKSPACE_GROUP ("workspace") grants the file tools,
# without commands.
WORKSPACE_FILE_TOOLS = ("workspace_list", "workspace_stat", "workspace_glob",
                        "workspace_grep", "workspace_read", "workspace_write",
                        "workspace_edit", "workspace_mkdir", "workspace_delete")
TOOL_GROUPS: dict[str, tuple[str, ...]] = {WORKSPACE_GROUP: WORKSPACE_FILE_TOOLS}
BUILTIN_TOOLS = (*WORKSPACE_FILE_TOOLS, "workspace_command")
ALWAYS_BOUND = ("update_plan", "read_result")  # naming them is allowed and changes nothing
AGENT_TOOLS = frozenset({*TOOL_GROUPS, *BUILTIN_TOOLS, *ALWAYS_BOUND})
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # the tool registry's rule
# A skill binding: the name (a draft; a names-only snapshot) or, once published, the name
# pinned to its content hash: "pdf-tools@sha256:<64 hex>" (agentloom.skills).
SKILL_REF = re.compile(r"(?P<name>[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?)"
                       r"(?:@(?P<hash>sha256:[0-9a-f]{64}))?")
_BUILTIN_PREFIX = "workspace"


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
    timeout_seconds: float = Field(
        default=120.0, gt=0, le=900, description="Total deadline of one model request "
        "attempt: connect, send and the whole response.")
    estimator: Literal["utf8-bytes", "openai-o200k", "openai-cl100k", "deepseek"] | None = \
        Field(default=None, description="Token estimator for the context budget. Unset: a "
              "vendor tokenizer only for an exact known model id at the vendor's own "
              "endpoint, else utf8-bytes (conservative). Set it for a proxy or a "
              "self-hosted model whose tokenizer you know.")
    input_price_per_million: float | None = Field(
        default=None, ge=0, le=1_000_000, allow_inf_nan=False, description="Price of one "
        "million prompt tokens (the platform's currency). With the output price it gives "
        "each model call's cost and makes limits.max_cost possible.")
    output_price_per_million: float | None = Field(
        default=None, ge=0, le=1_000_000, allow_inf_nan=False,
        description="Price of one million completion tokens.")

    @property
    def priced(self) -> bool:
        return self.input_price_per_million is not None and \
            self.output_price_per_million is not None

    @model_validator(mode="after")
    def _budget(self) -> ModelConnection:
        if self.context_window - self.max_output_tokens - self.safety_margin_tokens <= 0:
            raise ValueError("context_window must exceed max_output_tokens + "
                             "safety_margin_tokens (no input budget left)")
        return self


class ContextPolicy(_Frozen):
    """The budget policy (docs/contract.md#thresholds). Strict: ratios are real numbers, counts are
    integers; booleans and numeric strings are refused rather than coerced."""

    model_config = ConfigDict(strict=True)

    context_ratio: float = Field(default=0.8, gt=0, le=1, allow_inf_nan=False)
    target_ratio: float = Field(default=0.6, gt=0, lt=1, allow_inf_nan=False)
    user_turns: int | None = Field(default=None, ge=1)
    model_steps: int | None = Field(default=None, ge=1)
    max_compaction_calls: int = Field(default=4, ge=1, le=16)

    @model_validator(mode="after")
    def _ratios(self) -> ContextPolicy:
        if not 0 < self.target_ratio < self.context_ratio <= 1:
            raise ValueError(f"target_ratio ({self.target_ratio:g}) must be below "
                             f"context_ratio ({self.context_ratio:g}): "
                             "0 < target_ratio < context_ratio <= 1")
        return self


def _unknown(names: Iterable[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _check_agent_tools(names: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [n for n in names if n not in AGENT_TOOLS]
    if unknown:
        raise ValueError(f"unknown tool group or tool {_unknown(unknown)}; allowed: "
                         f"{', '.join(sorted(AGENT_TOOLS))}")
    return names


def skill_name(ref: str) -> str:
    """The name of a skill binding (``name`` or ``name@sha256:…``)."""
    return ref.split("@", 1)[0]


def _check_skills(refs: tuple[str, ...]) -> tuple[str, ...]:
    bad = [r for r in refs if not SKILL_REF.fullmatch(r)]
    if bad:
        raise ValueError(f"invalid skill reference(s) {_unknown(bad)}: a skill name (1-64 "
                         "lowercase letters, digits, hyphens), optionally pinned as "
                         "name@sha256:<64 hex>")
    names = [skill_name(r) for r in refs]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise ValueError(f"skill(s) bound twice: {_unknown(doubled)}")
    return refs


def _check_template_tools(names: tuple[str, ...]) -> tuple[str, ...]:
    """A template may grant the main agent's tools, host-registered ones included, so a
    name outside the built-in ``workspace`` family is only checked for form."""
    builtin = [n for n in names if n.startswith(_BUILTIN_PREFIX) and n not in AGENT_TOOLS]
    if builtin:
        raise ValueError(f"unknown tool group or tool {_unknown(builtin)}; built-in "
                         f"names: {', '.join(sorted(AGENT_TOOLS))}")
    if "delegate_task" in names:
        raise ValueError("'delegate_task' cannot be granted: a sub-agent cannot delegate")
    malformed = [n for n in names if not _TOOL_NAME.fullmatch(n)]
    if malformed:
        raise ValueError(f"invalid tool names {_unknown(malformed)}: a tool name matches "
                         "^[A-Za-z0-9_-]{1,64}$")
    return names


class SubAgentTemplate(_Frozen):
    """A delegation duty template: no model, mode or nested subs (docs/contract.md#sub-agents)."""

    id: str = Field(pattern=NAME)
    name: str = Field(min_length=1, max_length=100)
    duty: str = Field(min_length=1, max_length=2_000)
    prompt: str = Field(default="", max_length=50_000)
    tools: tuple[str, ...] = Field(
        default=(), description="What the sub-agent may use of the main agent's tools: "
        "built-in names or groups ('workspace') and host-registered tool names. Empty "
        "grants none (update_plan and read_result are always bound).")
    skills: tuple[str, ...] = Field(
        default=(), description="Which of the main agent's skills the sub-agent sees "
        "(names); it also needs 'skill_load' (and 'skill_read') in tools.")
    knowledge_bases: tuple[str, ...] = ()

    _tools = field_validator("tools")(_check_template_tools)
    _skills = field_validator("skills")(_check_skills)


class McpToolBinding(_Frozen):
    """One tool of a space's MCP resource bound to the agent. The draft names
    ``resource_id`` and ``tool`` (and may choose ``alias``); publish fills in the rest
    from the server's listing, so a version keeps the schema it was published with and
    a run refuses a server whose schema changed since."""

    resource_id: str = Field(min_length=1, max_length=64)
    tool: str = Field(min_length=1, max_length=128, description="The remote tool's name.")
    alias: str | None = Field(
        default=None, pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$", description="The name the "
        "model sees (unique in the agent); publish derives one when unset.")
    description: str = Field(default="", max_length=10_000)
    parameters: dict[str, Any] | None = Field(
        default=None, description="The published input schema (set at publish).")
    schema_digest: str = Field(default="", max_length=80)
    read_only_hint: bool = False
    idempotent_hint: bool = False
    trust_annotations: bool = Field(
        default=False, description="The resource's flag at publish: only then do the "
        "hints let a call of unknown outcome run again (uncertain) instead of blocking.")


class HookBindingSpec(_Frozen):
    hook_id: str = Field(min_length=1, max_length=200)
    version: str = Field(min_length=1, max_length=50)
    point: str = Field(min_length=1, max_length=100)
    priority: int = Field(default=100, ge=-10_000, le=10_000)
    match: dict[str, list[str]] = Field(default_factory=dict)
    timeout: float = Field(default=1.0, gt=0, le=60)
    config: dict[str, Any] = Field(default_factory=dict)


_PackagePath = Annotated[str, Field(min_length=1, max_length=4096)]


class Limits(_Frozen):
    """``max_model_calls`` and ``max_iterations`` are per execution (a resume starts them
    again); ``max_tokens`` and ``max_cost`` are per run, over every execution."""

    max_model_calls: int = Field(default=96, ge=1, le=10_000)
    max_iterations: int = Field(default=64, ge=1, le=10_000)
    max_children: int = Field(default=8, ge=0, le=8)
    max_tokens: int = Field(
        default=DEFAULT_RUN_TOKENS, ge=1, le=10**12, description="Per-run cap of provider "
        "tokens (prompt + completion) over every model call: action, compaction, review, "
        "all sub-agents and executions, so a resume never spends without end. Unset or "
        "null: 2,000,000 (a version published before the default gets it when loaded). "
        "Checked before each call against the call's estimated input plus its output "
        "limit: a call that could cross the cap is not sent and the run blocks "
        "(budget_exceeded) until an operator resumes it with a raised budget.")
    max_cost: float | None = Field(
        default=None, gt=0, le=10**9, allow_inf_nan=False, description="Per-run cost "
        "budget, from the model connection's prices (which it requires); like max_tokens.")

    @field_validator("max_tokens", mode="before")
    @classmethod
    def _default_cap(cls, value: Any) -> Any:
        """A stored version published before the default cap says null: it gets it."""
        return DEFAULT_RUN_TOKENS if value is None else value


class AgentSnapshot(_Frozen):
    """A published, immutable agent version."""

    format: Literal[1] = 1
    legacy: bool = Field(
        default=False, strict=True, description="A version published before budget "
        "policies: without context_policy it keeps the character policy instead of getting "
        "the default.")
    space_id: str = Field(default="local", pattern=NAME)
    agent_id: str = Field(pattern=NAME)
    version: int = Field(default=1, ge=1)
    name: str = Field(default="", max_length=200)
    prompt: str = Field(default="", max_length=200_000)
    model: ModelConnection
    mode: Literal["react", "plan"] = "react"
    tools: tuple[str, ...] = Field(
        default=(), description="Built-in tool groups or names: 'workspace' (the file "
        "tools), 'workspace_command', single workspace_* tools; 'update_plan' and "
        "'read_result' are always bound. Host-registered tools are not listed here.")
    skills: tuple[str, ...] = ()
    knowledge_bases: tuple[str, ...] = ()
    mcp_tools: tuple[McpToolBinding, ...] = Field(
        default=(), max_length=64, description="Tools of the space's MCP resources (see "
        "docs/mcp.md); aliases must be unique and not a built-in tool's name.")
    subagents: tuple[SubAgentTemplate, ...] = Field(default=(), max_length=10)
    hooks: tuple[HookBindingSpec, ...] = ()
    hook_packages: tuple[_PackagePath, ...] = Field(
        default=(), max_length=20, description="Where the host finds the trusted code of "
        "the bound hooks: hook packages (folders or zip files, see hooks/package.py). The "
        "embedded CLI reads paths; in an agent file a relative path is relative to the "
        "file. Each package's code hash is bound into a run, so a changed package blocks "
        "the resume of runs that used it.")
    context_policy: ContextPolicy | None = Field(
        default=None, description="Absent: the default budget policy. Stays None (the "
        "character policy) only in a legacy snapshot.")
    limits: Limits = Limits()

    _tools = field_validator("tools")(_check_agent_tools)
    _skills = field_validator("skills")(_check_skills)

    @model_validator(mode="before")
    @classmethod
    def _default_policy(cls, data: Any) -> Any:
        """A new snapshot without ``context_policy`` gets the default budget policy."""
        if isinstance(data, dict) and data.get("legacy") is not True \
                and "context_policy" not in data:
            return {**data, "context_policy": {}}
        return data

    @field_validator("context_policy", mode="before")
    @classmethod
    def _explicit_null(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None and info.data.get("legacy") is not True:
            raise ValueError("null is not a policy; omit context_policy for the default "
                             "budget policy, or set legacy: true to keep the character "
                             "policy of a version published before budget policies")
        return value

    @model_validator(mode="after")
    def _cost_needs_prices(self) -> AgentSnapshot:
        if self.limits.max_cost is not None and not self.model.priced:
            raise ValueError("limits.max_cost needs the model connection's prices "
                             "(model.input_price_per_million and "
                             "model.output_price_per_million)")
        return self

    @model_validator(mode="after")
    def _unique_mcp_aliases(self) -> AgentSnapshot:
        aliases = [b.alias for b in self.mcp_tools if b.alias is not None]
        taken = [a for a in aliases if a in AGENT_TOOLS or a.startswith(_BUILTIN_PREFIX)]
        if taken:
            raise ValueError(f"mcp_tools aliases {_unknown(taken)} are built-in tool names")
        if len(aliases) != len(set(aliases)):
            raise ValueError("mcp_tools aliases must be unique")
        return self

    @model_validator(mode="after")
    def _template_skills(self) -> AgentSnapshot:
        """A template's skills are some of the agent's, and it can load them."""
        bound = {skill_name(r) for r in self.skills}
        for index, template in enumerate(self.subagents):
            names = [skill_name(r) for r in template.skills]
            unbound = [n for n in names if n not in bound]
            if unbound:
                raise ValueError(f"subagents[{index}].skills: {_unknown(unbound)} not among "
                                 "the agent's skills")
            if names and "skill_load" not in template.tools:
                raise ValueError(f"subagents[{index}] lists skills but cannot load them: "
                                 "add 'skill_load' (and 'skill_read') to its tools")
        return self

    @model_validator(mode="after")
    def _unique_subagents(self) -> AgentSnapshot:
        ids = [s.id for s in self.subagents]
        if len(ids) != len(set(ids)):
            raise ValueError("sub-agent ids must be unique")
        return self


def format_validation_error(err: ValidationError) -> str:
    """One line per problem: the field path, the message, and a scalar input as given
    (``user_turns: Input should be a valid integer (got True)``)."""
    lines = []
    for item in err.errors()[:20]:
        where = ".".join(str(p) for p in item["loc"]) or "(top level)"
        message = item["msg"].removeprefix("Value error, ")
        given = item.get("input")
        if item["type"] != "value_error" and isinstance(given, bool | int | float | str) \
                and not item["type"].startswith("missing"):
            message += f" (got {given!r:.80})"
        lines.append(f"  {where}: {message}")
    return "\n".join(lines)


def parse_snapshot(data: Any, *, source: str = "snapshot") -> AgentSnapshot:
    if not isinstance(data, dict):
        raise SnapshotError(f"{source}: expected a mapping at the top level")
    try:
        return AgentSnapshot.model_validate(data)
    except ValidationError as err:
        raise SnapshotError(f"{source} is not a valid agent:\n{format_validation_error(err)}",
                            details={"errors": len(err.errors())}) from None


def _read_agent_file(p: Path) -> str:
    """The text of a regular file of at most ``MAX_AGENT_FILE_BYTES``. The open never
    blocks (a FIFO without a writer) and nothing but a regular file is read (``/dev/zero``
    would never end)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(
        os, "O_NOCTTY", 0)
    try:
        fd = os.open(p, flags)
    except FileNotFoundError:
        raise SnapshotError(f"agent file {p} does not exist") from None
    except IsADirectoryError:
        raise SnapshotError(f"agent file {p} is a directory, not a file") from None
    except OSError as err:
        reason = err.strerror or errno.errorcode.get(err.errno or 0, "error")
        raise SnapshotError(f"cannot read agent file {p}: {reason}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise SnapshotError(f"agent file {p} is a directory, not a file")
        if not stat.S_ISREG(mode):
            raise SnapshotError(f"agent file {p} is not a regular file (a device, pipe or "
                                "socket); give the path of a YAML file")
        with os.fdopen(fd, "rb", closefd=False) as stream:
            data = stream.read(MAX_AGENT_FILE_BYTES + 1)
    except OSError as err:
        raise SnapshotError(f"cannot read agent file {p}: {err.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_AGENT_FILE_BYTES:
        raise SnapshotError(f"agent file {p} is larger than {MAX_AGENT_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise SnapshotError(f"agent file {p} is not UTF-8 text (invalid byte at offset "
                            f"{err.start})") from None


def load_agent_file(path: str | Path) -> AgentSnapshot:
    """Read an agent YAML file; every problem becomes a ``SnapshotError`` (a
    ``ConfigError``) with a message for a person: a missing file, a directory, a device or
    pipe, a file over 1 MB, text that is not UTF-8 or not YAML, a field that is invalid.
    Relative ``hook_packages`` paths become absolute, relative to the file's folder."""
    import yaml

    p = Path(path)
    text = _read_agent_file(p)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SnapshotError(f"{p} is not valid YAML: {err}") from None
    except RecursionError:
        raise SnapshotError(f"{p} is not valid YAML: nested too deeply") from None
    snapshot = parse_snapshot(data, source=str(p))
    if not snapshot.hook_packages:
        return snapshot
    base = p.resolve().parent  # a run must find them again from any working directory
    packages = tuple(str(base / item) for item in snapshot.hook_packages)
    return snapshot.model_copy(update={"hook_packages": packages})
