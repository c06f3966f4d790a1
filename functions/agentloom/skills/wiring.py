"""Skills for the embedded platform: the store in the platform's SQLite file, sealed
under its local key file, versions materialized beside the run workspaces. The
``default_capabilities`` line of ``agentloom serve``::

    embedded_skills(home)   # -> SkillsCapability
"""

from __future__ import annotations

from pathlib import Path

from agentloom.crypto import LocalKeyring
from agentloom.stores import layout
from agentloom.stores.layout import KEY_FILE

from .capability import SkillsCapability
from .git import GitPolicy
from .sqlite_store import SqliteSkillItems
from .store import SkillStore


def embedded_skills(home: Path, *, allow_local_git: bool = False) -> SkillsCapability:
    """``allow_local_git``: Git imports may read file:// URLs and local paths (tests, or
    an operator importing from this machine's disk); never the default."""
    home = Path(home)
    database = layout.prepare(home)  # owner-only before SQLite opens it
    store = SkillStore(SqliteSkillItems(database), LocalKeyring(home / KEY_FILE))
    return SkillsCapability(store, home / "workspaces",
                            git=GitPolicy(allow_local=allow_local_git))
