"""The SKILL.md format (the public Agent Skills format): YAML frontmatter between ``---``
lines, then a Markdown body.

Honoured: ``name`` (1–64 chars, lowercase letters, digits and single hyphens, not at
either end; equal to the skill's directory name when it has one), ``description``
(1–1,024 chars, not only whitespace; what the prompt lists). Kept and shown, never
acted on: ``license``, ``compatibility`` (≤ 500 chars), ``metadata`` (a map of strings),
``allowed-tools`` (experimental in the format; a SKILL.md cannot add or restrict tools
here). Any other key is refused, so a typo is not silently ignored.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import SkillFormatError

NAME = re.compile(r"^[a-z0-9](?:[a-z0-9]|-(?!-)){0,62}[a-z0-9]$|^[a-z0-9]$")
MAX_SKILL_MD = 256 * 1024
MAX_FRONTMATTER = 16 * 1024
KNOWN = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")


class SkillMeta(BaseModel):
    """The frontmatter, checked."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(min_length=1, max_length=64)
    description: str = Field(min_length=1, max_length=1024)
    license: str | None = Field(default=None, max_length=500)
    compatibility: str | None = Field(default=None, max_length=500)
    metadata: dict[str, str] = Field(default_factory=dict, max_length=50)
    allowed_tools: str | None = Field(default=None, alias="allowed-tools", max_length=2_000)

    @field_validator("description")
    @classmethod
    def _described(cls, value: str) -> str:
        if not value.strip():  # the prompt's skill list would show nothing
            raise ValueError("must not be blank (only whitespace)")
        return value


def check_name(name: str, what: str = "name") -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise SkillFormatError(
            f"SKILL.md: {what} {str(name)[:80]!r} must be 1-64 lowercase letters, digits "
            "and hyphens (no leading, trailing or doubled hyphen)", reason="name")
    return name


def _split(text: str) -> tuple[str, str]:
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r") != "---":
        raise SkillFormatError("SKILL.md must start with a '---' line opening the YAML "
                               "frontmatter", reason="frontmatter_missing")
    for index, line in enumerate(lines[1:], start=1):
        if line.rstrip("\r") == "---":
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1:])
    raise SkillFormatError("SKILL.md: the frontmatter has no closing '---' line",
                           reason="frontmatter_unclosed")


def _yaml(front: str) -> dict[str, Any]:
    if len(front.encode()) > MAX_FRONTMATTER:
        raise SkillFormatError(f"SKILL.md: the frontmatter is over {MAX_FRONTMATTER} bytes",
                               reason="frontmatter_size")
    import yaml  # the parser loads with the first SKILL.md read, not with the package

    try:
        data = yaml.safe_load(front)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        raise SkillFormatError(f"SKILL.md: the frontmatter is not valid YAML{where}",
                               reason="yaml") from None
    except RecursionError:
        raise SkillFormatError("SKILL.md: the frontmatter is nested too deeply",
                               reason="yaml") from None
    if not isinstance(data, dict):
        raise SkillFormatError("SKILL.md: the frontmatter must be a YAML mapping",
                               reason="yaml")
    return data


def parse_skill_md(raw: bytes, *, directory: str | None) -> tuple[SkillMeta, str]:
    """(the checked frontmatter, the body). ``directory``: the skill folder's name, which
    ``name`` must equal; None when the archive has SKILL.md at its root."""
    if len(raw) > MAX_SKILL_MD:
        raise SkillFormatError(f"SKILL.md is over {MAX_SKILL_MD} bytes", reason="size")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise SkillFormatError(f"SKILL.md is not UTF-8 text (invalid byte at offset "
                               f"{err.start})", reason="encoding") from None
    front, body = _split(text)
    data = _yaml(front)
    unknown = sorted(str(k) for k in data if k not in KNOWN)
    if unknown:
        raise SkillFormatError(f"SKILL.md: unknown frontmatter field(s) "
                               f"{', '.join(map(repr, unknown))}; known: {', '.join(KNOWN)}",
                               reason="unknown_field")
    try:
        meta = SkillMeta.model_validate(data)
    except ValidationError as err:
        item = err.errors()[0]
        where = ".".join(str(p) for p in item["loc"]) or "frontmatter"
        raise SkillFormatError(f"SKILL.md: {where}: {item['msg']}", reason="field") from None
    check_name(meta.name)
    if directory is not None and directory != meta.name:
        raise SkillFormatError(f"SKILL.md: name {meta.name!r} must equal the skill's "
                               f"directory name {directory!r}", reason="name_mismatch")
    return meta, body.lstrip("\n")
