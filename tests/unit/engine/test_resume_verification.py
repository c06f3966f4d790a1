"""Resume verification on the production path: a run is attached with
``create_engine(..., checkpoint=run_id)`` (what ``build_engine(run_id=...)`` calls) and
each saved binding is judged by its owner — the workspace provider (the same shared
volume may be mounted at another path), the tool registry (its catalog), the hook
manifest (itself). ``ResumeMismatch`` names what changed."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.engine import SideEffects, build_engine, drive, make_snapshot, records

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.engine import Engine
from agentloom_runtime.errors import ResumeMismatch
from agentloom_runtime.hooks import Continue, HookDefinition, HookRegistry
from agentloom_runtime.testing import KeyedScriptModel, ScriptedModel
from agentloom_runtime.workspace import WorkspaceProvider, file_tools

VOLUME_MARKER = ".agentloom-volume"
NOTE = "written before the move"


def volume(path: Path, volume_id: str) -> Path:
    """A pre-mounted shared volume: a directory holding its id in the marker file."""
    path.mkdir(parents=True)
    (path / VOLUME_MARKER).write_text(f"{volume_id}\n")
    return path


def on_volume(store: Any, provider: WorkspaceProvider, run_id: str | None = None) -> Engine:
    """A run whose workspace lives on ``provider``'s volume: write a note, read it back."""
    model = KeyedScriptModel([
        ScriptedModel.call("workspace_write", {"path": "note.txt", "content": NOTE}, id="w"),
        ScriptedModel.call("workspace_read", {"path": "note.txt"}, id="r"),
        ScriptedModel.answer("the note is there")])
    return build_engine(
        store=store, model=model, tools=file_tools(), run_id=run_id,
        workspace_provider=provider,
        workspace=lambda inst: provider.for_instance("space", "tester", "s1", "run", inst)
        .store())


async def test_the_same_shared_volume_mounted_at_another_path_resumes(tmp_path: Path) -> None:
    store = InMemoryCheckpointStore()
    first = WorkspaceProvider(volume(tmp_path / "mnt-a", "vol-1"), mode="shared_posix",
                              volume_id="vol-1")
    engine = on_volume(store, first)
    run_id = await engine.start("write a note, then read it")
    assert (await engine.step()).kind == "action"
    assert (await engine.step()).kind == "tool"  # the note is on the volume
    # another host mounts the same volume (same id, same marker, same files) elsewhere
    shutil.copytree(tmp_path / "mnt-a", tmp_path / "elsewhere" / "mnt-b")
    second = WorkspaceProvider(tmp_path / "elsewhere" / "mnt-b", mode="shared_posix",
                               volume_id="vol-1")
    assert second.checkpoint_binding()["root"] != first.checkpoint_binding()["root"]
    resumed = on_volume(store, second, run_id)
    await resumed.begin_execution()
    assert (await drive(resumed)).status == "completed"
    read = [r for r in records(store, run_id, "tool_result") if r["name"] == "workspace_read"]
    assert NOTE in read[0]["message"]["content"], "the resumed run read the same volume"


async def test_another_shared_volume_is_refused_naming_the_workspace(tmp_path: Path) -> None:
    store = InMemoryCheckpointStore()
    first = WorkspaceProvider(volume(tmp_path / "mnt-a", "vol-1"), mode="shared_posix",
                              volume_id="vol-1")
    run_id = await on_volume(store, first).start("write a note")
    other = WorkspaceProvider(volume(tmp_path / "mnt-b", "vol-2"), mode="shared_posix",
                              volume_id="vol-2")
    with pytest.raises(ResumeMismatch, match="workspace") as info:
        on_volume(store, other, run_id)
    assert info.value.details["changed"] == ["workspace"]
    assert "another workspace volume" in info.value.message


async def test_a_local_workspace_at_another_root_is_refused(tmp_path: Path) -> None:
    """The contrast: a local workspace is its directory, so another root is another one."""
    store = InMemoryCheckpointStore()
    run_id = await on_volume(store, WorkspaceProvider(tmp_path / "a")).start("write a note")
    with pytest.raises(ResumeMismatch, match="workspace"):
        on_volume(store, WorkspaceProvider(tmp_path / "b"), run_id)


async def test_a_changed_tool_catalog_is_refused_naming_the_tool() -> None:
    store = InMemoryCheckpointStore()
    tools = SideEffects().tools()
    run_id = await build_engine(store=store, tools=tools).start("mail ops")
    changed = [dataclasses.replace(tools[0], implementation_id="send-mail/v2"), tools[1]]
    with pytest.raises(ResumeMismatch, match=r"tools: .*changed: send_mail") as info:
        build_engine(store=store, tools=changed, run_id=run_id)
    assert info.value.details["changed"] == ["tools"]
    with pytest.raises(ResumeMismatch, match=r"missing: count_words"):
        build_engine(store=store, tools=tools[:1], run_id=run_id)
    build_engine(store=store, tools=SideEffects().tools(), run_id=run_id)  # same catalog


async def audit(ctx: Any, payload: dict[str, Any]) -> Continue:
    return Continue()


def with_hook(store: Any, version: str, run_id: str | None = None) -> Engine:
    registry = HookRegistry([HookDefinition("audit", version, audit, replay_safe=True)])
    snapshot = make_snapshot(hooks=[{"hook_id": "audit", "version": version,
                                     "point": "tool.before"}])
    return build_engine(store=store, snapshot=snapshot, hook_registry=registry,
                        tools=SideEffects().tools(), run_id=run_id)


async def test_changed_hooks_are_refused_naming_the_hook() -> None:
    store = InMemoryCheckpointStore()
    run_id = await with_hook(store, "1").start("mail ops")
    with_hook(store, "1", run_id)  # the same hook resumes
    with pytest.raises(ResumeMismatch, match=r"hook audit at tool\.before") as info:
        with_hook(store, "2", run_id)
    assert "version mismatch (saved '1', current '2')" in info.value.message
    assert info.value.details["changed"] == ["hooks"]
