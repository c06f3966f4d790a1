"""File tools and commands work on the same files, in both directions — on a root host
too, where commands run as ``nobody`` and the file tools' store hands what it creates to
that user. Wired as the embedded app wires it (``LocalWorkspaces``)."""

from __future__ import annotations

import asyncio
import itertools
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support.engine import make_snapshot

from agentloom.local.workspaces import LocalWorkspaces
from agentloom_runtime.workspace import CommandSpec, MarkerStore

pytestmark = pytest.mark.sandbox
_ids = itertools.count()


@pytest.fixture
def local(base: Path, runner: Any) -> LocalWorkspaces:
    workspaces = LocalWorkspaces.factory(base / "workspaces")(
        make_snapshot(tools=["workspace"]), "sess")
    assert isinstance(workspaces, LocalWorkspaces)
    workspaces.bind(SimpleNamespace(run_id="run1"))
    return workspaces


def _command(local: LocalWorkspaces, command: str) -> dict[str, Any]:
    spec = CommandSpec(request_id=f"shared-{next(_ids)}", command=command)
    return asyncio.run(local.runner().run(spec.to_dict(), "main"))


def test_file_tool_writes_then_command_appends(local: LocalWorkspaces,
                                               sandbox_user: Any) -> None:
    store = local.for_instance("main")

    async def tools() -> None:
        await store.write("notes/todo.txt", "one\n")
        await store.edit("notes/todo.txt", "one", "first")
        await store.mkdir("build/out")

    asyncio.run(tools())
    result = _command(local, "echo second >> notes/todo.txt && touch build/out/ok "
                             "&& cat notes/todo.txt")
    assert result["exit_code"] == 0, result
    assert result["stdout_head"] == "first\nsecond\n"
    root = local.instance("main").root
    if sandbox_user is not None:  # everything the tools made is the sandbox user's
        for path in ("notes", "notes/todo.txt", "build", "build/out"):
            st = (root / path).stat()
            assert (st.st_uid, st.st_gid) == sandbox_user, path


def test_command_writes_then_file_tool_edits(local: LocalWorkspaces,
                                             sandbox_user: Any) -> None:
    made = _command(local, "mkdir -p src && printf 'x = 1\\n' > src/a.py")
    assert made["exit_code"] == 0, made
    store = local.for_instance("main")

    async def tools() -> dict[str, Any]:
        await store.edit("src/a.py", "x = 1", "x = 2")
        return dict(await store.read("src/a.py"))

    assert asyncio.run(tools())["content"] == "x = 2\n"
    again = _command(local, "echo 'y = 3' >> src/a.py && cat src/a.py")
    assert again["exit_code"] == 0, again  # the edit's new file is still the command's
    assert again["stdout_head"] == "x = 2\ny = 3\n"
    if sandbox_user is not None:
        st = (local.instance("main").root / "src" / "a.py").stat()
        assert (st.st_uid, st.st_gid) == sandbox_user
        assert os.geteuid() == 0


def test_local_workspaces_judge_markers_with_the_runner(local: LocalWorkspaces) -> None:
    """The engine's marker store and the file tools' store both use the runner's
    liveness: a dead owner's marker no longer blocks them."""
    commands = local.commands
    assert isinstance(commands, MarkerStore) and commands.liveness is local._runner.liveness
    store = local.for_instance("main")
    child = __import__("subprocess").Popen(["true"])
    child.wait()  # a pid that is provably dead now
    commands.write("dead-1", {"runner": local._runner.module_id, "nonce": "n" * 24,
                              "host": local._runner.liveness._here, "owner_pid": child.pid,
                              "owner_start": "1", "state": "started"})
    assert commands.describe("dead-1")["blocking"] is False
    asyncio.run(store.write("after.txt", "ok"))  # not refused
    assert commands.lookup("dead-1") == ("started", None)
