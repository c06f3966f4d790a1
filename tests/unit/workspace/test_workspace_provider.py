"""WorkspaceProvider: layout from host identity, volume checks, resume binding."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentloom_runtime.errors import ConfigError, ResumeMismatch
from agentloom_runtime.workspace import WorkspaceError, WorkspaceProvider
from agentloom_runtime.workspace.provider import session_scope_hash


def test_layout_reuse_and_isolation(tmp_path: Path) -> None:
    provider = WorkspaceProvider(tmp_path / "vol")
    main1 = provider.for_instance("s", "a", "sess", "run1", "main")
    main2 = provider.for_instance("s", "a", "sess", "run2", "main")
    child = provider.for_instance("s", "a", "sess", "run2", "sub-1")
    other_session = provider.for_instance("s", "a", "sess2", "run3", "main")
    other_agent = provider.for_instance("s", "b", "sess", "run4", "main")
    base = tmp_path / "vol" / "spaces" / "s" / "agents" / "a" / "sessions" / "sess"
    assert main1.root == base / "main" == main2.root  # new questions reuse main/
    assert child.root == base / "runs" / "run2" / "children" / "sub-1"
    assert len({main1.root, child.root, other_session.root, other_agent.root}) == 4
    assert not child.root.is_relative_to(main1.root)
    lock = tmp_path / "vol" / ".agentloom-locks" / session_scope_hash("s", "a", "sess")
    assert main1.lock_dir == child.lock_dir == lock
    assert other_session.lock_dir != lock
    for ws in (main1, child):
        assert not ws.lock_dir.is_relative_to(ws.root) and ws.root.is_dir()


@pytest.mark.parametrize("bad", ["..", ".", "", "a/b", "../x", "a\\b", "x" * 129, "-x",
                                 "a..b", "é", "a b", "a\x00"])
def test_identity_components_are_validated(tmp_path: Path, bad: str) -> None:
    provider = WorkspaceProvider(tmp_path / "vol")
    for position in range(5):
        ids = ["s", "a", "sess", "run", "main"]
        ids[position] = bad
        with pytest.raises(ConfigError):
            provider.for_instance(*ids)


def test_symlink_planted_in_the_volume_is_refused(tmp_path: Path) -> None:
    provider = WorkspaceProvider(tmp_path / "vol")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "vol" / "spaces").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "vol" / "spaces" / "s")
    with pytest.raises(WorkspaceError) as info:
        provider.for_instance("s", "a", "sess", "run", "main")
    assert info.value.code == "symlink"
    assert list((tmp_path / "elsewhere").iterdir()) == []


def _volume(tmp_path: Path, volume_id: str = "vol-1") -> Path:
    root = tmp_path / "mnt"
    root.mkdir()
    (root / ".agentloom-volume").write_text(volume_id + "\n")
    return root


def test_shared_posix_checks_the_mount(tmp_path: Path) -> None:
    root = _volume(tmp_path)
    provider = WorkspaceProvider(root, mode="shared_posix", volume_id="vol-1")
    assert provider.for_instance("s", "a", "sess", "r", "main").root.is_dir()
    with pytest.raises(ConfigError):
        WorkspaceProvider("relative/path", mode="shared_posix", volume_id="vol-1")
    with pytest.raises(ConfigError):
        WorkspaceProvider(root, mode="shared_posix", volume_id=None)
    with pytest.raises(WorkspaceError) as wrong:
        WorkspaceProvider(root, mode="shared_posix", volume_id="vol-2")
    assert wrong.value.code == "volume_mismatch"


def test_missing_mount_never_falls_back_to_a_local_dir(tmp_path: Path) -> None:
    missing = tmp_path / "not-mounted"
    with pytest.raises(WorkspaceError) as info:
        WorkspaceProvider(missing, mode="shared_posix", volume_id="vol-1")
    assert info.value.code == "volume_unavailable" and not missing.exists()
    bare = tmp_path / "bare"
    bare.mkdir()
    with pytest.raises(WorkspaceError) as no_marker:
        WorkspaceProvider(bare, mode="shared_posix", volume_id="vol-1")
    assert no_marker.value.code == "volume_unavailable" and list(bare.iterdir()) == []


def test_marker_must_be_a_regular_file_and_is_rechecked(tmp_path: Path) -> None:
    root = _volume(tmp_path)
    provider = WorkspaceProvider(root, mode="shared_posix", volume_id="vol-1")
    (root / ".agentloom-volume").unlink()  # the mount went away under us
    with pytest.raises(WorkspaceError) as gone:
        provider.for_instance("s", "a", "sess", "r", "main")
    assert gone.value.code == "volume_unavailable"
    (tmp_path / "real-marker").write_text("vol-1")
    os.symlink(tmp_path / "real-marker", root / ".agentloom-volume")
    with pytest.raises(WorkspaceError):
        WorkspaceProvider(root, mode="shared_posix", volume_id="vol-1")


def test_binding_refuses_another_volume(tmp_path: Path) -> None:
    root = _volume(tmp_path)
    shared = WorkspaceProvider(root, mode="shared_posix", volume_id="vol-1")
    saved = shared.checkpoint_binding()
    assert saved["mode"] == "shared_posix" and saved["volume_id"] == "vol-1" and saved["root"]
    shared.verify_binding(saved)
    # the same volume mounted elsewhere (another host's mount path) resumes
    other_mount = tmp_path / "other-mnt"
    other_mount.mkdir()
    (other_mount / ".agentloom-volume").write_text("vol-1")
    WorkspaceProvider(other_mount, mode="shared_posix", volume_id="vol-1").verify_binding(saved)
    (tmp_path / "mnt2").mkdir()
    (tmp_path / "mnt2" / ".agentloom-volume").write_text("vol-2")
    with pytest.raises(ResumeMismatch):
        WorkspaceProvider(tmp_path / "mnt2", mode="shared_posix",
                          volume_id="vol-2").verify_binding(saved)
    local = WorkspaceProvider(tmp_path / "local")
    with pytest.raises(ResumeMismatch):
        local.verify_binding(saved)
    local_saved = local.checkpoint_binding()
    local.verify_binding(local_saved)
    with pytest.raises(ResumeMismatch):
        WorkspaceProvider(tmp_path / "local2").verify_binding(local_saved)
    local.verify_binding(None)  # an unbound (old) run


def test_remove_directory_gives_read_only_directories_back_and_never_follows_a_link(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentloom_runtime.workspace import provider

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    session = tmp_path / "session"
    (session / "ro" / "deep").mkdir(parents=True)
    (session / "ro" / "deep" / "f.txt").write_text("x")
    (session / "link").symlink_to(outside)
    (session / "ro" / "deep").chmod(0o500)
    (session / "ro").chmod(0o500)  # as a command's `chmod -R a-w` leaves it
    real = shutil.rmtree
    calls: list[str] = []

    def rmtree(path: Any) -> None:  # as for the commands' user (root would not be refused)
        calls.append(oct(os.stat(Path(path) / "ro").st_mode & 0o777))
        if len(calls) == 1:
            raise PermissionError("read-only")
        real(path)

    monkeypatch.setattr(shutil, "rmtree", rmtree)  # the module provider calls it through
    provider.remove_directory(session)
    assert calls == ["0o500", "0o700"] and not session.exists()
    assert (outside / "keep.txt").read_text() == "keep"
    provider.remove_directory(session)  # absent is done
    linked = tmp_path / "linked"
    linked.symlink_to(outside)
    provider.remove_directory(linked)  # a link is unlinked, not followed
    assert not linked.exists() and (outside / "keep.txt").exists()
