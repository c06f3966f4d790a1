"""The capability set of the AWS deployment: Skills, MCP tools and knowledge bases on the
stage's platform table and KMS key, the same set in the api and the step function
(``AwsPlatform.open`` wires it when the caller passes none).

- Skills: ``SkillStore`` items in the platform table (``skill…`` partitions, sealed under
  the KMS key); versions are materialized on the EFS volume under the workspace root
  (``AGENTLOOM_WORKSPACE_ROOT``; the api function never materializes: it runs no
  commands) and a Fargate command task mounts them read-only (``agentloom.aws.sandbox``).
  Git imports read only https URLs.
- MCP tools: Streamable HTTP and SSE servers on public addresses; stdio servers are
  refused when called (``mcp_sandbox_unavailable``: a Lambda has no bubblewrap sandbox).
- Knowledge bases: records in the platform table, passages sealed under the KMS key,
  vectors in the S3 Vectors bucket ``AGENTLOOM_VECTOR_BUCKET``. Without that variable
  knowledge is not offered: its routes answer 404 ``knowledge_unavailable``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentloom.capabilities import Capabilities, Capability
from agentloom.crypto import Keyring
from agentloom.mcp.connect import McpPolicy
from agentloom.platform.secrets import CodecSecrets
from agentloom.platform.store import PlatformStore

DEFAULT_ROOT = "/mnt/workspaces"


def aws_capabilities(*, table: str, dynamodb: Any, store: PlatformStore, keyring: Keyring,
                     workspace_root: str = DEFAULT_ROOT, vector_bucket: str | None = None,
                     vectors: Callable[[], Any] | None = None,
                     mcp_policy: McpPolicy | None = None) -> Capabilities:
    """``vectors``: builds the ``s3vectors`` client (called only when ``vector_bucket``
    is set). ``mcp_policy``: the default (public addresses, no stdio) unless a test
    reaches a server on 127.0.0.1."""
    from agentloom.knowledge import KnowledgeCapability
    from agentloom.knowledge.s3vectors_index import S3VectorsIndex
    from agentloom.knowledge.wiring import knowledge_service
    from agentloom.mcp import mcp_capability
    from agentloom.skills import SkillsCapability
    from agentloom.skills.dynamodb_store import DynamoDbSkillItems
    from agentloom.skills.store import SkillStore

    items: list[Capability] = [
        SkillsCapability(SkillStore(DynamoDbSkillItems(table, client=dynamodb), keyring),
                         Path(workspace_root)),
        mcp_capability(store, CodecSecrets(keyring, store), mcp_policy or McpPolicy()),
    ]
    if vector_bucket:
        if vectors is None:
            raise ValueError("a vector bucket needs an s3vectors client")
        index = S3VectorsIndex(vectors(), vector_bucket)
        items.append(KnowledgeCapability(knowledge_service(store, keyring, index)))
    return Capabilities.of(items)
