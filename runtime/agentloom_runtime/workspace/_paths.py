"""Path validation and openat-style walking (stdlib only; also imported by the grep worker).

Every component is opened relative to its parent's directory fd with ``O_NOFOLLOW``, so a
symlink swapped in after any check cannot redirect the walk: the kernel refuses it at open
time (ELOOP / ENOTDIR). Final entries are classified with ``lstat`` and the opened fd is
re-checked with ``fstat`` (type, link count, and identity against the check).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import unicodedata
from collections.abc import Callable
from typing import NoReturn

from .errors import WorkspaceError

MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4096
MAX_DEPTH = 64

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
TMP_PREFIX = ".agentloom-tmp-"
RESERVED_PREFIX = ".agentloom"  # our temp files, lock and volume names: never model paths
# slash look-alikes that NFKC leaves alone (fullwidth ones fold to '/' or '\\')
SLASH_LIKE = frozenset("\u2215\u2044\u29f8\u2571\u29f5\u2216")

_after_check: Callable[[int, str], None] | None = None
"""Test hook: runs between the lstat check of a final entry and its open (race tests)."""

_ERRNO_CODES = {
    errno.ELOOP: "symlink", errno.ENOENT: "not_found", errno.ENOTDIR: "not_a_directory",
    errno.ENAMETOOLONG: "name_too_long", errno.EISDIR: "is_directory", errno.EEXIST: "exists",
    errno.EACCES: "permission_denied", errno.EPERM: "permission_denied",
    errno.ENOSPC: "no_space", errno.EDQUOT: "no_space", errno.EFBIG: "too_large",
    errno.ENOTEMPTY: "exists", errno.EXDEV: "io_error", errno.EROFS: "permission_denied",
}


def fail(code: str, rel: str, message: str) -> NoReturn:
    raise WorkspaceError(code, f"{rel or '.'}: {message}", details={"path": rel or "."})


def os_fail(exc: OSError, rel: str) -> NoReturn:
    code = _ERRNO_CODES.get(exc.errno or 0, "io_error")
    fail(code, rel, os.strerror(exc.errno) if exc.errno else str(exc))


def check_component(name: str, rel: str) -> None:
    """Refuse names that escape, alias or confuse (glob patterns obey the same rules)."""
    if name == "..":
        fail("path_traversal", rel, "'..' is not allowed")
    if "\\" in name:
        fail("invalid_path", rel, "backslashes are not allowed")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        fail("name_too_long", rel, f"a name is longer than {MAX_NAME_BYTES} bytes")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") for ch in name):
        fail("invalid_path", rel, "control, format or surrogate characters are not allowed")
    if name.strip(".") == "":
        fail("invalid_path", rel, "names made of dots only are not allowed")
    if name != name.strip() or name.endswith("."):
        # aliases on SMB/NAS shares and on other hosts; refuse rather than guess
        fail("invalid_path", rel, "leading/trailing spaces or a trailing dot are not allowed")
    if name.startswith("~"):
        fail("invalid_path", rel, "names starting with '~' are not allowed")
    folded = unicodedata.normalize("NFKC", name)
    if "/" in folded or "\\" in folded or folded.strip(".") == "" or SLASH_LIKE & set(name):
        # look-alikes: fullwidth solidus, division slash, one-dot leaders, fullwidth stops ...
        fail("invalid_path", rel, "a name looks like a path separator or dots")
    if folded.casefold().startswith(RESERVED_PREFIX):
        fail("invalid_path", rel, f"names starting with {RESERVED_PREFIX!r} are reserved")


def split_path(path: object, *, allow_root: bool = True) -> tuple[str, ...]:
    """Validate a workspace-relative path; ``()`` is the workspace root."""
    if not isinstance(path, str):
        fail("invalid_path", "", "the path must be a string")
    rel = path
    if "\x00" in path:
        fail("invalid_path", "<nul>", "NUL bytes are not allowed")
    try:
        raw = path.encode("utf-8")
    except UnicodeEncodeError:
        fail("invalid_path", "<undecodable>", "the path is not valid UTF-8")
    if len(raw) > MAX_PATH_BYTES:
        fail("name_too_long", "<long>", f"the path is longer than {MAX_PATH_BYTES} bytes")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":" and path[0].isalpha()):
        fail("absolute_path", rel, "paths are relative to the workspace root")
    text = path[:-1] if path.endswith("/") and path != "/" else path
    parts: list[str] = []
    for name in text.split("/") if text else []:
        if name == ".":
            continue
        if name == "":
            fail("invalid_path", rel, "empty path components are not allowed")
        check_component(name, rel)
        parts.append(name)
    if len(parts) > MAX_DEPTH:
        fail("name_too_long", rel, f"the path is deeper than {MAX_DEPTH} components")
    if not parts and not allow_root:
        fail("is_directory", rel, "the workspace root is a directory")
    return tuple(parts)


def join(parts: tuple[str, ...] | list[str]) -> str:
    return "/".join(parts) or "."


def kind_of(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "special"


def refuse_kind(st: os.stat_result, rel: str, *, want: str) -> None:
    """Refuse anything but ``want`` ("file" or "directory"); files must have one link."""
    kind = kind_of(st.st_mode)
    if kind == "symlink":
        fail("symlink", rel, "symbolic links are not allowed")
    if kind == "special":
        fail("special_file", rel, "devices, FIFOs and sockets are not allowed")
    if want == "file" and kind == "directory":
        fail("is_directory", rel, "is a directory")
    if want == "directory" and kind == "file":
        fail("not_a_directory", rel, "is not a directory")
    if kind == "file" and st.st_nlink > 1:
        fail("hard_link", rel, "files with several hard links are not allowed")


def open_root(root: str) -> int:
    try:
        return os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise WorkspaceError("workspace_unavailable",
                             "the workspace root is missing or not a directory") from exc


def open_dir(dir_fd: int, name: str, rel: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            st = lstat_at(dir_fd, name)
            if st is not None:
                refuse_kind(st, rel, want="directory")
        os_fail(exc, rel)


def walk(root_fd: int, parts: tuple[str, ...], *, create: bool = False,
         mode: int = 0o755) -> int:
    """Open the directory at ``parts`` (creating it when asked, with ``mode``); the caller
    closes the fd."""
    fd = os.dup(root_fd)
    try:
        for i, name in enumerate(parts):
            rel = join(parts[: i + 1])
            if create:
                try:
                    os.mkdir(name, mode, dir_fd=fd)
                    os.fsync(fd)  # the new entry must survive a crash like the file below it
                except FileExistsError:
                    pass
                except OSError as exc:
                    os_fail(exc, rel)
            child = open_dir(fd, name, rel)
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def open_regular(dir_fd: int, name: str, rel: str) -> tuple[int, os.stat_result]:
    """Open an existing regular file for reading, refusing anything else even if swapped."""
    before = lstat_at(dir_fd, name)
    if before is None:
        fail("not_found", rel, "no such file")
    refuse_kind(before, rel, want="file")  # never open a device or FIFO, even non-blocking
    if _after_check is not None:
        _after_check(dir_fd, name)
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        os_fail(exc, rel)
    try:
        st = os.fstat(fd)
        refuse_kind(st, rel, want="file")
        if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            fail("io_error", rel, "the file changed while it was opened; retry")
        os.set_blocking(fd, True)
        return fd, st
    except BaseException:
        os.close(fd)
        raise


def atomic_write(dir_fd: int, name: str, data: bytes, mode: int, rel: str) -> None:
    """Write a temp file in the same directory, fsync it, rename it over ``name``, fsync
    the directory. ``rename`` replaces a symlink entry itself; it never writes through it."""
    tmp = TMP_PREFIX + secrets.token_hex(8)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=dir_fd)
    except OSError as exc:
        os_fail(exc, rel)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        if _after_check is not None:
            _after_check(dir_fd, name)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        os.fsync(dir_fd)
    except OSError as exc:
        _unlink_quietly(dir_fd, tmp)
        os_fail(exc, rel)
    except BaseException:
        _unlink_quietly(dir_fd, tmp)
        raise


def _unlink_quietly(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass
