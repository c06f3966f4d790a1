"""``PosixWorkspaceStore``: the default WorkspaceStorage over a local or mounted directory.

Rules (docs/contract.md#file-tools): paths are instance-relative; ``..``, absolute paths, NUL,
over-long names, look-alike separators, symlinks (in any component), hard links, devices,
FIFOs and sockets are refused with a stable ``WorkspaceError.code``. Writes are atomic
(temp file + fsync + rename + directory fsync) under the session write lock, after checking
that no command sandbox of unknown fate holds a marker. Reads hash (sha256) while
streaming. list / glob / grep stop at scan budgets and say ``truncated``.

``owner`` (uid, gid): when commands run as another user (a root host runs them as
``nobody``), every file and directory the store creates or replaces is given to that
user (fchown on the opened entry, fsync'd), so commands and file tools work on the same
files. ``liveness`` is the runner's, for the marker check (see ``MarkerStore``).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ._grep_worker import run_regex_grep
from ._io import storage_call
from ._locking import ensure_dir, write_lock
from ._paths import (
    atomic_write,
    fail,
    join,
    kind_of,
    lstat_at,
    open_regular,
    open_root,
    os_fail,
    refuse_kind,
    split_path,
    walk,
)
from ._scan import (
    Budget,
    Stats,
    folded_literal_matcher,
    glob_match,
    glob_prefix_ok,
    grep_tree,
    literal_matcher,
    walk_tree,
)
from ._textread import ReadRequest, read_range
from .commands import MarkerLiveness, MarkerStore
from .errors import WorkspaceError

JSONDict = dict[str, Any]
_SHA = re.compile(r"^[0-9a-f]{64}$")
_WILD = frozenset("*?[")


@dataclass(frozen=True)
class StoreLimits:
    max_write_bytes: int = 16 * 1024 * 1024
    max_edit_bytes: int = 16 * 1024 * 1024
    max_hash_bytes: int = 256 * 1024 * 1024  # stat hashes files up to this size
    max_read_file_bytes: int = 1024 * 1024 * 1024
    scan: Budget = field(default_factory=Budget)  # list / glob / grep defaults
    regex_seconds: float = 5.0
    lock_timeout_s: float = 30.0


def _sha256_fd(fd: int) -> str:
    digest = hashlib.sha256()
    while chunk := os.read(fd, 1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


def _read_all(fd: int, limit: int, rel: str) -> bytes:
    if os.fstat(fd).st_size > limit:
        fail("too_large", rel, f"the file is larger than {limit} bytes")
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _check_sha(expected: str | None) -> None:
    if expected not in (None, "") and not _SHA.match(str(expected)):
        raise WorkspaceError("invalid_argument", "expected_sha256 must be 64 lowercase hex "
                             "characters, or '' for create-only")


class PosixWorkspaceStore:
    """One instance workspace. Async methods run their blocking I/O in worker threads."""

    def __init__(self, root: str | Path, lock_dir: str | Path, *,
                 limits: StoreLimits | None = None, owner: tuple[int, int] | None = None,
                 liveness: MarkerLiveness | None = None, private: bool = False) -> None:
        self.root = os.fspath(root)
        self.lock_dir = Path(lock_dir)
        self.limits = limits or StoreLimits()
        self.owner = owner
        # private: what the file tools create is the owner's alone (0600 / 0700)
        self._file_mode, self._dir_mode = (0o600, 0o700) if private else (0o644, 0o755)
        self.markers = MarkerStore(self.lock_dir, liveness=liveness)
        ensure_dir(self.lock_dir)
        os.close(open_root(self.root))  # fail early when the root is missing

    # -- plumbing -------------------------------------------------------------------------

    @contextmanager
    def _root(self) -> Iterator[int]:
        fd = open_root(self.root)
        try:
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def _mutation(self) -> Iterator[int]:
        """Write lock + marker check + root fd: the frame of every write."""
        with write_lock(self.lock_dir, timeout_s=self.limits.lock_timeout_s):
            self.markers.refuse_if_pending()
            with self._root() as fd:
                yield fd

    def _own_dirs(self, root: int, parts: tuple[str, ...]) -> None:
        """Give every directory on ``parts`` to ``owner`` (walked with O_NOFOLLOW)."""
        if self.owner is None:
            return
        fd = os.dup(root)
        try:
            for i, name in enumerate(parts):
                child = walk(fd, (name,))
                os.close(fd)
                fd = child
                _own_fd(fd, self.owner, join(parts[: i + 1]))
        finally:
            os.close(fd)

    def _own_file(self, parent: int, name: str, rel: str) -> None:
        """Give the regular file just written to ``owner``: no command runs meanwhile
        (the write lock and the marker check hold), and the opened fd is re-checked."""
        if self.owner is None:
            return
        fd, _ = open_regular(parent, name, rel)
        try:
            _own_fd(fd, self.owner, rel)
        finally:
            os.close(fd)

    def _budget(self, cancel: threading.Event, **overrides: Any) -> Budget:
        return replace(self.limits.scan, cancel=cancel, **{
            k: v for k, v in overrides.items() if v is not None})

    async def ensure_writable(self) -> None:
        """Refuse (``sandbox_marker_present``) while a command marker is pending."""
        await storage_call(lambda _c: self.markers.refuse_if_pending())

    # -- read-only ------------------------------------------------------------------------

    async def read(self, path: str, *, start_line: int = 1, end_line: int | None = None,
                   max_lines: int = 2000, max_bytes: int = 64 * 1024) -> JSONDict:
        parts = split_path(path, allow_root=False)
        if start_line == 0 or (end_line is not None and (start_line < 0 or end_line < start_line)
                               ) or max_lines < 1 or max_bytes < 1:
            raise WorkspaceError("invalid_argument", "start_line is 1-based (negative counts "
                                 "from the end, without end_line); end_line >= start_line")
        req = ReadRequest(start_line, end_line, max_lines, max_bytes)
        return await storage_call(lambda _c: self._read_sync(parts, req))

    def _read_sync(self, parts: tuple[str, ...], req: ReadRequest) -> JSONDict:
        rel = join(parts)
        with self._root() as root, self._open_file(root, parts) as (fd, st):
            if st.st_size > self.limits.max_read_file_bytes:
                fail("too_large", rel, "the file is too large to read")
            return {"path": rel, **read_range(fd, req)}

    @contextmanager
    def _open_file(self, root: int, parts: tuple[str, ...]
                   ) -> Iterator[tuple[int, os.stat_result]]:
        parent = walk(root, parts[:-1])
        try:
            fd, st = open_regular(parent, parts[-1], join(parts))
        finally:
            os.close(parent)
        try:
            yield fd, st
        finally:
            os.close(fd)

    async def stat(self, path: str) -> JSONDict:
        parts = split_path(path)
        return await storage_call(lambda _c: self._stat_sync(parts))

    def _stat_sync(self, parts: tuple[str, ...]) -> JSONDict:
        rel = join(parts)
        with self._root() as root:
            if not parts:
                top = os.fstat(root)
                return {"path": ".", "type": "directory", "size": top.st_size,
                        "mtime": top.st_mtime}
            parent = walk(root, parts[:-1])
            try:
                entry = lstat_at(parent, parts[-1])
                if entry is None:
                    fail("not_found", rel, "no such file or directory")
                if kind_of(entry.st_mode) == "directory":
                    os.close(walk(parent, parts[-1:]))  # refuses a swapped-in symlink
                    return {"path": rel, "type": "directory", "size": entry.st_size,
                            "mtime": entry.st_mtime}
                fd, st = open_regular(parent, parts[-1], rel)
            finally:
                os.close(parent)
            try:
                sha = _sha256_fd(fd) if st.st_size <= self.limits.max_hash_bytes else None
            finally:
                os.close(fd)
        return {"path": rel, "type": "file", "size": st.st_size, "mtime": st.st_mtime,
                "sha256": sha}

    async def list(self, path: str = ".", *, recursive: bool = False,
                   max_entries: int | None = None) -> JSONDict:
        parts = split_path(path)
        return await storage_call(lambda c: self._list_sync(parts, recursive, max_entries, c))

    def _list_sync(self, parts: tuple[str, ...], recursive: bool, max_entries: int | None,
                   cancel: threading.Event) -> JSONDict:
        budget = self._budget(cancel, max_entries=max_entries)
        stats = Stats()
        entries: list[JSONDict] = []
        with self._root() as root:
            fd = walk(root, parts)
            try:
                for e in walk_tree(fd, parts, budget, stats, recursive=recursive):
                    item: JSONDict = {"path": e.rel, "type": e.kind}
                    if e.kind == "file":
                        item["size"] = e.size
                        if e.nlink > 1:
                            item["type"] = "hard_link"
                    entries.append(item)
            finally:
                os.close(fd)
        return {"path": join(parts), "entries": entries, **stats.to_dict()}

    async def glob(self, pattern: str, *, max_results: int | None = None) -> JSONDict:
        parts = split_path(pattern, allow_root=False)
        return await storage_call(lambda c: self._glob_sync(parts, max_results, c))

    def _glob_sync(self, pattern: tuple[str, ...], max_results: int | None,
                   cancel: threading.Event) -> JSONDict:
        """The literal prefix of the pattern is walked like any path (symlinks refused);
        the rest is matched while scanning below it."""
        budget = self._budget(cancel, max_results=max_results)
        stats = Stats()
        matches: list[JSONDict] = []
        n = next((i for i, p in enumerate(pattern) if p == "**" or set(p) & _WILD), None)
        with self._root() as root:
            if n is None:  # no wildcard: a plain lookup
                info = self._stat_sync(pattern)
                matches.append({"path": info["path"], "type": info["type"]})
                return {"pattern": join(pattern), "matches": matches, **stats.to_dict()}
            fd = walk(root, pattern[:n])
            try:
                tree = walk_tree(fd, pattern[:n], budget, stats, recursive=True,
                                 descend=lambda p: glob_prefix_ok(p, pattern))
                for e in tree:
                    if not glob_match(e.parts, pattern):
                        continue
                    if e.kind not in ("file", "directory") or (e.kind == "file" and e.nlink > 1):
                        stats.skipped += 1
                        continue
                    matches.append({"path": e.rel, "type": e.kind})
                    if len(matches) >= budget.max_results:
                        stats.truncated = True
                        break
            finally:
                os.close(fd)
        return {"pattern": join(pattern), "matches": matches, **stats.to_dict()}

    async def grep(self, pattern: str, *, path: str = ".", include: str | None = None,
                   regex: bool = False, case_sensitive: bool = True,
                   max_results: int | None = None) -> JSONDict:
        if not isinstance(pattern, str) or not pattern or "\x00" in pattern:
            raise WorkspaceError("invalid_argument", "the pattern must be a non-empty string")
        parts = split_path(path)
        inc = split_path(include, allow_root=False) if include is not None else None
        return await storage_call(lambda c: self._grep_sync(
            pattern, parts, inc, regex, case_sensitive, max_results, c))

    def _grep_sync(self, pattern: str, parts: tuple[str, ...], include: tuple[str, ...] | None,
                   regex: bool, case_sensitive: bool, max_results: int | None,
                   cancel: threading.Event) -> JSONDict:
        budget = self._budget(cancel, max_results=max_results)
        if regex:
            return self._grep_regex(pattern, parts, include, not case_sensitive, budget)
        stats = Stats()
        matches: list[JSONDict] = []
        matcher = (literal_matcher(pattern) if case_sensitive
                   else folded_literal_matcher(pattern, budget))
        with self._root() as root:
            grep_tree(root, parts, matcher, budget, stats, matches.append, include=include)
        return {"pattern": pattern, "path": join(parts), "regex": False, "matches": matches,
                **stats.to_dict()}

    def _grep_regex(self, pattern: str, parts: tuple[str, ...],
                    include: tuple[str, ...] | None, ignore_case: bool,
                    budget: Budget) -> JSONDict:
        seconds = min(budget.seconds, self.limits.regex_seconds)
        found = run_regex_grep(self.root, parts, pattern, include, ignore_case,
                               replace(budget, seconds=seconds))
        return {"pattern": pattern, "path": join(parts), "regex": True, **found}

    # -- mutations ------------------------------------------------------------------------

    async def write(self, path: str, content: str, *,
                    expected_sha256: str | None = None) -> JSONDict:
        parts = split_path(path, allow_root=False)
        _check_sha(expected_sha256)
        data = content.encode("utf-8")
        if len(data) > self.limits.max_write_bytes:
            fail("too_large", join(parts), "the content is too large")
        return await storage_call(lambda _c: self._write_sync(parts, data, expected_sha256))

    def _write_sync(self, parts: tuple[str, ...], data: bytes, expected: str | None) -> JSONDict:
        rel = join(parts)
        with self._mutation() as root:
            parent = walk(root, parts[:-1], create=True, mode=self._dir_mode)
            try:
                st = lstat_at(parent, parts[-1])
                if st is not None:
                    refuse_kind(st, rel, want="file")
                    if expected == "":
                        fail("exists", rel, "the file exists (expected_sha256 '' = create only)")
                    if expected is not None:
                        self._check_current(parent, parts, expected)
                elif expected:
                    fail("not_found", rel, "expected_sha256 was given but the file is missing")
                mode = (st.st_mode & 0o777) if st is not None else self._file_mode
                atomic_write(parent, parts[-1], data, mode, rel)
                self._own_file(parent, parts[-1], rel)
            finally:
                os.close(parent)
            self._own_dirs(root, parts[:-1])
        return {"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                "created": st is None}

    def _check_current(self, parent: int, parts: tuple[str, ...], expected: str, *,
                       content: bool = False) -> bytes:
        """Verify ``expected`` (when non-empty) against the file; return its bytes when
        ``content`` is asked for, else hash by streaming."""
        fd, _ = open_regular(parent, parts[-1], join(parts))
        try:
            if content:
                data = _read_all(fd, self.limits.max_edit_bytes, join(parts))
                actual = hashlib.sha256(data).hexdigest()
            else:
                data, actual = b"", _sha256_fd(fd)
        finally:
            os.close(fd)
        if expected and actual != expected:
            raise WorkspaceError("sha_mismatch", f"{join(parts)}: the file changed "
                                 "(sha256 differs); read it again", details={"sha256": actual})
        return data

    async def edit(self, path: str, old_text: str, new_text: str, *, replace_all: bool = False,
                   expected_sha256: str | None = None) -> JSONDict:
        parts = split_path(path, allow_root=False)
        _check_sha(expected_sha256)
        if expected_sha256 == "":
            raise WorkspaceError("invalid_argument", "edit needs an existing file")
        if not old_text:
            raise WorkspaceError("invalid_argument", "old_text must not be empty")
        return await storage_call(lambda _c: self._edit_sync(
            parts, old_text, new_text, replace_all, expected_sha256))

    def _edit_sync(self, parts: tuple[str, ...], old: str, new: str, replace_all: bool,
                   expected: str | None) -> JSONDict:
        rel = join(parts)
        with self._mutation() as root:
            parent = walk(root, parts[:-1])
            try:
                st = _existing_file(parent, parts[-1], rel)
                raw = self._check_current(parent, parts, expected or "", content=True)
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    fail("binary_file", rel, "the file is not UTF-8 text")
                count = text.count(old)
                if count == 0:
                    fail("no_match", rel, "old_text was not found")
                if count > 1 and not replace_all:
                    raise WorkspaceError("ambiguous_match", f"{rel}: old_text occurs {count} "
                                         "times; add context or set replace_all",
                                         details={"matches": count})
                data = text.replace(old, new).encode("utf-8")
                if len(data) > self.limits.max_write_bytes:
                    fail("too_large", rel, "the edited file is too large")
                atomic_write(parent, parts[-1], data, st.st_mode & 0o777, rel)
                self._own_file(parent, parts[-1], rel)
            finally:
                os.close(parent)
        return {"path": rel, "replacements": count, "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest()}

    async def mkdir(self, path: str, *, parents: bool = True) -> JSONDict:
        parts = split_path(path, allow_root=False)
        return await storage_call(lambda _c: self._mkdir_sync(parts, parents))

    def _mkdir_sync(self, parts: tuple[str, ...], parents: bool) -> JSONDict:
        rel = join(parts)
        with self._mutation() as root:
            parent = walk(root, parts[:-1], create=parents, mode=self._dir_mode)
            try:
                st = lstat_at(parent, parts[-1])
                if st is not None:
                    if kind_of(st.st_mode) == "file" and st.st_nlink == 1:
                        fail("exists", rel, "a file exists at this path")
                    refuse_kind(st, rel, want="directory")
                    os.close(walk(parent, parts[-1:]))
                    return {"path": rel, "created": False}
                os.close(walk(parent, parts[-1:], create=True, mode=self._dir_mode))
            finally:
                os.close(parent)
            self._own_dirs(root, parts)
        return {"path": rel, "created": True}

    async def delete(self, path: str, *, expected_sha256: str | None = None) -> JSONDict:
        parts = split_path(path, allow_root=False)
        _check_sha(expected_sha256)
        return await storage_call(lambda _c: self._delete_sync(parts, expected_sha256))

    def _delete_sync(self, parts: tuple[str, ...], expected: str | None) -> JSONDict:
        rel = join(parts)
        with self._mutation() as root:
            parent = walk(root, parts[:-1])
            try:
                _existing_file(parent, parts[-1], rel)  # never a directory: no recursive delete
                if expected:
                    self._check_current(parent, parts, expected)
                try:
                    os.unlink(parts[-1], dir_fd=parent)  # unlink never follows a swapped link
                except OSError as exc:
                    os_fail(exc, rel)
                os.fsync(parent)
            finally:
                os.close(parent)
        return {"path": rel, "deleted": True}


def _own_fd(fd: int, owner: tuple[int, int], rel: str) -> None:
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid) != owner:
        try:
            os.fchown(fd, *owner)
            os.fsync(fd)
        except OSError as exc:
            os_fail(exc, rel)


def _existing_file(parent: int, name: str, rel: str) -> os.stat_result:
    """The regular file ``name`` in ``parent`` (no link, no special file), or a refusal."""
    st = lstat_at(parent, name)
    if st is None:
        fail("not_found", rel, "no such file")
    refuse_kind(st, rel, want="file")
    return st
