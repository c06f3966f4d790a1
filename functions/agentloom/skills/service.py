"""``SkillService``: the space's skills as the API uses them — import (zip or Git),
list, get (metadata + files), delete — with the platform's access rules: any member
reads, admins and owners import and delete; a space the caller is not in is 404.

Delete retires the *name* (no new publish can bind it; importing it again brings it
back) and keeps every stored version: a published agent version pinned one
(``name@sha256:…``) and its runs, old or resumed, must still load it.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from agentloom.platform.access import member_of
from agentloom.platform.errors import BadRequest, NotFound
from agentloom.platform.identity import Principal
from agentloom.platform.store import PlatformStore

from .archive import DEFAULT_LIMITS, SkillLimits, SkillTree, tree_from_zip
from .errors import SkillFormatError
from .format import check_name
from .git import DEFAULT_GIT, GitPolicy, tree_from_git
from .manifest import SkillManifest, SkillRecord, SkillSource
from .store import SkillStore


@dataclass(frozen=True)
class SkillDetail:
    record: SkillRecord
    manifest: SkillManifest


class SkillService:
    def __init__(self, platform: PlatformStore, skills: SkillStore, *,
                 git: GitPolicy = DEFAULT_GIT, limits: SkillLimits = DEFAULT_LIMITS) -> None:
        self.platform = platform
        self.skills = skills
        self.git = git
        self.limits = limits

    def _import(self, who: Principal, space_id: str, tree: SkillTree,
                source: SkillSource) -> tuple[SkillRecord, bool]:
        return self.skills.import_tree(space_id, tree, source, user_id=who.user_id)

    def import_zip(self, who: Principal, space_id: str, data: bytes | str
                   ) -> tuple[SkillRecord, bool]:
        """``data``: the zip's bytes, or its standard base64 text."""
        member_of(self.platform, who, space_id, "admin")
        if isinstance(data, str):
            try:
                data = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise BadRequest("archive must be standard base64 of a zip file",
                                 code="skill_archive_invalid") from None
        return self._import(who, space_id, tree_from_zip(data, self.limits),
                            SkillSource(kind="zip"))

    def import_git(self, who: Principal, space_id: str, url: str, revision: str,
                   path: str) -> tuple[SkillRecord, bool]:
        member_of(self.platform, who, space_id, "admin")
        tree, source = tree_from_git(url, revision, path, policy=self.git,
                                     limits=self.limits)
        return self._import(who, space_id, tree, source)

    def list(self, who: Principal, space_id: str) -> list[SkillRecord]:
        member_of(self.platform, who, space_id)
        return self.skills.list(space_id)

    def get(self, who: Principal, space_id: str, name: str) -> SkillDetail:
        member_of(self.platform, who, space_id)
        record = self._record(space_id, name)
        manifest = self.skills.manifest(space_id, record.content_hash)
        if manifest is None:  # pragma: no cover - the manifest is written first
            raise NotFound(f"skill {name} not found", code="skill_not_found")
        return SkillDetail(record, manifest)

    def delete(self, who: Principal, space_id: str, name: str) -> SkillRecord:
        member_of(self.platform, who, space_id, "admin")
        record = self._record(space_id, name)
        self.skills.delete(space_id, name)
        return record

    def _record(self, space_id: str, name: str) -> SkillRecord:
        try:
            check_name(name)
        except SkillFormatError:
            raise NotFound(f"skill {name[:80]!r} not found", code="skill_not_found") from None
        record = self.skills.get(space_id, name)
        if record is None:
            raise NotFound(f"skill {name} not found", code="skill_not_found")
        return record
