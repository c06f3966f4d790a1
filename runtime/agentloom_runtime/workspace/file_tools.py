"""System file tools (docs/contract.md#file-tools) over the instance's ``ToolContext.workspace``.

Read-only tools may re-run on resume (``resume_inflight=True``) and are usable before a
plan exists; writes, edits, deletes, mkdir and commands never repeat an unknown side
effect. Arguments are paths relative to the instance root; nothing here lets the model
choose a space, session or mount. Refusals raise ``WorkspaceError`` (a ``ToolError`` with a
stable ``code``), which the ToolRuntime turns into a failure result.

``workspace_command`` has ``execution="command"``: its handler only builds and returns the
``CommandSpec``; the engine saves it and a CommandRunner executes it later. Limits come from
the published config (``config["command"]["limits"]``, clamped by the host-side ceiling in
``services["command_ceiling"]``), skills from ``services["skills"]``: a callable of the
instance's template (None for main) giving {skill id: host path} to mount read-only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict
from typing import Any

from agentloom_runtime.tool_contracts import (
    WORKSPACE_GROUP,
    ToolContext,
    ToolDefinition,
    ToolExecution,
)

from ._paths import split_path
from .commands import CommandLimits, CommandSpec
from .errors import WorkspaceError
from .storage import WorkspaceStorage

IMPL = "workspace-files/v1"
COMMAND_IMPL = "workspace-command/v1"
MAX_TIMEOUT_S = 1800.0

_PATH = {"type": "string", "minLength": 1, "maxLength": 4096,
         "description": "path relative to the workspace root ('.' is the root)"}
_SHA = {"type": "string", "pattern": "^([0-9a-f]{64})?$",
        "description": "sha256 the file must have now; '' = the file must not exist"}


def _schema(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required),
            "additionalProperties": False}


def _int(lo: int, hi: int, default: int, text: str) -> dict[str, Any]:
    return {"type": "integer", "minimum": lo, "maximum": hi, "default": default,
            "description": text}


def _store(context: ToolContext) -> WorkspaceStorage:
    if context.workspace is None:
        raise WorkspaceError("workspace_unavailable", "no workspace is bound to this instance")
    store: WorkspaceStorage = context.workspace
    return store


Handler = Callable[[ToolContext, dict[str, Any]], Awaitable[Any]]


async def _list(context: ToolContext, a: dict[str, Any]) -> Any:
    return await _store(context).list(a.get("path", "."), recursive=a.get("recursive", False),
                                      max_entries=a.get("max_entries", 2000))


async def _stat(context: ToolContext, a: dict[str, Any]) -> Any:
    return await _store(context).stat(a["path"])


async def _glob(context: ToolContext, a: dict[str, Any]) -> Any:
    return await _store(context).glob(a["pattern"], max_results=a.get("max_results", 500))


async def _grep(context: ToolContext, a: dict[str, Any]) -> Any:
    return await _store(context).grep(
        a["pattern"], path=a.get("path", "."), include=a.get("include"),
        regex=a.get("regex", False), case_sensitive=a.get("case_sensitive", True),
        max_results=a.get("max_results", 200))


async def _read(context: ToolContext, a: dict[str, Any]) -> Any:
    return await _store(context).read(a["path"], start_line=a.get("start_line", 1),
                                      end_line=a.get("end_line"),
                                      max_lines=a.get("max_lines", 2000))


async def _write(context: ToolContext, a: dict[str, Any]) -> Any:
    return await _store(context).write(a["path"], a["content"],
                                       expected_sha256=a.get("expected_sha256"))


async def _edit(context: ToolContext, a: dict[str, Any]) -> Any:
    return await _store(context).edit(a["path"], a["old_text"], a["new_text"],
                                      replace_all=a.get("replace_all", False),
                                      expected_sha256=a.get("expected_sha256"))


async def _mkdir(context: ToolContext, a: dict[str, Any]) -> Any:
    return await _store(context).mkdir(a["path"], parents=a.get("parents", True))


async def _delete(context: ToolContext, a: dict[str, Any]) -> Any:
    return await _store(context).delete(a["path"], expected_sha256=a.get("expected_sha256"))


def _clamp_limits(config: Mapping[str, Any], ceiling: Mapping[str, Any] | None
                  ) -> CommandLimits:
    wanted = asdict(CommandLimits.from_dict((config.get("command") or {}).get("limits")))
    top = asdict(CommandLimits.from_dict(ceiling)) if ceiling else wanted
    return CommandLimits(**{k: min(v, top[k]) for k, v in wanted.items()})


async def _command(context: ToolContext, a: dict[str, Any]) -> Any:
    """Build the spec only. Refused now (not later) when a marker is pending or the host's
    runner reports no usable sandbox, so the model sees a clear error at once."""
    store = _store(context)
    runner = context.services.get("command_runner")
    if runner is not None:  # SandboxUnavailable: never a host shell
        await asyncio.to_thread(runner.ensure_available)  # the first probe starts bwrap
    await store.ensure_writable()
    cwd_parts = split_path(a.get("cwd", "."))
    if cwd_parts:
        info = await store.stat("/".join(cwd_parts))
        if info["type"] != "directory":
            raise WorkspaceError("not_a_directory", "cwd must be a directory")
    if ("command" in a) == ("argv" in a):
        raise WorkspaceError("invalid_argument", "give exactly one of command or argv")
    mounts = context.services.get("skills")
    # a first use may write the skill folders (materialization): off the event loop
    skills = {} if mounts is None else dict(await asyncio.to_thread(mounts, context.template))
    spec = CommandSpec(
        request_id=context.request_id, command=a.get("command"),
        argv=tuple(a["argv"]) if "argv" in a else None, cwd="/".join(cwd_parts) or ".",
        timeout_s=float(a.get("timeout_s", 120)),
        limits=_clamp_limits(context.config, context.services.get("command_ceiling")),
        skills=skills)
    return spec.to_dict()


_READ = True  # read_only + resume_inflight + before_plan
_WRITE = False


def _tool(name: str, text: str, props: dict[str, Any], required: tuple[str, ...],
          handler: Handler, read_only: bool, *, impl: str = IMPL,
          evidence: tuple[str, ...] = ("path",), timeout: float = 60.0,
          execution: ToolExecution = "inline") -> ToolDefinition:
    return ToolDefinition(name=name, description=text, parameters=_schema(props, required),
                          handler=handler, implementation_id=impl, tool_id=name,
                          read_only=read_only, resume_inflight=read_only,
                          before_plan=read_only, evidence_fields=evidence, timeout=timeout,
                          execution=execution)


def granted(groups: set[str] | frozenset[str], name: str) -> bool:
    """Whether a grant list (agent ``tools``, a sub-agent template's ``tools``) allows the
    tool ``name``: by name, or the file tools through the ``workspace`` group."""
    if name in groups:
        return True
    return (WORKSPACE_GROUP in groups and name.startswith("workspace_")
            and name != "workspace_command")


def file_tools() -> list[ToolDefinition]:
    """The workspace tools, in the order of docs/contract.md#file-tools."""
    return [
        _tool("workspace_list", "List a directory of the workspace (not following links).",
              {"path": _PATH, "recursive": {"type": "boolean", "default": False},
               "max_entries": _int(1, 20_000, 2000, "stop after this many entries")},
              (), _list, _READ),
        _tool("workspace_stat", "Type, size, mtime and sha256 of a file or directory.",
              {"path": _PATH}, ("path",), _stat, _READ),
        _tool("workspace_glob", "Find paths by glob pattern ('**' = any depth).",
              {"pattern": _PATH, "max_results": _int(1, 5000, 500, "maximum matches")},
              ("pattern",), _glob, _READ, evidence=("pattern",)),
        _tool("workspace_grep", "Search file contents; literal by default, regex optional "
              "(time-limited). Returns path, line number and line text.",
              {"pattern": {"type": "string", "minLength": 1, "maxLength": 1000},
               "path": _PATH, "include": {"type": "string", "maxLength": 1000,
                                          "description": "glob filter, e.g. '**/*.py'"},
               "regex": {"type": "boolean", "default": False},
               "case_sensitive": {"type": "boolean", "default": True},
               "max_results": _int(1, 2000, 200, "maximum matching lines")},
              ("pattern",), _grep, _READ, evidence=("pattern", "path"), timeout=60.0),
        _tool("workspace_read", "Read lines of a text file: content, line range, size, "
              "sha256 and truncation. start_line -100 reads the last 100 lines.",
              {"path": _PATH, "start_line": {"type": "integer", "default": 1,
                                             "not": {"const": 0}},
               "end_line": {"type": "integer", "minimum": 1},
               "max_lines": _int(1, 10_000, 2000, "maximum lines returned")},
              ("path",), _read, _READ),
        _tool("workspace_write", "Atomically write a whole file. expected_sha256 guards "
              "against lost updates; '' means create only.",
              {"path": _PATH, "content": {"type": "string"}, "expected_sha256": _SHA},
              ("path", "content"), _write, _WRITE),
        _tool("workspace_edit", "Replace exact text in a file. Several matches are refused "
              "unless replace_all is true.",
              {"path": _PATH, "old_text": {"type": "string", "minLength": 1},
               "new_text": {"type": "string"},
               "replace_all": {"type": "boolean", "default": False},
               "expected_sha256": {**_SHA, "pattern": "^[0-9a-f]{64}$"}},
              ("path", "old_text", "new_text"), _edit, _WRITE),
        _tool("workspace_mkdir", "Create a directory (and missing parents).",
              {"path": _PATH, "parents": {"type": "boolean", "default": True}},
              ("path",), _mkdir, _WRITE),
        _tool("workspace_delete", "Delete one regular file (never a directory).",
              {"path": _PATH, "expected_sha256": {**_SHA, "pattern": "^[0-9a-f]{64}$"}},
              ("path",), _delete, _WRITE),
        _tool("workspace_command", "Run one shell command in a sandbox: the workspace is "
              "/workspace, no network, read-only system, limited CPU/memory/processes. Files "
              "persist; processes do not survive the call.",
              {"command": {"type": "string", "minLength": 1, "maxLength": 16_384},
               "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                        "maxItems": 256},
               "cwd": _PATH,
               "timeout_s": {"type": "number", "exclusiveMinimum": 0,
                             "maximum": MAX_TIMEOUT_S, "default": 120}},
              (), _command, _WRITE, impl=COMMAND_IMPL, evidence=("command", "argv", "cwd"),
              execution="command", timeout=30.0),
    ]
