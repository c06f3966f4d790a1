"""``PosixWorkspaceStore(owner=...)``: what the file tools create or replace belongs to the
user commands run as (a root host runs them as nobody), so both can change it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from agentloom_runtime.workspace import PosixWorkspaceStore

NOBODY = (65534, 65534)
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving files away needs root")


def _owner(path: Path) -> tuple[int, int]:
    st = path.lstat()
    return st.st_uid, st.st_gid


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@as_root
def test_created_and_replaced_entries_go_to_the_owner(tmp_path: Path, root: Path) -> None:
    store = PosixWorkspaceStore(root, tmp_path / "locks", owner=NOBODY)

    async def tools() -> None:
        await store.write("a/b/c.txt", "one\n")
        await store.edit("a/b/c.txt", "one", "two")
        await store.mkdir("d/e")
        await store.write("top.txt", "x")

    asyncio.run(tools())
    for rel in ("a", "a/b", "a/b/c.txt", "d", "d/e", "top.txt"):
        assert _owner(root / rel) == NOBODY, rel
    assert _owner(root) == (0, 0)  # the instance root is the provider's business
    assert (root / "a/b/c.txt").read_text() == "two\n"
    assert (root / "a/b/c.txt").stat().st_mode & 0o777 == 0o644


@as_root
def test_a_file_the_command_made_keeps_its_owner_and_mode(tmp_path: Path,
                                                          root: Path) -> None:
    made = root / "script.sh"
    made.write_text("echo one\n")
    made.chmod(0o755)
    os.chown(made, *NOBODY)
    store = PosixWorkspaceStore(root, tmp_path / "locks", owner=NOBODY)
    asyncio.run(store.edit("script.sh", "one", "two"))
    assert _owner(made) == NOBODY and made.stat().st_mode & 0o777 == 0o755


def test_without_owner_nothing_is_given_away(tmp_path: Path, root: Path) -> None:
    store = PosixWorkspaceStore(root, tmp_path / "locks")
    asyncio.run(store.write("a/b.txt", "x"))
    me = (os.geteuid(), os.getegid())
    assert _owner(root / "a") == me and _owner(root / "a" / "b.txt") == me


def test_the_owner_may_be_this_user(tmp_path: Path, root: Path) -> None:
    me = (os.geteuid(), os.getegid())
    store = PosixWorkspaceStore(root, tmp_path / "locks", owner=me)
    asyncio.run(store.write("a/b.txt", "x"))
    assert _owner(root / "a" / "b.txt") == me
