"""The default capability set of the embedded platform (``agentloom serve``): Skills,
MCP tools and knowledge bases, each on the home's SQLite file and key file.

``allow_loopback`` lets MCP servers and embeddings endpoints on 127.0.0.1 / ::1 be
reached (a developer's local servers; ``agentloom serve --allow-loopback-tools``);
link-local and metadata addresses stay refused either way. Git imports of skills read
only https URLs here (docs/skills.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from agentloom.capabilities import Capabilities


def embedded_capabilities(home: Path, *, allow_loopback: bool = False) -> Capabilities:
    from agentloom.knowledge.wiring import embedded_knowledge
    from agentloom.local.workspaces import NOBODY
    from agentloom.mcp import McpPolicy, embedded_capability
    from agentloom.sandbox.bwrap import BubblewrapRunner
    from agentloom.skills.wiring import embedded_skills

    sandbox = BubblewrapRunner(sandbox_user=NOBODY if os.geteuid() == 0 else None)
    return Capabilities.of([
        embedded_skills(home),
        embedded_capability(home, McpPolicy(allow_loopback=allow_loopback, sandbox=sandbox)),
        embedded_knowledge(home, allow_loopback=allow_loopback),
    ])
