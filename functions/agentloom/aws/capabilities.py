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
  knowledge is not offered: its routes answer 404 ``knowledge_unavailable`` and a draft
  binding a base is refused at publish (``KnowledgeOff``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom.capabilities import (
    Capabilities,
    Capability,
    CapabilityBase,
    LazyCapability,
    RunScope,
    binds_knowledge,
    binds_mcp,
    binds_skills,
)
from agentloom.crypto import Keyring
from agentloom.platform.errors import Invalid
from agentloom.platform.secrets import CodecSecrets
from agentloom.platform.store import PlatformStore
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.tool_contracts import ToolDefinition

if TYPE_CHECKING:  # the boto3 stubs (the dev extra); the MCP policy loads with the SDK
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3vectors import S3VectorsClient

    from agentloom.mcp.policy import McpPolicy

DEFAULT_ROOT = "/mnt/workspaces"


class KnowledgeOff(CapabilityBase):
    """Knowledge where the deployment has no vector bucket: a draft (or a template)
    binding a base is refused at publish, so no version silently runs without it."""

    kind = "knowledge"

    def pin(self, space_id: str, config: Mapping[str, Any]) -> dict[str, Any]:
        fields = (["knowledge_bases"] if config.get("knowledge_bases") else []) + [
            f"subagents[{i}].knowledge_bases"
            for i, t in enumerate(config.get("subagents") or ())
            if isinstance(t, Mapping) and t.get("knowledge_bases")]
        if fields:
            message = ("knowledge bases are not offered by this deployment (it sets no "
                       "AGENTLOOM_VECTOR_BUCKET); remove the binding or deploy the bucket")
            raise Invalid(f"{fields[0]}: {message}", code="knowledge_unavailable",
                          details={"fields": [{"field": f, "message": message}
                                              for f in fields]})
        return dict(config)

    def tools(self, snapshot: AgentSnapshot, scope: RunScope) -> list[ToolDefinition]:
        return []


def aws_capabilities(*, table: str, dynamodb: DynamoDBClient, store: PlatformStore,
                     keyring: Keyring, workspace_root: str = DEFAULT_ROOT,
                     vector_bucket: str | None = None,
                     vectors: Callable[[], S3VectorsClient] | None = None,
                     mcp_policy: McpPolicy | None = None) -> Capabilities:
    """``vectors``: builds the ``s3vectors`` client (called only when ``vector_bucket``
    is set). ``mcp_policy``: the default (public addresses, no stdio) unless a test
    reaches a server on 127.0.0.1. Each kind is built on first use (``LazyCapability``):
    a run binding no skills, MCP tools or knowledge bases never imports their modules
    (the MCP SDK, jsonschema, the skill archive readers) nor builds their clients."""
    if vector_bucket and vectors is None:
        raise ValueError("a vector bucket needs an s3vectors client")

    def skills() -> Capability:
        from agentloom.skills import SkillsCapability
        from agentloom.skills.dynamodb_store import DynamoDbSkillItems
        from agentloom.skills.store import SkillStore

        return SkillsCapability(SkillStore(DynamoDbSkillItems(table, client=dynamodb),
                                           keyring), Path(workspace_root))

    def mcp() -> Capability:
        from agentloom.mcp import McpPolicy, mcp_capability

        return mcp_capability(store, CodecSecrets(keyring, store), mcp_policy or McpPolicy())

    def knowledge() -> Capability:
        from agentloom.knowledge import KnowledgeCapability
        from agentloom.knowledge.s3vectors_index import S3VectorsIndex
        from agentloom.knowledge.wiring import knowledge_service

        assert vector_bucket is not None and vectors is not None
        index = S3VectorsIndex(vectors(), vector_bucket)
        return KnowledgeCapability(knowledge_service(store, keyring, index))

    items: list[Capability] = [
        LazyCapability("skills", skills, binds_skills),
        LazyCapability("mcp", mcp, binds_mcp),
        LazyCapability("knowledge", knowledge, binds_knowledge) if vector_bucket
        else KnowledgeOff()]
    return Capabilities.of(items)
