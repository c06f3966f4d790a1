"""Import checks: from a zip (an upload, or ``git archive`` of a revision) or a local
folder to one checked skill tree.

Every check names the file: a path must be relative, of at most ``max_depth`` segments
of ``[A-Za-z0-9_.-]`` (not ``.``/``..``, not starting with ``-``), without backslashes or
drive letters, unique — depth and length counted inside the skill, so a zip whose top
folder is the skill's directory allows what a Git import of that folder allows; only
regular files and folders (no symlinks, hard links, devices, FIFOs, sockets, encrypted
entries); the file count, each file's size, the total and, for
a zip, the archive's size and each entry's compression ratio are capped *before* a byte
is inflated, and the inflated bytes are counted again while reading (a lying header
cannot get past the cap). Exactly one ``SKILL.md``: at the root, or in the single
top-level folder that is the skill's directory (its name must equal the skill's name).
"""

from __future__ import annotations

import io
import os
import re
import stat
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import SkillArchiveInvalid, SkillFileRefused, SkillFormatError, SkillTooLarge
from .format import SkillMeta, parse_skill_md

SKILL_MD = "SKILL.md"
SEGMENT = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,127}$")
IGNORED_PREFIXES = ("__MACOSX/",)  # resource forks macOS adds to zips it makes
KB = 1024
MB = 1024 * KB


@dataclass(frozen=True)
class SkillLimits:
    max_archive_bytes: int = 8 * MB
    max_total_bytes: int = 4 * MB
    max_file_bytes: int = 1 * MB
    max_files: int = 256
    max_depth: int = 6
    max_path_chars: int = 240
    max_ratio: int = 100  # inflated / compressed, per zip entry over 64 KiB


DEFAULT_LIMITS = SkillLimits()


@dataclass(frozen=True)
class SkillFile:
    path: str  # relative to the skill's directory, "/"-separated
    data: bytes
    executable: bool = False


@dataclass(frozen=True)
class SkillTree:
    meta: SkillMeta
    body: str
    files: tuple[SkillFile, ...]  # sorted by path, SKILL.md included


def check_path(path: str, limits: SkillLimits, *, entry: str | None = None
               ) -> tuple[str, ...]:
    """The path's segments, or ``SkillFileRefused`` naming it (or ``entry``: the
    archive entry the path was taken from)."""
    shown = path if entry is None else entry
    if "\\" in path or "\x00" in path:
        raise SkillFileRefused(shown, "path_characters", "backslashes and NUL are refused")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        raise SkillFileRefused(shown, "absolute_path", "absolute paths are refused")
    parts = tuple(p for p in path.rstrip("/").split("/"))
    if any(p in (".", "..") for p in parts):
        raise SkillFileRefused(shown, "traversal", "'.' and '..' segments are refused")
    if len(path) > limits.max_path_chars:
        raise SkillFileRefused(shown, "path_length",
                               f"paths are at most {limits.max_path_chars} characters")
    bad = next((p for p in parts if not SEGMENT.match(p)), None)
    if bad is not None:
        raise SkillFileRefused(shown, "path_characters", f"segment {bad[:60]!r} must match "
                               "[A-Za-z0-9_.-] and not start with '-'")
    if len(parts) > limits.max_depth:
        raise SkillFileRefused(shown, "path_depth", f"paths are at most {limits.max_depth} "
                               "segments deep inside the skill")
    return parts


class _Budget:
    def __init__(self, limits: SkillLimits) -> None:
        self.limits = limits
        self.files = 0
        self.total = 0

    def admit(self, path: str, size: int) -> None:
        lim = self.limits
        self.files += 1
        if self.files > lim.max_files:
            raise SkillTooLarge(f"a skill has at most {lim.max_files} files",
                                reason="file_count")
        if size > lim.max_file_bytes:
            raise SkillTooLarge(f"{path!r} is larger than {lim.max_file_bytes} bytes",
                                path=path, reason="file_size")
        self.total += size
        if self.total > lim.max_total_bytes:
            raise SkillTooLarge(f"the skill is larger than {lim.max_total_bytes} bytes "
                                f"(at {path!r})", path=path, reason="total_size")


def _skill_root(paths: list[str]) -> tuple[str, str | None]:
    """(prefix to strip, the directory name or None) from where SKILL.md is."""
    found = [p for p in paths if p.split("/")[-1] == SKILL_MD]
    if not found:
        raise SkillFormatError("the skill has no SKILL.md (at the root or in its single "
                               "top-level folder)", path=None, reason="skill_md_missing")
    if len(found) > 1:
        raise SkillFormatError(f"one skill per import: found {len(found)} SKILL.md files "
                               f"({', '.join(sorted(found)[:5])})", path=found[1],
                               reason="skill_md_multiple")
    where = found[0].split("/")
    if len(where) == 1:
        return "", None
    if len(where) > 2:
        raise SkillFormatError(f"{found[0]!r}: SKILL.md must be at the root or in one "
                               "top-level folder", path=found[0], reason="skill_md_depth")
    top = where[0]
    outside = next((p for p in paths if not p.startswith(top + "/")), None)
    if outside is not None:
        raise SkillFileRefused(outside, "outside_skill", f"is outside the skill folder "
                               f"{top!r}; an import holds one skill directory")
    return top + "/", top


