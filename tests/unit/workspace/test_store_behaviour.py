"""Normal behaviour of PosixWorkspaceStore: preconditions, ranges, budgets, locks, cancel."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agentloom_runtime.workspace import (
    MarkerStore,
    PosixWorkspaceStore,
    WorkspaceError,
    WorkspaceStorage,
)
from agentloom_runtime.workspace._locking import write_lock
from agentloom_runtime.workspace._textread import ReadRequest


def sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


async def code_of(awaitable: Any) -> str:
    with pytest.raises(WorkspaceError) as info:
        await awaitable
    return info.value.code


# ---------------------------------------------------------------- write


def test_store_satisfies_the_port(store: PosixWorkspaceStore) -> None:
    assert isinstance(store, WorkspaceStorage)


async def test_write_creates_parents_and_reports_sha(store: PosixWorkspaceStore,
                                                     workspace: Any) -> None:
    result = await store.write("a/b/c.txt", "hello\n")
    assert result == {"path": "a/b/c.txt", "size": 6, "sha256": sha("hello\n"), "created": True}
    assert (workspace.root / "a/b/c.txt").read_text() == "hello\n"
    again = await store.write("a/b/c.txt", "bye\n")
    assert again["created"] is False
    assert not [p for p in (workspace.root / "a/b").iterdir() if p.name != "c.txt"]


async def test_write_sha_preconditions(store: PosixWorkspaceStore) -> None:
    await store.write("f.txt", "v1")
    assert await code_of(store.write("f.txt", "v2", expected_sha256="0" * 64)) == "sha_mismatch"
    assert await code_of(store.write("f.txt", "v2", expected_sha256="")) == "exists"
    ok = await store.write("f.txt", "v2", expected_sha256=sha("v1"))
    assert ok["sha256"] == sha("v2")
    assert await code_of(store.write("new.txt", "x", expected_sha256=sha("x"))) == "not_found"
    assert (await store.write("new.txt", "x", expected_sha256=""))["created"] is True
    assert await code_of(store.write("f.txt", "v3", expected_sha256="XYZ")) == "invalid_argument"


async def test_write_keeps_mode_and_refuses_directories_and_size(
        store: PosixWorkspaceStore, workspace: Any) -> None:
    await store.write("run.sh", "#!/bin/sh\n")
    os.chmod(workspace.root / "run.sh", 0o750)
    await store.write("run.sh", "#!/bin/sh\necho hi\n")
    assert (workspace.root / "run.sh").stat().st_mode & 0o777 == 0o750
    await store.mkdir("d")
    assert await code_of(store.write("d", "x")) == "is_directory"
    assert await code_of(store.write(".", "x")) == "is_directory"
    small = PosixWorkspaceStore(store.root, store.lock_dir,
                                limits=replace(store.limits, max_write_bytes=10))
    assert await code_of(small.write("big.txt", "x" * 11)) == "too_large"


# ---------------------------------------------------------------- read


async def test_read_ranges_and_truncation(store: PosixWorkspaceStore) -> None:
    text = "".join(f"line {i}\n" for i in range(1, 11))
    await store.write("f.txt", text)
    whole = await store.read("f.txt")
    assert whole["content"] == text and whole["total_lines"] == 10
    assert whole["sha256"] == sha(text) and whole["size"] == len(text)
    assert whole["truncated"] is False and whole["next_start_line"] is None
    part = await store.read("f.txt", start_line=3, end_line=4)
    assert part["content"] == "line 3\nline 4\n"
    assert (part["start_line"], part["end_line"], part["truncated"]) == (3, 4, False)
    capped = await store.read("f.txt", start_line=2, max_lines=3)
    assert capped["end_line"] == 4 and capped["truncated"] and capped["next_start_line"] == 5
    tail = await store.read("f.txt", start_line=-2)
    assert tail["content"] == "line 9\nline 10\n" and tail["start_line"] == 9
    past = await store.read("f.txt", start_line=50)
    assert past["content"] == "" and past["truncated"] is False


async def test_read_edge_shapes(store: PosixWorkspaceStore) -> None:
    await store.write("nonl.txt", "a\nb")
    assert (await store.read("nonl.txt", start_line=-1))["content"] == "b"
    assert (await store.read("nonl.txt"))["total_lines"] == 2
    await store.write("empty.txt", "")
    empty = await store.read("empty.txt", start_line=-5)
    assert (empty["content"], empty["total_lines"], empty["truncated"]) == ("", 0, False)
    await store.write("wide.txt", "x" * 100_000 + "\nshort\n")
    wide = await store.read("wide.txt", max_bytes=1000)
    assert wide["line_truncated"] and len(wide["content"]) == 1000 and wide["truncated"]
    assert await code_of(store.read("f-missing.txt")) == "not_found"
    await store.mkdir("d")
    assert await code_of(store.read("d")) == "is_directory"
    assert await code_of(store.read("nonl.txt", start_line=0)) == "invalid_argument"
    assert await code_of(store.read("nonl.txt", start_line=3, end_line=2)) == "invalid_argument"
    assert await code_of(store.read("nonl.txt", start_line=-3, end_line=2)) == "invalid_argument"


def test_tail_of_a_large_file_streams(store: PosixWorkspaceStore, workspace: Any) -> None:
    path = workspace.root / "big.log"
    with open(path, "wb") as fh:
        for i in range(200_000):  # ~ 6 MB
            fh.write(f"log line {i:08d} some padding text\n".encode())
    size = path.stat().st_size
    tracemalloc.start()
    try:
        result = store._read_sync(("big.log",), ReadRequest(start_line=-100))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result["total_lines"] == 200_000 and result["start_line"] == 199_901
    assert result["content"].splitlines()[-1] == "log line 00199999 some padding text"
    assert result["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert peak < size / 2, f"peak {peak} bytes for a {size}-byte file"


# ---------------------------------------------------------------- stat / list / glob


async def test_stat_list_glob(store: PosixWorkspaceStore) -> None:
    await store.write("src/a.py", "print(1)\n")
    await store.write("src/pkg/b.py", "print(2)\n")
    await store.write("README.md", "# hi\n")
    info = await store.stat("src/a.py")
    assert info["type"] == "file" and info["sha256"] == sha("print(1)\n")
    assert (await store.stat("src"))["type"] == "directory"
    assert (await store.stat("."))["type"] == "directory"
    top = await store.list()
    assert [e["path"] for e in top["entries"]] == ["README.md", "src"]
    deep = await store.list("src", recursive=True)
    assert [e["path"] for e in deep["entries"]] == ["src/a.py", "src/pkg", "src/pkg/b.py"]
    capped = await store.list(".", recursive=True, max_entries=2)
    assert len(capped["entries"]) == 2 and capped["truncated"]
    py = await store.glob("**/*.py")
    assert [m["path"] for m in py["matches"]] == ["src/a.py", "src/pkg/b.py"]
    assert [m["path"] for m in (await store.glob("src/*.py"))["matches"]] == ["src/a.py"]
    assert [m["path"] for m in (await store.glob("*.md"))["matches"]] == ["README.md"]
    assert (await store.glob("src/a.py"))["matches"] == [{"path": "src/a.py", "type": "file"}]
    assert await code_of(store.glob("nope/*.py")) == "not_found"
    one = await store.glob("**/*.py", max_results=1)
    assert len(one["matches"]) == 1 and one["truncated"]


# ---------------------------------------------------------------- grep


async def test_grep_literal_regex_and_filters(store: PosixWorkspaceStore) -> None:
    await store.write("a.txt", "alpha\nBeta a.b\ngamma\n")
    await store.write("sub/b.py", "a.b = 1\naxb = 2\n")
    await store.write("bin.dat", "a.b\x00binary")
    lit = await store.grep("a.b")
    assert [(m["path"], m["line"]) for m in lit["matches"]] == [("a.txt", 2), ("sub/b.py", 1)]
    rx = await store.grep(r"a.b\b", regex=True)
    assert [(m["path"], m["line"]) for m in rx["matches"]] == [
        ("a.txt", 2), ("sub/b.py", 1), ("sub/b.py", 2)]
    ci = await store.grep("BETA", case_sensitive=False)
    assert [m["text"] for m in ci["matches"]] == ["Beta a.b"]
    only_py = await store.grep("a.b", include="**/*.py")
    assert [m["path"] for m in only_py["matches"]] == ["sub/b.py"]
    one_file = await store.grep("gamma", path="a.txt")
    assert one_file["matches"] == [{"path": "a.txt", "line": 3, "text": "gamma"}]
    anchored = await store.grep("^gamma$", regex=True)
    assert [(m["path"], m["line"]) for m in anchored["matches"]] == [("a.txt", 3)]
    at_end = await store.grep(r"a\.b(?!\s)", regex=True)  # end of line: no whitespace follows
    assert ("a.txt", 2) in [(m["path"], m["line"]) for m in at_end["matches"]]
    behind = await store.grep(r"(?<!x)gamma", regex=True)
    assert [m["line"] for m in behind["matches"]] == [3]
    assert await code_of(store.grep("(", regex=True)) == "invalid_argument"
    assert await code_of(store.grep("")) == "invalid_argument"


async def test_grep_budgets(store: PosixWorkspaceStore) -> None:
    for i in range(20):
        await store.write(f"f{i:02d}.txt", "needle\n" * 3)
    capped = await store.grep("needle", max_results=5)
    assert len(capped["matches"]) == 5 and capped["truncated"]
    few = PosixWorkspaceStore(store.root, store.lock_dir, limits=replace(
        store.limits, scan=replace(store.limits.scan, max_files=4)))
    by_files = await few.grep("needle")
    assert by_files["files_scanned"] == 4 and by_files["truncated"]
    tiny = PosixWorkspaceStore(store.root, store.lock_dir, limits=replace(
        store.limits, scan=replace(store.limits.scan, max_bytes=50)))
    by_bytes = await tiny.grep("needle")
    assert by_bytes["bytes_scanned"] <= 50 and by_bytes["truncated"]
    small_files = PosixWorkspaceStore(store.root, store.lock_dir, limits=replace(
        store.limits, scan=replace(store.limits.scan, max_file_bytes=10)))
    skipped = await small_files.grep("needle")
    assert skipped["matches"] == [] and skipped["skipped"] == 20


async def test_every_scan_gets_a_fresh_clock(store: PosixWorkspaceStore) -> None:
    short = PosixWorkspaceStore(store.root, store.lock_dir, limits=replace(
        store.limits, scan=replace(store.limits.scan, seconds=0.2)))
    await store.write("f.txt", "needle\n")
    await asyncio.sleep(0.3)  # longer than the budget: only the scan's own time counts
    assert (await short.grep("needle"))["timed_out"] is False
    assert (await short.list())["truncated"] is False


async def test_regex_time_limit_bounds_catastrophic_backtracking(
        store: PosixWorkspaceStore) -> None:
    await store.write("a.txt", "needle first\n")
    await store.write("b.txt", "a" * 64 + "!\n")
    quick = PosixWorkspaceStore(store.root, store.lock_dir,
                                limits=replace(store.limits, regex_seconds=0.5))
    started = time.monotonic()
    result = await quick.grep(r"(a+)+$|needle", regex=True)
    elapsed = time.monotonic() - started
    assert result["timed_out"] and result["truncated"]
    assert elapsed < 5, elapsed
    assert result["matches"] == [{"path": "a.txt", "line": 1, "text": "needle first"}]


# ---------------------------------------------------------------- edit / mkdir / delete


async def test_edit(store: PosixWorkspaceStore) -> None:
    await store.write("f.txt", "one two two three\n")
    assert await code_of(store.edit("f.txt", "two", "2")) == "ambiguous_match"
    assert await code_of(store.edit("f.txt", "four", "4")) == "no_match"
    done = await store.edit("f.txt", "two", "2", replace_all=True)
    assert done["replacements"] == 2 and done["sha256"] == sha("one 2 2 three\n")
    assert await code_of(store.edit("f.txt", "one", "1", expected_sha256="0" * 64)) \
        == "sha_mismatch"
    ok = await store.edit("f.txt", "one", "1", expected_sha256=done["sha256"])
    assert (await store.read("f.txt"))["content"] == "1 2 2 three\n" and ok["replacements"] == 1
    (Path(store.root) / "bin.dat").write_bytes(b"\xff\xfe x")
    assert await code_of(store.edit("bin.dat", "x", "y")) == "binary_file"
    assert await code_of(store.edit("missing.txt", "x", "y")) == "not_found"
    assert await code_of(store.edit("f.txt", "", "y")) == "invalid_argument"


async def test_mkdir_and_delete(store: PosixWorkspaceStore, workspace: Any) -> None:
    assert (await store.mkdir("a/b/c"))["created"] is True
    assert (await store.mkdir("a/b/c"))["created"] is False
    assert await code_of(store.mkdir("x/y", parents=False)) == "not_found"
    await store.write("a/file.txt", "data")
    assert await code_of(store.mkdir("a/file.txt")) == "exists"
    assert await code_of(store.delete("a/b")) == "is_directory"
    assert await code_of(store.delete("a/file.txt", expected_sha256="0" * 64)) == "sha_mismatch"
    assert (await store.delete("a/file.txt", expected_sha256=sha("data")))["deleted"]
    assert not (workspace.root / "a/file.txt").exists()
    assert await code_of(store.delete("a/file.txt")) == "not_found"
    assert (workspace.root / "a/b/c").is_dir()  # never recursive


# ---------------------------------------------------------------- markers, locks, cancel


async def test_marker_blocks_writes_not_reads(store: PosixWorkspaceStore) -> None:
    await store.write("f.txt", "hello\n")
    markers = MarkerStore(store.lock_dir)
    markers.write("req-9", {"runner": "test"})
    for call in (store.write("f.txt", "x"), store.edit("f.txt", "hello", "x"),
                 store.delete("f.txt"), store.mkdir("d"), store.ensure_writable()):
        assert await code_of(call) == "sandbox_marker_present"
    assert (await store.read("f.txt"))["content"] == "hello\n"
    assert (await store.stat("f.txt"))["type"] == "file"
    assert (await store.grep("hello"))["matches"]
    assert (await store.glob("*.txt"))["matches"] and (await store.list())["entries"]
    markers.remove("req-9")
    await store.write("f.txt", "x")


async def test_corrupt_marker_still_blocks(store: PosixWorkspaceStore) -> None:
    (Path(store.lock_dir) / "markers").mkdir(parents=True)
    (Path(store.lock_dir) / "markers" / "req-1.json").write_text("{not json")
    assert await code_of(store.write("f.txt", "x")) == "sandbox_marker_present"


async def test_write_lock_excludes_other_writers(store: PosixWorkspaceStore) -> None:
    impatient = PosixWorkspaceStore(store.root, store.lock_dir,
                                    limits=replace(store.limits, lock_timeout_s=0.2))
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with write_lock(Path(store.lock_dir)):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        held.wait(5)
        assert await code_of(impatient.write("f.txt", "x")) == "locked"
        assert (await impatient.list())["entries"] == []  # reads take no lock
    finally:
        release.set()
        thread.join()
    await impatient.write("f.txt", "x")


async def test_cancelled_call_waits_for_its_io(store: PosixWorkspaceStore,
                                              monkeypatch: pytest.MonkeyPatch,
                                              workspace: Any) -> None:
    entered, proceed = threading.Event(), threading.Event()
    original = store._write_sync

    def slow_write(*args: Any) -> Any:
        entered.set()
        proceed.wait(5)
        return original(*args)

    monkeypatch.setattr(store, "_write_sync", slow_write)
    task = asyncio.create_task(store.write("late.txt", "landed"))
    await asyncio.to_thread(entered.wait, 5)
    task.cancel()
    await asyncio.sleep(0.1)
    assert not task.done(), "the cancelled call returned while its write was still running"
    task.cancel()  # a second cancellation must not cut the wait short either
    await asyncio.sleep(0.05)
    assert not task.done()
    proceed.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (workspace.root / "late.txt").read_text() == "landed"
