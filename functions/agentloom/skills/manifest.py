"""What a stored skill is: an immutable ``SkillManifest`` (frontmatter + file list) named
by its content hash, and the space's catalogue entry ``SkillRecord`` (name → the hash
imported last, and where it came from).

The content hash is SHA-256 over the canonical JSON of the sorted ``(path, sha256,
executable)`` list — SKILL.md (and so the name and description) included, the source
excluded: the same tree imported from a zip or from Git is the same skill version.
A pinned reference in a published snapshot is ``name@sha256:<hex>``.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from .format import SkillMeta

if TYPE_CHECKING:  # the archive readers (zipfile, tarfile) load with an upload, not a run
    from .archive import SkillTree

FORMAT: Literal[1] = 1
HASH_PREFIX = "sha256:"


class ManifestFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    size: int
    sha256: str
    executable: bool = False


class SkillManifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal[1] = FORMAT
    content_hash: str  # "sha256:<hex>"
    meta: SkillMeta
    files: tuple[ManifestFile, ...]
    total_bytes: int

    def file(self, path: str) -> ManifestFile | None:
        return next((f for f in self.files if f.path == path), None)


class SkillSource(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["zip", "git", "directory"]
    url: str | None = None
    revision: str | None = None
    commit: str | None = None
    path: str | None = None


class SkillRecord(BaseModel):
    """The catalogue entry of one skill name in a space."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal[1] = FORMAT
    space_id: str
    name: str
    content_hash: str
    description: str
    imported_at: float
    imported_by: str
    source: SkillSource
    file_count: int = Field(ge=1)
    total_bytes: int = Field(ge=0)

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.content_hash}"


def content_hash(tree: SkillTree) -> str:
    listing = [[f.path, hashlib.sha256(f.data).hexdigest(), f.executable]
               for f in tree.files]
    raw = json.dumps(listing, separators=(",", ":"), ensure_ascii=False).encode()
    return HASH_PREFIX + hashlib.sha256(raw).hexdigest()


def manifest_of(tree: SkillTree) -> SkillManifest:
    files = tuple(ManifestFile(path=f.path, size=len(f.data),
                               sha256=hashlib.sha256(f.data).hexdigest(),
                               executable=f.executable) for f in tree.files)
    return SkillManifest(content_hash=content_hash(tree), meta=tree.meta, files=files,
                         total_bytes=sum(f.size for f in files))