def build_tree(files: list[SkillFile], directory: str | None) -> SkillTree:
    """The tree of already checked files (paths relative to the skill directory)."""
    ordered = tuple(sorted(files, key=lambda f: f.path))
    skill_md = next(f for f in ordered if f.path == SKILL_MD)
    meta, body = parse_skill_md(skill_md.data, directory=directory)
    return SkillTree(meta=meta, body=body, files=ordered)


# -- zip ---------------------------------------------------------------------------------

def _zip_mode(info: zipfile.ZipInfo) -> int:
    return (info.external_attr >> 16) & 0xFFFF if info.create_system == 3 else 0


def _check_entry(info: zipfile.ZipInfo, limits: SkillLimits) -> None:
    """The entry's own checks; its path with room for a top folder (the path inside
    the skill is checked once the skill's folder is known: ``tree_from_zip``)."""
    name = info.filename
    check_path(name, replace(limits, max_depth=limits.max_depth + 1,
                             max_path_chars=limits.max_path_chars + 129))
    mode = _zip_mode(info)
    kind = stat.S_IFMT(mode)
    if kind == stat.S_IFLNK:
        raise SkillFileRefused(name, "symlink", "symbolic links are refused")
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise SkillFileRefused(name, "special_file", "only regular files and folders")
    if info.flag_bits & 0x1:
        raise SkillFileRefused(name, "encrypted", "encrypted zip entries are refused")
    if info.file_size > 64 * KB and info.file_size > limits.max_ratio * max(
            info.compress_size, 1):
        raise SkillTooLarge(f"{name!r} inflates more than {limits.max_ratio} times (a zip "
                            "bomb?)", path=name, reason="compression_ratio")


def _read_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int) -> bytes:
    try:
        with archive.open(info) as stream:
            data = stream.read(cap + 1)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, ValueError) as err:
        raise SkillArchiveInvalid(f"{info.filename!r} cannot be read from the zip: "
                                  f"{type(err).__name__}", reason="entry_corrupt") from None
    if len(data) > cap or len(data) != info.file_size:
        raise SkillTooLarge(f"{info.filename!r} is not the size its header says",
                            path=info.filename, reason="size_mismatch")
    return data


def tree_from_zip(data: bytes, limits: SkillLimits = DEFAULT_LIMITS) -> SkillTree:
    if len(data) > limits.max_archive_bytes:
        raise SkillTooLarge(f"the zip is larger than {limits.max_archive_bytes} bytes",
                            reason="archive_size")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        raise SkillArchiveInvalid("the upload is not a readable zip archive") from None
    with archive:
        infos = [i for i in infos if not i.filename.startswith(IGNORED_PREFIXES)]
        seen: set[str] = set()
        for info in infos:
            _check_entry(info, limits)
            key = info.filename.rstrip("/")
            if key in seen:
                raise SkillFileRefused(info.filename, "duplicate", "appears twice")
            seen.add(key)
        regular = [i for i in infos if not i.is_dir()]
        prefix, directory = _skill_root([i.filename for i in regular])
        for info in regular:  # a git archive or a zipped folder: inside the skill
            check_path(info.filename[len(prefix):], limits, entry=info.filename)
        budget = _Budget(limits)
        for info in regular:
            budget.admit(info.filename, info.file_size)
        files = [SkillFile(path=i.filename[len(prefix):],
                           data=_read_entry(archive, i, limits.max_file_bytes),
                           executable=bool(_zip_mode(i) & 0o111)) for i in regular]
    return build_tree(files, directory)


# -- a local folder (the CLI, tests) -----------------------------------------------------

def tree_from_directory(root: Path, limits: SkillLimits = DEFAULT_LIMITS) -> SkillTree:
    """The skill in folder ``root`` (whose name is the directory name), read without
    following a link; hard links and special files are refused like in a zip."""
    root = Path(root)
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode):
        raise SkillFileRefused(root.name, "not_a_directory", "is not a folder")
    budget = _Budget(limits)
    files: list[SkillFile] = []
    for folder, dirs, names in os.walk(root, followlinks=False):
        for name in sorted(dirs + names):
            full = Path(folder) / name
            rel = full.relative_to(root).as_posix()
            check_path(rel, limits)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                raise SkillFileRefused(rel, "symlink", "symbolic links are refused")
            if stat.S_ISDIR(st.st_mode):
                continue
            if not stat.S_ISREG(st.st_mode):
                raise SkillFileRefused(rel, "special_file", "only regular files and folders")
            if st.st_nlink > 1:
                raise SkillFileRefused(rel, "hard_link", "hard-linked files are refused")
            budget.admit(rel, st.st_size)
            with open(full, "rb") as stream:
                data = stream.read(limits.max_file_bytes + 1)
            if len(data) != st.st_size:
                raise SkillFileRefused(rel, "changed", "changed while it was read")
            files.append(SkillFile(rel, data, bool(st.st_mode & 0o111)))
    if not any(f.path == SKILL_MD for f in files):
        raise SkillFormatError(f"{root.name}: no SKILL.md at the folder's root", path=None,
                               reason="skill_md_missing")
    extra = [f.path for f in files if f.path.endswith("/" + SKILL_MD)]
    if extra:
        raise SkillFormatError(f"one skill per import: {extra[0]!r} is a second SKILL.md",
                               path=extra[0], reason="skill_md_multiple")
    return build_tree(files, root.name)
