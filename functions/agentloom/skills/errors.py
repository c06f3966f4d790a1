"""Skill errors: platform errors (each with its HTTP status and a stable code) that name
the file at fault::

    PlatformError
    ├── Invalid 422
    │   ├── SkillFormatError     skill_format        SKILL.md missing, doubled or invalid
    │   ├── SkillFileRefused     skill_file_refused  a link, special file, traversal,
    │   │                                            absolute path, bad characters, depth
    │   ├── SkillArchiveInvalid  skill_archive_invalid  not a zip, encrypted, corrupt
    │   └── SkillSourceFailed    skill_source_failed    git could not give the revision
    └── TooLarge 413
        └── SkillTooLarge        skill_too_large     total size, file count, one file,
                                                     the compression ratio (a zip bomb)

``details`` holds ``path`` (the file, when there is one) and ``reason``; never content.
"""

from __future__ import annotations

from agentloom.platform.errors import Invalid, TooLarge


def _details(path: str | None, reason: str) -> dict[str, str]:
    found = {"reason": reason}
    if path is not None:
        found["path"] = path[:300]
    return found


class SkillFormatError(Invalid):
    code = "skill_format"

    def __init__(self, message: str, *, path: str | None = "SKILL.md",
                 reason: str = "format") -> None:
        super().__init__(message, details=_details(path, reason))


class SkillFileRefused(Invalid):
    code = "skill_file_refused"

    def __init__(self, path: str, reason: str, message: str) -> None:
        super().__init__(f"{path[:300]!r}: {message}", details=_details(path, reason))


class SkillArchiveInvalid(Invalid):
    code = "skill_archive_invalid"

    def __init__(self, message: str, *, reason: str = "archive") -> None:
        super().__init__(message, details=_details(None, reason))


class SkillSourceFailed(Invalid):
    code = "skill_source_failed"

    def __init__(self, message: str, *, reason: str = "git") -> None:
        super().__init__(message, details=_details(None, reason))


class SkillTooLarge(TooLarge):
    code = "skill_too_large"

    def __init__(self, message: str, *, path: str | None = None, reason: str) -> None:
        super().__init__(message, details=_details(path, reason))
