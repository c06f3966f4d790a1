"""Skill versions on the workspace filesystem (a local folder, or EFS in AWS), where the
command sandbox mounts them read-only at ``/skills/<name>``.

Layout, outside every session workspace (and outside the lock directory)::

    <workspace root>/.agentloom-skills/<space>/<hex of the content hash>/<files…>

Content addressed and written once: into a private temporary folder beside it, every
file checked against the manifest's SHA-256, files 0444 (0555 when executable), folders
0555, then one ``rename`` — a reader sees the whole version or none, and two writers
racing lose nothing (the loser removes its copy). An existing folder is never rewritten.
A temporary folder left by a writer that died is removed by a later writer once it is
an hour old.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentloom_runtime.errors import ConfigError, PersistenceError

from .manifest import HASH_PREFIX, SkillManifest

FOLDER = ".agentloom-skills"
STALE_S = 3600.0
_HEX = re.compile(r"^[0-9a-f]{64}$")
_SPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class SkillMount:
    """One read-only mount of a command: ``/skills/<skill_id>`` ← ``directory`` (relative
    to the workspace root: the same on the host, in a Lambda's EFS mount and for a
    Fargate task's EFS volume)."""

    skill_id: str
    content_hash: str
    directory: str


def skill_directory(space_id: str, content_hash: str) -> str:
    hexdigest = content_hash.removeprefix(HASH_PREFIX)
    if not _HEX.match(hexdigest) or not _SPACE.match(space_id):
        raise ConfigError(f"not a skill version: {space_id!r} {content_hash[:80]!r}")
    return f"{FOLDER}/{space_id}/{hexdigest}"


def materialize(root: Path, space_id: str, manifest: SkillManifest,
                read: Callable[[str], bytes]) -> Path:
    """The version's folder under ``root`` (written now unless it exists)."""
    final = Path(root) / skill_directory(space_id, manifest.content_hash)
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    for folder in (Path(root) / FOLDER, final.parent):
        with contextlib.suppress(OSError):  # others (the sandbox user) must traverse
            folder.chmod(0o755)
    _sweep(final.parent)
    scratch = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
    try:
        _write(scratch, manifest, read)
        try:
            os.rename(scratch, final)
        except OSError:
            if not final.is_dir():
                raise
            _remove(scratch)  # someone else wrote the same version first
    except BaseException:
        _remove(scratch)
        raise
    return final


def _write(scratch: Path, manifest: SkillManifest, read: Callable[[str], bytes]) -> None:
    for entry in manifest.files:
        data = read(entry.path)
        if hashlib.sha256(data).hexdigest() != entry.sha256:
            raise PersistenceError(f"skill {manifest.meta.name}: {entry.path} does not "
                                   "match its manifest", details={
                                       "content_hash": manifest.content_hash})
        target = scratch / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        target.chmod(0o555 if entry.executable else 0o444)
    for folder, dirs, _ in os.walk(scratch, topdown=False):
        for name in dirs:
            (Path(folder) / name).chmod(0o555)
    scratch.chmod(0o555)


def _sweep(parent: Path) -> None:
    cutoff = time.time() - STALE_S
    for left in parent.glob(".tmp-*"):
        with contextlib.suppress(OSError):
            if left.lstat().st_mtime < cutoff:
                _remove(left)


def _remove(folder: Path) -> None:
    if not folder.exists():
        return
    for path, dirs, _ in os.walk(folder):
        for name in dirs:
            with contextlib.suppress(OSError):
                (Path(path) / name).chmod(0o755)
    with contextlib.suppress(OSError):
        folder.chmod(0o755)
    shutil.rmtree(folder, ignore_errors=True)
