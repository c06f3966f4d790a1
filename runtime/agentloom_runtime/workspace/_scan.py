"""Budgeted tree scans for list / glob / grep (stdlib only; the grep worker imports it).

Directories are descended with ``O_NOFOLLOW`` opens relative to the parent fd (open fds
= depth <= MAX_DEPTH). Symlinks, special files and hard-linked files are never followed or
read; they are counted in ``skipped``. Every scan stops at its budget and says so.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ._paths import (
    MAX_DEPTH,
    TMP_PREFIX,
    fail,
    join,
    kind_of,
    lstat_at,
    open_dir,
    refuse_kind,
    walk,
)

MAX_LINE_CHARS = 4096  # longer lines are cut before a regex sees them
SHOW_LINE_CHARS = 400  # text of a match line shown to the model
BINARY_SNIFF = 8192


@dataclass
class Budget:
    max_entries: int = 20_000  # directory entries visited
    max_files: int = 20_000  # files read (grep)
    max_bytes: int = 256 * 1024 * 1024  # bytes read (grep)
    max_file_bytes: int = 8 * 1024 * 1024  # larger files are skipped by grep
    max_results: int = 500
    seconds: float = 10.0
    cancel: threading.Event | None = None
    # not an init field: dataclasses.replace() gives every scan a fresh clock
    started: float = field(default_factory=time.monotonic, init=False)

    def expired(self) -> bool:
        if self.cancel is not None and self.cancel.is_set():
            return True
        return time.monotonic() - self.started > self.seconds


@dataclass
class Stats:
    entries: int = 0
    files: int = 0
    bytes: int = 0
    skipped: int = 0
    truncated: bool = False
    timed_out: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"entries_scanned": self.entries, "files_scanned": self.files,
                "bytes_scanned": self.bytes, "skipped": self.skipped,
                "truncated": self.truncated, "timed_out": self.timed_out}


@dataclass(frozen=True)
class Entry:
    rel: str
    parts: tuple[str, ...]
    kind: str  # file | directory | symlink | special
    size: int
    nlink: int
    dir_fd: int  # valid only while the iterator is at this entry
    name: str


def _over(budget: Budget, stats: Stats) -> bool:
    if budget.expired():
        stats.truncated = True
        stats.timed_out = not (budget.cancel is not None and budget.cancel.is_set())
        return True
    if stats.entries >= budget.max_entries:
        stats.truncated = True
        return True
    return False


def walk_tree(dir_fd: int, prefix: tuple[str, ...], budget: Budget, stats: Stats, *,
              recursive: bool, descend: Callable[[tuple[str, ...]], bool] | None = None
              ) -> Iterator[Entry]:
    """Yield entries in sorted order, depth first; stops (``truncated``) at the budget.
    A directory is read only as far as the remaining entry budget (a huge directory made
    by a command must not exhaust memory); then its listing is a sorted partial one."""
    room = budget.max_entries - stats.entries
    try:
        with os.scandir(dir_fd) as it:
            names: list[tuple[str, os.DirEntry[str]]] = []
            for dirent in it:
                if len(names) >= room:
                    stats.truncated = True
                    break
                names.append((dirent.name, dirent))
    except OSError:
        stats.skipped += 1
        return
    names.sort()
    for name, dirent in names:
        if name.startswith(TMP_PREFIX):
            continue  # an atomic write in progress
        if _over(budget, stats):
            return
        stats.entries += 1
        try:
            st = dirent.stat(follow_symlinks=False)
        except OSError:
            stats.skipped += 1
            continue
        parts = (*prefix, name)
        kind = kind_of(st.st_mode)
        yield Entry(join(parts), parts, kind, st.st_size, st.st_nlink, dir_fd, name)
        if kind != "directory" or not recursive or len(parts) >= MAX_DEPTH:
            continue
        if descend is not None and not descend(parts):
            continue
        try:
            child = open_dir(dir_fd, name, join(parts))
        except Exception:
            stats.skipped += 1  # swapped for a symlink, removed, unreadable
            continue
        try:
            yield from walk_tree(child, parts, budget, stats, recursive=True, descend=descend)
        finally:
            os.close(child)
        if stats.truncated:
            return


def usable_file(entry: Entry) -> bool:
    return entry.kind == "file" and entry.nlink == 1


# ---------------------------------------------------------------- glob


def glob_match(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """Component-wise fnmatch; ``**`` matches zero or more components. Case-sensitive."""
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(glob_match(parts[i:], rest) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], head) and glob_match(parts[1:], rest)


def glob_prefix_ok(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """Could a path below directory ``parts`` still match ``pattern``?"""
    for i, name in enumerate(parts):
        if i >= len(pattern):
            return False
        if pattern[i] == "**":
            return True
        if not fnmatch.fnmatchcase(name, pattern[i]):
            return False
    return True


# ---------------------------------------------------------------- grep

Match = tuple[int, str]  # (line number, line text)
_NO_PREFILTER = ("\\A", "\\Z", "\\z", "(?<", "(?!", "(?>", "*+", "++", "?+", "}+")
Matcher = Callable[[bytes], Iterator[Match]]
Emit = Callable[[dict[str, Any]], None]


def literal_matcher(needle: str) -> Matcher:
    """Linear ``bytes.find`` over the whole file; each matching line is reported once."""
    raw = needle.encode("utf-8")

    def match(data: bytes) -> Iterator[Match]:
        pos = data.find(raw)
        line_no, counted_to = 1, 0
        while pos >= 0:
            line_no += data.count(b"\n", counted_to, pos)
            start = data.rfind(b"\n", 0, pos) + 1
            end = data.find(b"\n", pos)
            end = len(data) if end < 0 else end
            yield line_no, data[start:end].decode("utf-8", "replace")
            counted_to = end
            pos = data.find(raw, end)
    return match


def regex_matcher(compiled: re.Pattern[str], budget: Budget) -> Matcher:
    """Per line, lines cut at MAX_LINE_CHARS, a deadline check between lines. A single
    pathological line can still run long in CPython's ``re``: the store therefore runs
    user regexes in a killable worker process (see ``_grep_worker``).

    A MULTILINE search over the whole file first skips files without any match at C speed.
    It is only a filter (a per-line match implies a whole-text match); patterns for which
    that may not hold (text anchors, negative lookaround, atomic or possessive parts) skip
    it."""
    text_pattern = compiled.pattern
    whole = None
    if not any(token in text_pattern for token in _NO_PREFILTER):
        whole = re.compile(text_pattern, compiled.flags | re.MULTILINE)

    def match(data: bytes) -> Iterator[Match]:
        text = data.decode("utf-8", "replace")
        if whole is not None and whole.search(text) is None:
            return
        for line_no, line in enumerate(text.split("\n"), 1):
            if budget.expired():
                return
            if compiled.search(line[:MAX_LINE_CHARS]):
                yield line_no, line
    return match


def folded_literal_matcher(needle: str, budget: Budget) -> Matcher:
    """Case-insensitive literal: an escaped pattern cannot backtrack, so it runs in-process.
    ASCII files are ruled out first with ``bytes.lower`` (exact for ASCII text)."""
    inner = regex_matcher(re.compile(re.escape(needle), re.IGNORECASE), budget)
    if not needle.isascii():
        return inner
    folded = needle.lower().encode()

    def match(data: bytes) -> Iterator[Match]:
        if data.isascii() and folded not in data.lower():
            return iter(())
        return inner(data)
    return match


def grep_tree(root_fd: int, start: tuple[str, ...], matcher: Matcher, budget: Budget,
              stats: Stats, emit: Emit, *, include: tuple[str, ...] | None) -> None:
    """Grep a directory tree, or one file when ``start`` names a file."""
    parent = walk(root_fd, start[:-1]) if start else os.dup(root_fd)
    try:
        st = lstat_at(parent, start[-1]) if start else None
        if start and st is None:
            fail("not_found", join(start), "no such file or directory")
        if st is not None and kind_of(st.st_mode) != "directory":
            refuse_kind(st, join(start), want="file")
            entry = Entry(join(start), start, kind_of(st.st_mode), st.st_size, st.st_nlink,
                          parent, start[-1])
            _grep_entries(iter([entry]), (), matcher, budget, stats, emit, None)
            return
        fd = walk(parent, start[-1:]) if start else os.dup(parent)
        try:
            entries = walk_tree(fd, start, budget, stats, recursive=True)
            _grep_entries(entries, start, matcher, budget, stats, emit, include)
        finally:
            os.close(fd)
    finally:
        os.close(parent)


def _grep_entries(entries: Iterator[Entry], start: tuple[str, ...], matcher: Matcher,
                  budget: Budget, stats: Stats, emit: Emit,
                  include: tuple[str, ...] | None) -> None:
    results = 0
    for entry in entries:
        if not usable_file(entry):
            stats.skipped += entry.kind != "directory"
            continue
        if include is not None and not glob_match(entry.parts[len(start):], include):
            continue
        if entry.size > budget.max_file_bytes:
            stats.skipped += 1
            continue
        if stats.files >= budget.max_files or stats.bytes + entry.size > budget.max_bytes:
            stats.truncated = True
            return
        data = _read_small(entry)
        if data is None:
            stats.skipped += 1
            continue
        stats.files += 1
        stats.bytes += len(data)
        if b"\x00" in data[:BINARY_SNIFF]:
            continue  # binary
        for line_no, text in matcher(data):
            emit({"path": entry.rel, "line": line_no, "text": text[:SHOW_LINE_CHARS]})
            results += 1
            if results >= budget.max_results:
                stats.truncated = True
                return
        if _over(budget, stats):
            return


def _read_small(entry: Entry) -> bytes | None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(entry.name, flags, dir_fd=entry.dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return None  # swapped after the listing
        chunks, left = [], entry.size + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
