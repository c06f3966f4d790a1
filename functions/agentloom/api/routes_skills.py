"""Skill routes (``agentloom.skills``), prefix ``/api/v1``:

    POST    /spaces/{s}/skills          admin   import one skill (zip or Git)
    GET     /spaces/{s}/skills          member  the space's skills
    GET     /spaces/{s}/skills/{name}   member  metadata, frontmatter and file list
    DELETE  /spaces/{s}/skills/{name}   admin   retire the name (versions stay)

The import body names exactly one source: ``zip_base64`` (standard base64 of a zip; the
API's 1 MiB request limit makes that ~750 KB of zip — a raw binary body is not accepted,
since the gate refuses bodies that are not UTF-8) or ``git`` (``url``, ``revision``,
``path``). 201 for a new version of the name, 200 when the content is the one the name
already has (an idempotent re-import). The service is the ``SkillsCapability`` the host
wired (503 ``skills_unavailable`` without one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentloom.api.routing import declare, json_response
from agentloom.platform.access import member_of
from agentloom.platform.domain import Role
from agentloom.platform.errors import Unavailable
from agentloom.platform.identity import Principal

if TYPE_CHECKING:
    from agentloom.api._resolver import ApiResolver
    from agentloom.platform.admin import AdminService
    from agentloom.platform.sessions import SessionService
    from agentloom.skills import SkillDetail, SkillRecord, SkillService

P = "/api/v1"
TAG = ["skills"]


class GitSourceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2_000, description="https:// only in "
                     "production (docs/skills.md says why)")
    revision: str = Field(min_length=1, max_length=200,
                          description="a branch, tag or commit id")
    path: str = Field(default="", max_length=240, description="the skill's directory in "
                      "the repository ('' = the root); its name must equal the skill's")


class SkillImportIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    zip_base64: str | None = Field(default=None, max_length=1_400_000)
    git: GitSourceIn | None = None

    @model_validator(mode="after")
    def _one_source(self) -> SkillImportIn:
        if (self.zip_base64 is None) == (self.git is None):
            raise ValueError("give exactly one of zip_base64 or git")
        return self


class SkillSourceOut(BaseModel):
    kind: str
    url: str | None = None
    revision: str | None = None
    commit: str | None = None
    path: str | None = None


class SkillOut(BaseModel):
    name: str
    ref: str = Field(description="what a published version pins: name@sha256:<hex>")
    content_hash: str
    description: str
    file_count: int
    total_bytes: int
    imported_at: float
    imported_by: str
    source: SkillSourceOut


class SkillImportOut(BaseModel):
    skill: SkillOut
    created: bool


class SkillsOut(BaseModel):
    items: list[SkillOut]


class SkillFileOut(BaseModel):
    path: str
    size: int
    sha256: str
    executable: bool


class SkillDetailOut(SkillOut):
    license: str | None = None
    compatibility: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    allowed_tools: str | None = Field(default=None, description="recorded, not applied")
    files: list[SkillFileOut]


def _out(record: SkillRecord) -> SkillOut:
    return SkillOut(name=record.name, ref=record.ref, content_hash=record.content_hash,
                    description=record.description, file_count=record.file_count,
                    total_bytes=record.total_bytes, imported_at=record.imported_at,
                    imported_by=record.imported_by,
                    source=SkillSourceOut(**record.source.model_dump()))


def _detail(found: SkillDetail) -> SkillDetailOut:
    meta = found.manifest.meta
    return SkillDetailOut(**_out(found.record).model_dump(), license=meta.license,
                          compatibility=meta.compatibility, metadata=dict(meta.metadata),
                          allowed_tools=meta.allowed_tools,
                          files=[SkillFileOut(**f.model_dump())
                                 for f in found.manifest.files])


def _service(admin: AdminService, who: Principal, space_id: str,
             role: Role = "member") -> SkillService:
    """The service, once the caller may see the space (a deployment without skills
    answers 404/403 like any other to those who may not)."""
    from agentloom.skills import SkillsCapability  # the service loads with its first use

    member_of(admin.store, who, space_id, role)
    capability = admin.capabilities.find(SkillsCapability)
    if capability is not None:
        return capability.service(admin.store)
    raise Unavailable("this deployment has no skills", code="skills_unavailable")


def register(app: ApiResolver, admin: AdminService, sessions: SessionService) -> None:
    base = f"{P}/spaces/<space_id>/skills"

    @app.post(base, tags=TAG, responses=declare(
        403, 404, ok={200: "The name already has this content", 201: "Imported"},
        model=SkillImportOut, body=True))
    def import_skill(space_id: str, body: SkillImportIn) -> Response[Any]:
        who = app.principal()
        service = _service(admin, who, space_id, "admin")
        if body.git is not None:
            record, created = service.import_git(who, space_id, body.git.url,
                                                 body.git.revision, body.git.path)
        else:
            record, created = service.import_zip(who, space_id, body.zip_base64 or "")
        return json_response(201 if created else 200,
                             SkillImportOut(skill=_out(record), created=created))

    @app.get(base, tags=TAG, responses=declare(403, 404))
    def list_skills(space_id: str) -> SkillsOut:
        who = app.principal()
        return SkillsOut(items=[_out(r) for r in
                                _service(admin, who, space_id).list(who, space_id)])

    @app.get(f"{base}/<name>", tags=TAG, responses=declare(403, 404))
    def get_skill(space_id: str, name: str) -> SkillDetailOut:
        who = app.principal()
        return _detail(_service(admin, who, space_id).get(who, space_id, name))

    @app.delete(f"{base}/<name>", tags=TAG, responses=declare(403, 404))
    def delete_skill(space_id: str, name: str) -> SkillOut:
        who = app.principal()
        return _out(_service(admin, who, space_id, "admin").delete(who, space_id, name))
