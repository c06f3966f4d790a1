"""KnowledgeService: knowledge bases of a space, their documents, search and a run's
citations — what the API routes and the ``knowledge_search`` tool call.

Access (``agentloom.platform.access``): members list and read bases and documents and
search them; admins and owners create and delete bases, upload, delete and re-index
documents; a run's citations belong to its session's creator (like the run). Anything
the caller may not see is 404.

A base names a model connection of its space and the embedding model(s) on it
(``document_model``; ``query_model`` when queries are embedded by another name, as
e5-style servers do); its chunking settings are fixed at creation. Uploading a document
with the name of an existing one replaces it (re-indexing only what changed:
``indexing``); ``reindex`` embeds every stored chunk again (the index was lost, or the
connection now serves another model) after dropping the base's vectors.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agentloom.platform.access import check_id, member_of, own_session
from agentloom.platform.domain import Role, new_id, now
from agentloom.platform.errors import Conflict, Invalid, NotFound
from agentloom.platform.identity import Principal
from agentloom.platform.store import WriteConflict
from agentloom.platform.store.items import ABSENT

from . import _hooks
from .chunking import ChunkSettings
from .embeddings import Embedder
from .index import MAX_TOP_K, IndexedVector, VectorIndex
from .indexing import IndexStats, new_document, prepare, vector_key, write_chunks
from .search import Passage, QueryGroup, RunSearch, SearchCall, passages
from .store import (
    Citation,
    ContentSealer,
    DocumentRecord,
    KnowledgeBase,
    KnowledgeStore,
    chunk_item,
)

MAX_NAME = 200
MAX_QUERY_CHARS = 4_000
MAX_DOCUMENTS = 1_000


class Embedders(Protocol):
    def check(self, space_id: str, connection_id: str) -> None:
        """``Invalid`` (field ``connection_id``) unless the space has that connection."""
        ...

    def for_base(self, base: KnowledgeBase) -> Embedder: ...


@dataclass(frozen=True)
class BaseSpec:
    name: str
    connection_id: str
    document_model: str
    query_model: str = ""
    description: str = ""
    chunk_size: int = 1_000
    chunk_overlap: int = 150


def _text(value: str, what: str, limit: int = MAX_NAME) -> str:
    value = value.strip()
    if not value or len(value) > limit or not value.isprintable():
        raise Invalid(f"{what} must be 1..{limit} printable characters",
                      code="field_invalid", details={"fields": [
                          {"field": what, "message": f"1..{limit} printable characters"}]})
    return value


class KnowledgeService:
    def __init__(self, store: KnowledgeStore, sealer: ContentSealer, index: VectorIndex,
                 embedders: Embedders) -> None:
        self.store, self.sealer, self.index, self.embedders = store, sealer, index, embedders
        self.runs = RunSearch(store, sealer, index)

    # -- bases ----------------------------------------------------------------------------

    def create_base(self, who: Principal, space_id: str, spec: BaseSpec) -> KnowledgeBase:
        member_of(self.store.store, who, space_id, "admin")
        try:
            settings = ChunkSettings(spec.chunk_size, spec.chunk_overlap)
        except ValueError as err:
            raise Invalid(str(err), code="field_invalid", details={"fields": [
                {"field": "chunk_size", "message": str(err)}]}) from None
        self.embedders.check(space_id, spec.connection_id)
        base = KnowledgeBase(
            space_id=space_id, base_id=new_id("kbs"), name=_text(spec.name, "name"),
            description=spec.description.strip()[:2_000], connection_id=spec.connection_id,
            document_model=_text(spec.document_model, "document_model"),
            query_model=_text(spec.query_model or spec.document_model, "query_model"),
            chunk_size=settings.size, chunk_overlap=settings.overlap,
            created_by=who.user_id, created_at=now())
        self.store.add_base(base)
        return base

    def bases(self, who: Principal, space_id: str) -> list[KnowledgeBase]:
        member_of(self.store.store, who, space_id)
        return self.store.bases(space_id)

    def base(self, who: Principal, space_id: str, base_id: str,
             role: Role = "member") -> KnowledgeBase:
        member_of(self.store.store, who, space_id, role)
        check_id(base_id, "kbs", "knowledge_base")
        found = self.store.base(space_id, base_id)
        if found is None:
            raise NotFound(f"knowledge base {base_id} not found",
                           code="knowledge_base_not_found")
        return found

    def delete_base(self, who: Principal, space_id: str, base_id: str) -> None:
        """The base record first (nothing finds it any more), then vectors and records.
        Published versions that bound it search nothing there from then on."""
        base = self.base(who, space_id, base_id, "admin")
        self.store.remove_base(base)
        self.index.drop(base_id)
        for doc in self.store.documents(base_id):
            self._remove_document(base, doc)

    # -- documents ------------------------------------------------------------------------

    def documents(self, who: Principal, space_id: str, base_id: str) -> list[DocumentRecord]:
        self.base(who, space_id, base_id)
        return self.store.documents(base_id)

    def document(self, who: Principal, space_id: str, base_id: str,
                 document_id: str) -> DocumentRecord:
        self.base(who, space_id, base_id)
        check_id(document_id, "doc", "document")
        found = self.store.document(base_id, document_id)
        if found is None:
            raise NotFound(f"document {document_id} not found", code="document_not_found")
        return found[0]

    def put_document(self, who: Principal, space_id: str, base_id: str, name: str,
                     content: bytes, media_type: str | None = None
                     ) -> tuple[DocumentRecord, bool, IndexStats]:
        """Add the document, or replace the one of that name; (document, created, stats).
        Unchanged content (same sha256, same embedder) is a no-op."""
        base = self.base(who, space_id, base_id, "admin")
        name = _text(name, "name")
        prepared = prepare(name, content, media_type,
                           ChunkSettings(base.chunk_size, base.chunk_overlap))
        embedder = self.embedders.for_base(base)
        docs = self.store.documents(base_id)
        previous = next((d for d in docs if d.name == name), None)
        if previous is None and len(docs) >= MAX_DOCUMENTS:
            raise Conflict(f"knowledge base {base_id} holds {MAX_DOCUMENTS} documents, its "
                           "limit; delete some first", code="knowledge_base_full")
        if previous is not None and previous.sha256 == prepared.sha256 \
                and previous.identity == embedder.identity:
            return previous, False, IndexStats(0, previous.chunks, 0)
        document_id = previous.document_id if previous else document_id_of(base_id, name)
        found = self.store.document(base_id, document_id) if previous else None
        version = found[1] if found else ABSENT
        old = self.store.chunks(document_id) if previous else []

        async def embed(texts: list[str]) -> list[list[float]]:
            result = await _hooks.embed(embedder, texts, "document", hooks=None,
                                        model=base.document_model, resource_id=base_id)
            return result.vectors

        stats = asyncio.run(write_chunks(
            base, document_id, prepared, index=self.index, store_chunks=self.store.put_chunks,
            old=old, sealer=self.sealer,
            reembed=previous is not None and previous.identity != embedder.identity,
            embed=embed))
        doc = new_document(base, document_id, name, prepared, stats, previous=previous,
                           who=who.user_id, identity=embedder.identity, at=now())
        try:
            self.store.save_document(doc, version)
        except WriteConflict:
            raise Conflict(f"document {name!r} was changed by another upload meanwhile; "
                           "upload it again", code="document_changed") from None
        gone = sorted({r.key for r in old} - {k for k, _ in prepared.chunks})
        self.index.delete(base_id, [vector_key(document_id, k) for k in gone])
        self.store.remove_chunks(document_id, gone)
        return doc, previous is None, stats

    def delete_document(self, who: Principal, space_id: str, base_id: str,
                        document_id: str) -> None:
        base = self.base(who, space_id, base_id, "admin")
        doc = self.document(who, space_id, base_id, document_id)
        self._remove_document(base, doc)

    def _remove_document(self, base: KnowledgeBase, doc: DocumentRecord) -> None:
        self.store.remove_document(base.base_id, doc.document_id)
        keys = [r.key for r in self.store.chunks(doc.document_id)]
        self.index.delete(base.base_id, [vector_key(doc.document_id, k) for k in keys])
        self.store.remove_chunks(doc.document_id, keys)

    def reindex(self, who: Principal, space_id: str, base_id: str) -> int:
        """Drop the base's vectors and embed every stored chunk again; the chunk count."""
        base = self.base(who, space_id, base_id, "admin")
        embedder = self.embedders.for_base(base)
        self.index.drop(base_id)
        total = 0
        for doc in self.store.documents(base_id):
            records = self.store.chunks(doc.document_id)
            texts = [self.sealer.open(space_id, base_id, chunk_item(doc.document_id, r.key),
                                      r.sealed) for r in records]
            embedded = [f"{r.heading}\n\n{t}" if r.heading else t
                        for r, t in zip(records, texts, strict=True)]
            result = asyncio.run(_hooks.embed(embedder, embedded, "document", hooks=None,
                                              model=base.document_model,
                                              resource_id=base_id))
            self.index.upsert(base_id, [
                IndexedVector(vector_key(doc.document_id, r.key), doc.document_id, v)
                for r, v in zip(records, result.vectors, strict=True)])
            found = self.store.document(base_id, doc.document_id)
            if found is not None:
                self.store.save_document(found[0].model_copy(update={
                    "identity": embedder.identity, "embedded": len(records),
                    "updated_at": now()}), found[1])
            total += len(records)
        return total

    # -- search ---------------------------------------------------------------------------

    def search(self, who: Principal, space_id: str, base_ids: Sequence[str], query: str,
               top_k: int = 5) -> list[Passage]:
        """Search bases of the space directly (for testing a base): nothing is saved."""
        bases = [self.base(who, space_id, b) for b in dict.fromkeys(base_ids)]
        query = _text(query, "query", MAX_QUERY_CHARS)
        if not 1 <= top_k <= MAX_TOP_K:
            raise Invalid(f"top_k must be 1..{MAX_TOP_K}", code="field_invalid")
        found: list[Passage] = []
        for group in _by_embedder(self.embedders, bases):
            embedder = self.embedders.for_base(group[0])
            result = asyncio.run(_hooks.embed(embedder, [query], "query", hooks=None))
            hits = self.index.query([b.base_id for b in group], result.vectors[0], top_k)
            found.extend(passages(self.store, self.sealer, group, hits))
        return sorted(found, key=lambda p: -p.score)[:top_k]

    async def search_for_run(self, call: SearchCall, base_ids: Sequence[str], query: str,
                             hooks: _hooks.StageRunner | None) -> list[Citation]:
        """The ``knowledge_search`` tool's search over a run's bound bases (no access
        check: the published version bound them); a base deleted since is skipped."""
        bases = [b for b in (self.store.base(call.space_id, i) for i in base_ids) if b]
        groups = []
        for group in _by_embedder(self.embedders, bases):
            embedder, first = self.embedders.for_base(group[0]), group[0]

            async def embed_query(embedder: Embedder = embedder,
                                  first: KnowledgeBase = first) -> tuple[list[float], int]:
                result = await _hooks.embed(embedder, [query], "query", hooks=hooks,
                                            instance=call.instance, model=first.query_model,
                                            resource_id=first.base_id)
                return result.vectors[0], int(result.usage.get("total_tokens", 0))

            groups.append(QueryGroup(embedder.identity, group, embed_query))
        return await self.runs.search(call, groups) if groups else []

    def citations(self, who: Principal, session_id: str,
                  run_id: str) -> list[tuple[Citation, str]]:
        """The run's citations with their passage text (the session's creator only)."""
        session = own_session(self.store.store, who, session_id)
        check_id(run_id, "run", "run")
        if self.store.store.runs.get(session_id, run_id) is None:
            raise NotFound(f"run {run_id} not found", code="run_not_found")
        return [(c, self.runs.text(c, session.space_id))
                for c in self.store.citations(run_id)]


def document_id_of(base_id: str, name: str) -> str:
    """A document's id follows from its base and name, so two first uploads of one name
    race on one record (one gets 409 ``document_changed``) instead of making two."""
    return "doc_" + hashlib.sha256(f"{base_id}/{name}".encode()).hexdigest()[:20]


def _by_embedder(embedders: Embedders,
                 bases: Sequence[KnowledgeBase]) -> list[list[KnowledgeBase]]:
    groups: dict[str, list[KnowledgeBase]] = {}
    for base in bases:
        groups.setdefault(embedders.for_base(base).identity, []).append(base)
    return list(groups.values())
