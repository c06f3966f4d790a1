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

from agentloom.capabilities import (
    Capabilities,
    Capability,
    LazyCapability,
    binds_knowledge,
    binds_mcp,
    binds_skills,
)


def embedded_capabilities(home: Path, *, allow_loopback: bool = False) -> Capabilities:
    """Each kind built on first use (``LazyCapability``, as on AWS): ``agentloom run`` of
    an agent binding no MCP tools, skills or knowledge bases imports none of their
    packages (the MCP SDK's types alone are ≈ 0.3 s of CPU)."""

    def skills() -> Capability:
        from agentloom.skills.wiring import embedded_skills

        return embedded_skills(home)

    def mcp() -> Capability:
        from agentloom.local.workspaces import NOBODY
        from agentloom.mcp import McpPolicy, embedded_capability
        from agentloom.sandbox.bwrap import BubblewrapRunner

        sandbox = BubblewrapRunner(sandbox_user=NOBODY if os.geteuid() == 0 else None)
        return embedded_capability(home, McpPolicy(allow_loopback=allow_loopback,
                                                   sandbox=sandbox))

    def knowledge() -> Capability:
        from agentloom.knowledge.wiring import embedded_knowledge

        return embedded_knowledge(home, allow_loopback=allow_loopback)

    return Capabilities.of([LazyCapability("skills", skills, binds_skills),
                            LazyCapability("mcp", mcp, binds_mcp),
                            LazyCapability("knowledge", knowledge, binds_knowledge)])
