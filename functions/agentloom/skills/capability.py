"""``SkillsCapability``: Skills on the capability seam (``agentloom.capabilities``).

- ``pin`` (publish): each draft ``skills`` entry — a name of the space's catalogue, or an
  already pinned ``name@sha256:…`` of a version the space holds — becomes
  ``name@sha256:<hex>``; template ``skills`` stay names (a subset of the agent's).
  An unknown name is a 422 ``skill_not_found`` naming the field.
- ``tools`` (engine build): ``skill_load`` / ``skill_read`` over the pinned versions,
  with the prompt section listing them; none when the version binds no skill.
- ``services``: ``skills`` — the mounts ``workspace_command`` binds read-only at
  ``/skills/<name>`` for the calling instance (main: all; a sub-agent: its template's),
  each version materialized on the workspace filesystem on first use.

``mounts(snapshot, template)`` gives the same list as ``SkillMount`` s (id, content hash,
directory relative to the workspace root) for a host that mounts them another way
(the Fargate task definition of a session).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from agentloom.capabilities import CapabilityBase, RunScope
from agentloom.platform.errors import Invalid
from agentloom.platform.store import PlatformStore
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.snapshot import SKILL_REF, AgentSnapshot, skill_name
from agentloom_runtime.tool_contracts import ToolDefinition

from .archive import DEFAULT_LIMITS, SkillLimits
from .git import DEFAULT_GIT, GitPolicy
from .manifest import SkillManifest
from .materialize import SkillMount, materialize, skill_directory
from .service import SkillService
from .store import SkillStore
from .tools import BoundSkills, skill_tools


def pinned(ref: str) -> tuple[str, str]:
    """(name, content hash) of a pinned reference; ``ConfigError`` for a bare name."""
    match = SKILL_REF.fullmatch(ref)
    if match is None or match["hash"] is None:
        raise ConfigError(f"skill {ref!r} is not pinned to a content hash: publish the "
                          "agent (a draft or an agent file cannot bind skills by name)")
    return match["name"], match["hash"]


def _not_found(field: str, message: str, name: str) -> Invalid:
    return Invalid(message, code="skill_not_found",
                   details={"fields": [{"field": field, "message": message}], "name": name})


class SkillsCapability(CapabilityBase):
    kind = "skills"

    def __init__(self, store: SkillStore, workspace_root: Path, *,
                 git: GitPolicy = DEFAULT_GIT, limits: SkillLimits = DEFAULT_LIMITS) -> None:
        self.store = store
        self.workspace_root = Path(workspace_root)
        self.git = git
        self.limits = limits

    def service(self, platform: PlatformStore) -> SkillService:
        """The API's service over this capability's store and import policy."""
        return SkillService(platform, self.store, git=self.git, limits=self.limits)

    # -- publish -------------------------------------------------------------------------

    def pin(self, space_id: str, config: Mapping[str, Any]) -> dict[str, Any]:
        refs = [self._pin_one(space_id, str(ref), f"config.skills.{i}")
                for i, ref in enumerate(config.get("skills") or ())]
        subagents = [{**t, "skills": [skill_name(str(r)) for r in t.get("skills") or ()]}
                     for t in config.get("subagents") or ()]
        pinned_config = {**config, "skills": refs} if "skills" in config else dict(config)
        if "subagents" in config:
            pinned_config["subagents"] = subagents
        return pinned_config

    def _pin_one(self, space_id: str, ref: str, field: str) -> str:
        match = SKILL_REF.fullmatch(ref)
        name = match["name"] if match else ref
        if match is not None and match["hash"] is not None:
            if self.store.manifest(space_id, match["hash"]) is None:
                raise _not_found(field, f"{field}: this space holds no version "
                                 f"{match['hash'][:19]}… of skill {name!r}", name)
            return ref
        record = self.store.get(space_id, name)
        if record is None:
            raise _not_found(field, f"{field}: no skill {name!r} in this space; import it "
                             f"first (POST /api/v1/spaces/{space_id}/skills)", name)
        return record.ref

    # -- runs ----------------------------------------------------------------------------

    def _bound(self, snapshot: AgentSnapshot) -> BoundSkills:
        manifests: dict[str, SkillManifest] = {}
        for ref in snapshot.skills:
            name, content_hash = pinned(ref)
            manifest = self.store.manifest(snapshot.space_id, content_hash)
            if manifest is None:
                raise ConfigError(f"skill {name} version {content_hash[:19]}… is missing "
                                  f"from space {snapshot.space_id}'s store")
            manifests[name] = manifest
        templates = {t.id: tuple(skill_name(r) for r in t.skills) for t in snapshot.subagents}
        everything = tuple(manifests)

        def visible(template: str | None) -> tuple[str, ...]:
            return everything if template is None else templates.get(template, ())

        def read(manifest: SkillManifest, path: str) -> bytes:
            return self.store.read_file(snapshot.space_id, manifest, path)

        return BoundSkills(manifests=manifests, visible=visible, read=read)

    def tools(self, snapshot: AgentSnapshot, scope: RunScope) -> list[ToolDefinition]:
        if not snapshot.skills:
            return []
        return skill_tools(self._bound(snapshot))

    def services(self, snapshot: AgentSnapshot, scope: RunScope) -> dict[str, Any]:
        if not snapshot.skills:
            return {}
        bound = self._bound(snapshot)

        def host_mounts(template: str | None) -> dict[str, str]:
            found = {}
            for name in bound.visible(template):
                manifest = bound.manifests[name]
                folder = materialize(self.workspace_root, snapshot.space_id, manifest,
                                     partial(bound.read, manifest))
                found[name] = str(folder)
            return found

        return {"skills": host_mounts}

    def mounts(self, snapshot: AgentSnapshot, template: str | None = None
               ) -> list[SkillMount]:
        """The read-only mounts of an instance, relative to the workspace root."""
        templates = {t.id: {skill_name(r) for r in t.skills} for t in snapshot.subagents}
        found = []
        for ref in snapshot.skills:
            name, content_hash = pinned(ref)
            if template is None or name in templates.get(template, set()):
                found.append(SkillMount(name, content_hash,
                                        skill_directory(snapshot.space_id, content_hash)))
        return found
