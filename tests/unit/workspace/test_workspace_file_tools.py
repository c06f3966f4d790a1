"""The tool catalog: flags, schemas, handlers through the ToolRuntime, workspace_command."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentloom_runtime.contracts import ToolRequest
from agentloom_runtime.tools.registry import ToolRegistry
from agentloom_runtime.tools.runtime import ToolRuntime
from agentloom_runtime.workspace import (
    CommandSpec,
    MarkerStore,
    PosixWorkspaceStore,
    SandboxUnavailable,
    WorkspaceError,
    file_tools,
)

READ_ONLY = {"workspace_list", "workspace_stat", "workspace_glob", "workspace_grep",
             "workspace_read"}
TOOLS = {t.name: t for t in file_tools()}


def test_catalog_flags() -> None:
    assert list(TOOLS) == [
        "workspace_list", "workspace_stat", "workspace_glob", "workspace_grep",
        "workspace_read", "workspace_write", "workspace_edit", "workspace_mkdir",
        "workspace_delete", "workspace_command"]
    for name, tool in TOOLS.items():
        expected = name in READ_ONLY
        assert (tool.read_only, tool.resume_inflight, tool.before_plan) == (expected,) * 3
        assert tool.parameters["additionalProperties"] is False
        assert tool.implementation_id
    assert TOOLS["workspace_command"].execution == "command"
    assert all(t.execution == "inline" for n, t in TOOLS.items() if n != "workspace_command")
    ToolRegistry(file_tools())  # schemas compile; names and ids are unique


async def test_handlers_through_the_tool_runtime(store: PosixWorkspaceStore,
                                                 make_context: Any) -> None:
    runtime = ToolRuntime(ToolRegistry(file_tools()), config={})
    try:
        async def call(name: str, **args: Any) -> Any:
            request = ToolRequest(call_id="c1", name=name, arguments=json.dumps(args),
                                  request_id="r1")
            return await runtime.execute(request, lambda _p: make_context(store))

        written = await call("workspace_write", path="notes/a.md", content="# a\nb\n")
        assert written.status == "ok" and written.raw_value["created"] is True
        read = await call("workspace_read", path="notes/a.md", start_line=-1)
        assert read.raw_value["content"] == "b\n"
        refused = await call("workspace_read", path="../etc/passwd")
        assert refused.status == "error" and refused.error_code == "path_traversal"
        dup = await call("workspace_write", path="notes/a.md", content="x", expected_sha256="")
        assert dup.error_code == "exists"
        bad_schema = await call("workspace_write", path="x", content="y", mode="0777")
        assert bad_schema.status == "error"
    finally:
        await runtime.aclose()


async def test_no_workspace_bound(make_context: Any) -> None:
    with pytest.raises(WorkspaceError) as info:
        await TOOLS["workspace_list"].handler(make_context(None), {})
    assert info.value.code == "workspace_unavailable"


class _Runner:
    def __init__(self, available: bool) -> None:
        self.available = available

    def ensure_available(self) -> None:
        if not self.available:
            raise SandboxUnavailable("bubblewrap is not installed")


async def test_command_handler_builds_the_spec_only(store: PosixWorkspaceStore,
                                                    make_context: Any) -> None:
    await store.mkdir("src")
    ctx = make_context(store, config={"command": {"limits": {"memory_mb": 4096,
                                                              "cpu_seconds": 10}}},
                       command_ceiling={"memory_mb": 2048},
                       skills=lambda template: {"pdf": "/opt/skills/pdf"},
                       command_runner=_Runner(True))
    value = await TOOLS["workspace_command"].handler(ctx, {"command": "make", "cwd": "src",
                                                           "timeout_s": 30})
    spec = CommandSpec.from_dict(value)
    assert spec.request_id == "req-1" and spec.command == "make" and spec.cwd == "src"
    assert spec.limits.memory_mb == 2048 and spec.limits.cpu_seconds == 10
    assert dict(spec.skills) == {"pdf": "/opt/skills/pdf"} and spec.timeout_s == 30
    argv = await TOOLS["workspace_command"].handler(ctx, {"argv": ["ls", "-l"]})
    assert CommandSpec.from_dict(argv).resolved_argv() == ["ls", "-l"]


async def test_command_handler_refusals(store: PosixWorkspaceStore, make_context: Any) -> None:
    handler = TOOLS["workspace_command"].handler

    async def code(ctx: Any, args: dict[str, Any]) -> str:
        with pytest.raises(WorkspaceError) as info:
            await handler(ctx, args)
        return info.value.code

    ctx = make_context(store)
    assert await code(ctx, {"command": "ls", "argv": ["ls"]}) == "invalid_argument"
    assert await code(ctx, {}) == "invalid_argument"
    await store.write("file.txt", "x")
    assert await code(ctx, {"command": "ls", "cwd": "file.txt"}) == "not_a_directory"
    assert await code(make_context(store, command_runner=_Runner(False)),
                      {"command": "ls"}) == "sandbox_unavailable"
    MarkerStore(store.lock_dir).write("old-req", {"runner": "x"})
    assert await code(ctx, {"command": "ls"}) == "sandbox_marker_present"
    # read-only tools still work while the marker is there
    assert (await TOOLS["workspace_read"].handler(ctx, {"path": "file.txt"}))["content"] == "x"
