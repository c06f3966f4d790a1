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

from .archive import SkillLimits, SkillTree, tree_from_directory, tree_from_zip
from .capability import SkillsCapability, pinned
from .format import SkillMeta, parse_skill_md
from .git import GitPolicy, tree_from_git
from .manifest import SkillManifest, SkillRecord, SkillSource, content_hash
from .materialize import SkillMount, materialize, skill_directory
from .service import SkillDetail, SkillService
from .sqlite_store import SqliteSkillItems
from .store import MemorySkillItems, SkillItems, SkillStore

__all__ = [
    "GitPolicy", "MemorySkillItems", "SkillDetail", "SkillItems", "SkillLimits",
    "SkillManifest", "SkillMeta", "SkillMount", "SkillRecord", "SkillService",
    "SkillSource", "SkillStore", "SkillTree", "SkillsCapability", "SqliteSkillItems",
    "content_hash", "materialize", "parse_skill_md", "pinned", "skill_directory",
    "tree_from_directory", "tree_from_git", "tree_from_zip",
]
