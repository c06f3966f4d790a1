"""Knowledge search (issue 12; docs/contract.md#capabilities): knowledge bases of a space, documents
chunked and embedded through a model connection's OpenAI-compatible embeddings endpoint,
an index behind one port, and ``knowledge_search`` with citations saved on the run.

Read in this order: ``parsing`` (text, Markdown, HTML, PDF) → ``chunking`` →
``embeddings`` (the SSRF-guarded client, the ``Embedder`` port) and ``_hooks``
(``model.embedding.before/after``) → ``index`` (the ``VectorIndex`` port, in-memory
reference), ``sqlite_index`` (embedded), ``s3vectors_index`` (AWS) → ``store`` (records
on the platform store, passages sealed) → ``indexing`` → ``search`` (passages; a run's
search as a durable operation) → ``service`` (access rules, the API's operations) →
``capability`` (pin at publish, the tool) → ``wiring`` (how hosts build it).
User documentation: docs/knowledge.md; the AWS store: docs/adr/0005-knowledge-vector-store.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloom_runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from .capability import KnowledgeCapability
    from .embeddings import ConnectionEmbedder, Embedded, Embedder, Endpoint, OpenAIEmbeddings
    from .errors import DocumentInvalid, DocumentTooLarge, EmbeddingFailed
    from .index import Hit, IndexedVector, MemoryIndex, VectorIndex
    from .service import BaseSpec, KnowledgeService
    from .store import ContentSealer, KnowledgeStore

__all__ = [
    "BaseSpec", "ConnectionEmbedder", "ContentSealer", "DocumentInvalid", "DocumentTooLarge",
    "Embedded", "Embedder", "EmbeddingFailed", "Endpoint", "Hit", "IndexedVector",
    "KnowledgeCapability", "KnowledgeService", "KnowledgeStore", "MemoryIndex",
    "OpenAIEmbeddings", "VectorIndex",
]

# Each name loads its module on first use (PEP 562): importing one light module of the
# package (the step reads connection records, the API declares its routes) does not
# import httpx, the discovery client or the indexing code.
_HOMES = {
    "BaseSpec": ".service",
    "ConnectionEmbedder": ".embeddings",
    "ContentSealer": ".store",
    "DocumentInvalid": ".errors",
    "DocumentTooLarge": ".errors",
    "Embedded": ".embeddings",
    "Embedder": ".embeddings",
    "EmbeddingFailed": ".errors",
    "Endpoint": ".embeddings",
    "Hit": ".index",
    "IndexedVector": ".index",
    "KnowledgeCapability": ".capability",
    "KnowledgeService": ".service",
    "KnowledgeStore": ".store",
    "MemoryIndex": ".index",
    "OpenAIEmbeddings": ".embeddings",
    "VectorIndex": ".index",
}
__getattr__ = lazy_exports(__name__, _HOMES)
