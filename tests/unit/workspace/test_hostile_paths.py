"""A hostile-path corpus run against every file tool: zero escapes, stable error codes.

Each case is sent to every tool handler (list, stat, glob, grep, read, write, edit, mkdir,
delete, and workspace_command's cwd). Every call must raise ``WorkspaceError`` with an
expected code; the ``outside`` fixture asserts afterwards that nothing outside the
workspace changed, and no result or error ever carries the outside sentinel.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from agentloom_runtime.workspace import PosixWorkspaceStore, WorkspaceError, _paths, file_tools
from agentloom_runtime.workspace.errors import CODES

SENTINEL = "SENTINEL-7f3a9c-outside-secret"  # same as conftest.SENTINEL
TRAVERSAL, ABSOLUTE, SYMLINK = {"path_traversal"}, {"absolute_path"}, {"symlink"}
INVALID, LONG = {"invalid_path"}, {"name_too_long"}

# (id, path, expected codes). "{outside}" is replaced by the outside directory.
CASES: list[tuple[str, str, set[str]]] = [
    # traversal
    ("dotdot", "..", TRAVERSAL),
    ("dotdot-slash", "../", TRAVERSAL),
    ("dotdot-secret", "../secret.txt", TRAVERSAL),
    ("deep-dotdot", "../../../../../../../../etc/passwd", TRAVERSAL),
    ("inner-dotdot", "dir/../../secret.txt", TRAVERSAL),
    ("dot-dotdot", "./../secret.txt", TRAVERSAL),
    ("trailing-dotdot", "dir/..", TRAVERSAL),
    ("climb-past-root", "dir/x/../../..", TRAVERSAL),
    ("case-dotdot", "DIR/../../secret.txt", TRAVERSAL),
    # absolute
    ("abs-etc", "/etc/passwd", ABSOLUTE),
    ("abs-root", "/", ABSOLUTE),
    ("abs-outside", "{outside}/secret.txt", ABSOLUTE),
    ("double-slash", "//server/share", ABSOLUTE),
    ("drive", "C:/Windows/system.ini", ABSOLUTE),
    ("drive-backslash", "C:\\secret.txt", ABSOLUTE),
    # symlinks: final, intermediate, relative, dangling, to /
    ("symlink-dir", "link_out", SYMLINK),
    ("symlink-dir-child", "link_out/secret.txt", SYMLINK),
    ("symlink-middle", "dir/link_mid/secret.txt", SYMLINK),
    ("symlink-middle-deep", "dir/link_mid/sub/deep.txt", SYMLINK),
    ("symlink-mid-itself", "dir/link_mid", SYMLINK),
    ("symlink-file", "link_file", SYMLINK),
    ("symlink-root", "link_root/etc/passwd", SYMLINK),
    ("symlink-dangling", "link_dangling", SYMLINK),
    ("symlink-relative-up", "link_up/secret.txt", SYMLINK),
    # hard links and special files
    ("hard-link", "hard.txt", {"hard_link"}),
    ("fifo", "fifo", {"special_file"}),
    ("socket", "sock", {"special_file"}),
    ("device", "dev_null", {"special_file"}),
    # over-long
    ("long-name", "a" * 256, LONG),
    ("long-utf8-name", "é" * 128, LONG),
    ("long-path", "/".join(["d" * 200] * 25), LONG),
    ("deep-path", "/".join(["d"] * 65), LONG),
    # NUL and control / format characters
    ("nul-middle", "secret\x00.txt", INVALID),
    ("nul-only", "\x00", INVALID),
    ("nul-after-dotdot", "../\x00", INVALID),
    ("newline", "dir/a\nb", INVALID),
    ("rtl-override", "\u202etxt.exe", INVALID),
    ("zero-width", "se\u200bcret.txt", INVALID),
    ("lone-surrogate", "bad\udc80name", INVALID),
    # Unicode look-alikes of dots and slashes
    ("one-dot-leader", "\u2024\u2024/secret.txt", INVALID),
    ("two-dot-leader", "\u2025/secret.txt", INVALID),
    ("fullwidth-dots", "\uff0e\uff0e/secret.txt", INVALID),
    ("fullwidth-slash", "..\uff0fsecret.txt", INVALID),
    ("division-slash", "dir\u2215..\u2215..\u2215secret.txt", INVALID),
    ("fraction-slash", "..\u2044secret.txt", INVALID),
    ("small-full-stops", "\ufe52\ufe52/secret.txt", INVALID),
    ("fullwidth-backslash", "..\uff3csecret.txt", INVALID),
    # case tricks on reserved names (our temp files, lock and volume markers)
    ("reserved-locks", ".agentloom-locks/x", INVALID),
    ("reserved-case", ".AgentLoom-Locks/x", INVALID),
    ("reserved-volume", ".AGENTLOOM-VOLUME", INVALID),
    ("reserved-tmp", ".agentloom-tmp-deadbeef", INVALID),
    # trailing dots / spaces, dots only
    ("trailing-dot", "secret.txt.", INVALID),
    ("trailing-space", "secret.txt ", INVALID),
    ("leading-space", " secret.txt", INVALID),
    ("dir-trailing-dot", "dir./x", INVALID),
    ("three-dots", "...", INVALID),
    ("dotdot-space", ".. /secret.txt", INVALID),
    # home expansion, backslashes, empty components
    ("tilde", "~", INVALID),
    ("tilde-slash", "~/secret.txt", INVALID),
    ("tilde-user", "~root/.ssh/id_rsa", INVALID),
    ("backslash-dotdot", "..\\secret.txt", INVALID),
    ("backslash-middle", "dir\\..\\..\\secret.txt", INVALID),
    ("unc", "\\\\server\\share", INVALID),
    ("empty-component", "dir//x", INVALID),
]

DIR_TOOLS = {"workspace_list", "workspace_mkdir", "workspace_command"}


def _args(tool: str, path: str) -> dict[str, Any]:
    arguments: dict[str, dict[str, Any]] = {
        "workspace_list": {"path": path, "recursive": True},
        "workspace_stat": {"path": path},
        "workspace_glob": {"pattern": path},
        "workspace_grep": {"pattern": "SENTINEL", "path": path},
        "workspace_read": {"path": path},
        "workspace_write": {"path": path, "content": "pwned"},
        "workspace_edit": {"path": path, "old_text": "SENTINEL", "new_text": "pwned"},
        "workspace_mkdir": {"path": path},
        "workspace_delete": {"path": path},
        "workspace_command": {"command": "cat secret.txt", "cwd": path},
    }
    return arguments[tool]


TOOLS = {t.name: t for t in file_tools()}


def _is_link(path: Path) -> bool:
    return os.path.islink(path)


def _names(path: Path) -> list[str]:
    return os.listdir(path)


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40
    assert len({c[0] for c in CASES}) == len(CASES)
    assert set(TOOLS) == {
        "workspace_list", "workspace_stat", "workspace_glob", "workspace_grep",
        "workspace_read", "workspace_write", "workspace_edit", "workspace_mkdir",
        "workspace_delete", "workspace_command"}


@pytest.mark.parametrize(("case", "raw", "codes"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("tool", sorted(TOOLS))
async def test_hostile_path_refused(tool: str, case: str, raw: str, codes: set[str],
                                    store: PosixWorkspaceStore, hostile: dict[str, bool],
                                    outside: Path, sentinel: str, make_context: Any) -> None:
    assert sentinel == SENTINEL
    if case == "device" and not hostile["device"]:
        pytest.skip("creating a device node needs root (os.mknod)")
    if case == "socket" and not hostile["socket"]:
        pytest.skip("cannot bind a unix socket here")
    path = raw.replace("{outside}", str(outside))
    allowed = set(codes)
    if tool in DIR_TOOLS and codes & {"hard_link", "special_file"}:
        allowed.add("not_a_directory")  # a file-like entry where a directory is needed
    with pytest.raises(WorkspaceError) as info:
        result = await TOOLS[tool].handler(make_context(store), _args(tool, path))
        assert SENTINEL not in json.dumps(result)
    assert info.value.code in CODES
    assert info.value.code in allowed, (tool, case, info.value.code, info.value.message)
    assert SENTINEL not in info.value.message
    assert str(outside) not in info.value.message or case == "abs-outside"


async def test_hostile_entries_stay_in_place(store: PosixWorkspaceStore,
                                             hostile: dict[str, bool],
                                             workspace: Any) -> None:
    """Refused deletes and writes leave links and special files as they were."""
    for name in ("link_out", "link_file", "hard.txt", "fifo"):
        with pytest.raises(WorkspaceError):
            await store.delete(name)
        with pytest.raises(WorkspaceError):
            await store.write(name, "x")
    assert _is_link(workspace.root / "link_out")
    assert (workspace.root / "hard.txt").read_text().startswith(SENTINEL)


async def test_listing_reports_links_without_following(store: PosixWorkspaceStore,
                                                      hostile: dict[str, bool]) -> None:
    listing = await store.list(".", recursive=True)
    kinds = {e["path"]: e["type"] for e in listing["entries"]}
    assert kinds["link_out"] == "symlink"
    assert kinds["dir/link_mid"] == "symlink"
    assert kinds["hard.txt"] == "hard_link"
    assert kinds["fifo"] == "special"
    assert not any(p.startswith("link_out/") or p.startswith("dir/link_mid/") for p in kinds)
    found = await store.grep("SENTINEL")
    assert found["matches"] == []  # hard link and links are never read
    assert found["skipped"] >= 1
    globbed = await store.glob("**/*.txt")
    assert {m["path"] for m in globbed["matches"]} == {"dir/inside.txt", "victim.txt"}
    regex = await store.grep("SENT.NEL", regex=True)
    assert regex["matches"] == []


async def test_percent_encoding_is_a_plain_name(store: PosixWorkspaceStore,
                                                workspace: Any, outside: Path) -> None:
    await store.write("%2e%2e/secret.txt", "inside")
    assert (workspace.root / "%2e%2e" / "secret.txt").read_text() == "inside"


# ---------------------------------------------------------------- swapped after the check


def _swap_hook(monkeypatch: pytest.MonkeyPatch, target: str, make: Any) -> list[int]:
    calls: list[int] = []

    def hook(dir_fd: int, name: str) -> None:
        if name == target and not calls:
            calls.append(1)
            os.unlink(name, dir_fd=dir_fd)
            make(dir_fd, name)
    monkeypatch.setattr(_paths, "_after_check", hook)
    return calls


async def test_symlink_swapped_in_before_open_is_refused(
        store: PosixWorkspaceStore, workspace: Any, outside: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (workspace.root / "victim.txt").write_text("victim\n")
    calls = _swap_hook(monkeypatch, "victim.txt",
                       lambda fd, n: os.symlink(outside / "secret.txt", n, dir_fd=fd))
    with pytest.raises(WorkspaceError) as info:
        await store.read("victim.txt")
    assert calls and info.value.code == "symlink"


async def test_hard_link_swapped_in_before_open_is_refused(
        store: PosixWorkspaceStore, workspace: Any, outside: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (workspace.root / "victim.txt").write_text("victim\n")
    calls = _swap_hook(monkeypatch, "victim.txt",
                       lambda fd, n: os.link(outside / "secret.txt", n, dst_dir_fd=fd))
    with pytest.raises(WorkspaceError) as info:
        await store.stat("victim.txt")
    assert calls and info.value.code == "hard_link"


async def test_symlink_swapped_in_before_rename_is_replaced_not_followed(
        store: PosixWorkspaceStore, workspace: Any, outside: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (workspace.root / "victim.txt").write_text("victim\n")
    calls = _swap_hook(monkeypatch, "victim.txt",
                       lambda fd, n: os.symlink(outside / "secret.txt", n, dir_fd=fd))
    await store.write("victim.txt", "new")
    assert calls
    assert not _is_link(workspace.root / "victim.txt")
    assert (workspace.root / "victim.txt").read_text() == "new"
    # the outside fixture asserts secret.txt is untouched


def _racer(root: Path, outside: Path, stop: threading.Event) -> None:
    """Swap 'sub' between a real directory and a symlink to outside, as fast as possible."""
    real, link, sub = root / "sub_real", root / "sub_link", root / "sub"
    while not stop.is_set():
        for a, b in ((real, sub), (sub, real), (link, sub), (sub, link)):
            try:
                os.rename(a, b)
            except OSError:
                pass


async def test_racing_directory_swaps_never_escape(store: PosixWorkspaceStore, workspace: Any,
                                                   outside: Path) -> None:
    root = workspace.root
    (root / "sub_real").mkdir()
    (root / "sub_real" / "secret.txt").write_text("inside\n")
    os.symlink(outside, root / "sub_link")
    stop = threading.Event()
    thread = threading.Thread(target=_racer, args=(root, outside, stop), daemon=True)
    thread.start()
    seen_ok = 0
    try:
        for i in range(80):
            for call in (store.read("sub/secret.txt"), store.stat("sub/secret.txt"),
                         store.grep("e", path="sub"), store.list("sub"),
                         store.write(f"sub/new-{i}.txt", "x"), store.mkdir(f"sub/d{i}")):
                try:
                    result = await call
                except WorkspaceError as exc:
                    assert exc.code in {"symlink", "not_found", "not_a_directory"}, exc.code
                    continue
                assert SENTINEL not in json.dumps(result)
                seen_ok += 1
    finally:
        stop.set()
        thread.join()
    assert seen_ok > 0
    assert not [n for n in _names(outside) if n.startswith(("new-", "d"))]
