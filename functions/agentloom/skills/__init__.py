"""Skills (docs/skills.md): one skill directory per import (a zip or a Git revision + path),
checked (``archive``, ``format``), stored immutably by content hash and encrypted
(``store`` with the memory, SQLite and DynamoDB backends), bound at publish and offered
to runs by ``SkillsCapability`` (``skill_load``, ``skill_read``, the read-only mounts of
``workspace_command``), managed through ``SkillService`` (the API's routes).

Wiring a host::

    skills = SkillStore(SqliteSkillItems(home / "agentloom.sqlite3"), keyring)
    capability = SkillsCapability(skills, workspace_root=home / "workspaces")
    EmbeddedPlatform.open(home, capabilities=Capabilities.of([capability, ...]))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloom_runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from .archive import SkillLimits, SkillTree, tree_from_directory, tree_from_zip
    from .capability import SkillsCapability, pinned
    from .format import SkillMeta, parse_skill_md
    from .git import GitPolicy, tree_from_git
    from .manifest import SkillManifest, SkillRecord, SkillSource, content_hash
    from .service import SkillDetail, SkillService
    from .sqlite_store import SqliteSkillItems
    from .store import MemorySkillItems, SkillItems, SkillStore

# Eager: the submodule ``materialize`` shares its name with the function, and a lazy name
# would be shadowed by the submodule once anything imports it.
from .materialize import SkillMount, materialize, skill_directory

__all__ = [
    "GitPolicy", "MemorySkillItems", "SkillDetail", "SkillItems", "SkillLimits",
    "SkillManifest", "SkillMeta", "SkillMount", "SkillRecord", "SkillService",
    "SkillSource", "SkillStore", "SkillTree", "SkillsCapability", "SqliteSkillItems",
    "content_hash", "materialize", "parse_skill_md", "pinned", "skill_directory",
    "tree_from_directory", "tree_from_git", "tree_from_zip",
]
# Each name loads its module on first use (PEP 562): the step Lambda reads a skill mount's
# constants without importing the archive readers, git, the YAML parser or the service.
_FROM = {
    "SkillLimits": ".archive", "SkillTree": ".archive", "tree_from_directory":
    ".archive", "tree_from_zip": ".archive", "SkillsCapability": ".capability",
    "pinned": ".capability", "SkillMeta": ".format", "parse_skill_md": ".format",
    "GitPolicy": ".git", "tree_from_git": ".git", "SkillManifest": ".manifest",
    "SkillRecord": ".manifest", "SkillSource": ".manifest", "content_hash": ".manifest",
    "SkillDetail": ".service", "SkillService": ".service",
    "SqliteSkillItems": ".sqlite_store", "MemorySkillItems": ".store", "SkillItems":
    ".store", "SkillStore": ".store"
}


__getattr__ = lazy_exports(__name__, _FROM)
