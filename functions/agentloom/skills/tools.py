"""The model's skill tools (docs/skills.md): ``skill_load`` (the SKILL.md body and the file
list) and ``skill_read`` (one attachment, paged). Both are read-only and safe to re-run
(``resume_inflight``): a call whose fate is unknown after a crash just runs again.

Which skills an instance sees: main — every skill the version binds; a sub-agent — the
skills its template lists (``ToolContext.template``). ``skill_load``'s prompt section
lists exactly those names and descriptions; nothing else is preloaded. Nothing in a
SKILL.md is interpreted: its text is data the model reads, it cannot add tools, widen a
grant (``allowed-tools`` is recorded, never applied) or name a path outside the skill.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentloom_runtime.errors import ToolError
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

from .archive import DEFAULT_LIMITS, SKILL_MD, check_path
from .errors import SkillFileRefused
from .manifest import SkillManifest

IMPL = "skills/v1"
PAGE = 16_000  # characters per skill_read page, by default
MAX_PAGE = 64_000


class SkillNotBound(ToolError):
    code = "skill_not_bound"


class SkillFileNotFound(ToolError):
    code = "skill_file_not_found"


class SkillFileBinary(ToolError):
    code = "skill_file_binary"


@dataclass(frozen=True)
class BoundSkills:
    """The skills of one run: manifests by name, who sees which, and a file reader."""

    manifests: Mapping[str, SkillManifest]
    visible: Callable[[str | None], tuple[str, ...]]  # template -> names
    read: Callable[[SkillManifest, str], bytes]

    def manifest(self, context: ToolContext, name: Any) -> SkillManifest:
        if not isinstance(name, str) or name not in self.visible(context.template):
            shown = ", ".join(self.visible(context.template)) or "none"
            raise SkillNotBound(f"no skill {str(name)[:80]!r} is bound here (bound: "
                                f"{shown})")
        return self.manifests[name]

    def prompt(self, config: Mapping[str, Any], template: str | None) -> str:
        names = self.visible(template)
        if not names:
            return ""
        lines = [f"- {n}: {self.manifests[n].meta.description}" for n in names]
        return ("Skills available (call skill_load with a name to read its instructions "
                "before you use it; skill_read reads its other files; with "
                "workspace_command its files are at /skills/<name>/, read-only):\n"
                + "\n".join(lines))


def _load(skills: BoundSkills) -> Callable[[ToolContext, dict[str, Any]], Any]:
    async def handler(context: ToolContext, arguments: dict[str, Any]) -> Any:
        manifest = skills.manifest(context, arguments["name"])
        body = (await asyncio.to_thread(skills.read, manifest, SKILL_MD)).decode("utf-8-sig")
        # the short parts first: a long body is cut at the run's visible cap (the rest
        # behind read_result), and the mount and file list must survive the cut
        return {"name": manifest.meta.name, "description": manifest.meta.description,
                "mount": f"/skills/{manifest.meta.name}",
                "files": [{"path": f.path, "size": f.size} for f in manifest.files
                          if f.path != SKILL_MD],
                "body": _body(body)}
    return handler


def _body(text: str) -> str:
    lines = text.split("\n")
    if lines and lines[0].rstrip("\r") == "---":  # the frontmatter is already shown
        end = next((i for i, ln in enumerate(lines[1:], 1) if ln.rstrip("\r") == "---"), 0)
        lines = lines[end + 1:]
    return "\n".join(lines).lstrip("\n")


def _read(skills: BoundSkills) -> Callable[[ToolContext, dict[str, Any]], Any]:
    async def handler(context: ToolContext, arguments: dict[str, Any]) -> Any:
        manifest = skills.manifest(context, arguments["name"])
        path = str(arguments["path"]).strip().removeprefix("./")
        try:
            check_path(path, DEFAULT_LIMITS)
        except SkillFileRefused as err:
            raise SkillFileNotFound(err.message) from None
        if manifest.file(path) is None:
            raise SkillFileNotFound(f"skill {manifest.meta.name} has no file {path[:200]!r}")
        data = await asyncio.to_thread(skills.read, manifest, path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise SkillFileBinary(f"{path!r} is not UTF-8 text ({len(data)} bytes); use "
                                  "it through workspace_command at "
                                  f"/skills/{manifest.meta.name}/{path}") from None
        offset, limit = arguments.get("offset", 0), arguments.get("limit", PAGE)
        end = min(len(text), offset + limit)
        return {"name": manifest.meta.name, "path": path, "offset": offset,
                "total_chars": len(text), "content": text[offset:end],
                "next_offset": end if end < len(text) else None}
    return handler


_NAME = {"type": "string", "minLength": 1, "maxLength": 64,
         "description": "a skill name from the list in the instructions"}


def skill_tools(skills: BoundSkills) -> list[ToolDefinition]:
    load = ToolDefinition(
        name="skill_load", description="Read a bound skill's instructions (its SKILL.md "
        "body) and the list of its other files.",
        parameters={"type": "object", "properties": {"name": _NAME}, "required": ["name"],
                    "additionalProperties": False},
        handler=_load(skills), implementation_id=IMPL, tool_id="skill_load",
        read_only=True, resume_inflight=True, before_plan=True, evidence_fields=("name",),
        prompt=skills.prompt)
    read = ToolDefinition(
        name="skill_read", description="Read one text file of a bound skill (a reference, "
        "a script, an asset), a page at a time; next_offset is where the next page starts.",
        parameters={"type": "object", "properties": {
            "name": _NAME,
            "path": {"type": "string", "minLength": 1, "maxLength": 240,
                     "description": "path inside the skill, e.g. references/api.md"},
            "offset": {"type": "integer", "minimum": 0, "maximum": 10_000_000,
                       "default": 0, "description": "first character to return"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE,
                      "default": PAGE, "description": "characters to return at most"}},
            "required": ["name", "path"], "additionalProperties": False},
        handler=_read(skills), implementation_id=IMPL, tool_id="skill_read",
        read_only=True, resume_inflight=True, before_plan=True,
        evidence_fields=("name", "path"))
    return [load, read]
