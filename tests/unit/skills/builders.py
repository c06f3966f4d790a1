"""Builders shared by the skill tests: SKILL.md text, zips (hostile ones too), a store."""

from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path

from agentloom.crypto import LocalKeyring
from agentloom.skills import MemorySkillItems, SkillItems, SkillStore

SCRIPT = "import sys\nprint('hello from the skill', sys.argv[1:])\n"


def skill_md(name: str = "hello", description: str = "Says hello.", extra: str = "",
             body: str = "# Hello\nRun `python3 /skills/hello/scripts/x.py`.\n") -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}"


def zip_of(files: dict[str, bytes | str], *, modes: dict[str, int] | None = None,
           compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A zip of ``files``; ``modes`` sets an entry's Unix mode (e.g. a symlink's)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = ((modes or {}).get(name, stat.S_IFREG | 0o644)) << 16
            info.compress_type = compression
            archive.writestr(info, data)
    return out.getvalue()


def hello_zip(folder: str = "hello/", **files: str) -> bytes:
    content: dict[str, bytes | str] = {f"{folder}SKILL.md": skill_md(),
                                       f"{folder}scripts/x.py": SCRIPT,
                                       f"{folder}references/guide.md": "# Guide\n" + "line\n" * 10}
    content.update({f"{folder}{k}": v for k, v in files.items()})
    return zip_of(content)


def memory_store(tmp: Path, items: SkillItems | None = None) -> SkillStore:
    return SkillStore(items or MemorySkillItems(), LocalKeyring(tmp / "skills.key"))
