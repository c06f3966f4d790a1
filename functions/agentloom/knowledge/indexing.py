"""Indexing one document: extract, chunk, embed what is new, write, drop what is gone.

``index_document`` reads top-down. A chunk's index key is ``{content hash}.{n}`` (the
n-th chunk of the document with that text and heading), so a changed document keeps the
keys — and the vectors — of its unchanged chunks; only chunks whose key is not in the
index yet are embedded. The order of writes makes every crash harmless: new vectors, then
chunk records, then the document record (the commit point, guarded by its version), then
removed chunks and vectors. Search skips a vector without a chunk record or document,
so leftovers of an interrupted upload are never shown, and uploading again repairs them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .chunking import Chunk, ChunkSettings, chunk
from .errors import DocumentInvalid, DocumentTooLarge
from .index import IndexedVector, VectorIndex
from .parsing import document_format, extract
from .store import ChunkRecord, ContentSealer, DocumentRecord, KnowledgeBase, chunk_item

MAX_DOCUMENT_BYTES = 8 * 1024 * 1024
MAX_CHARS = 2_000_000
MAX_CHUNKS = 5_000


@dataclass(frozen=True)
class Prepared:
    format_kind: str
    title: str
    sha256: str
    size: int
    chars: int
    chunks: list[tuple[str, Chunk]]  # (index key, chunk)


@dataclass(frozen=True)
class IndexStats:
    embedded: int
    reused: int
    removed: int


def prepare(name: str, content: bytes, media_type: str | None,
            settings: ChunkSettings) -> Prepared:
    if len(content) > MAX_DOCUMENT_BYTES:
        raise DocumentTooLarge(f"the document is {len(content):,} bytes; the limit is "
                               f"{MAX_DOCUMENT_BYTES:,}", details={"limit": MAX_DOCUMENT_BYTES})
    kind = document_format(name, media_type)
    extracted = extract(content, kind)
    if len(extracted.text) > MAX_CHARS:
        raise DocumentTooLarge(f"the document's text is {len(extracted.text):,} characters; "
                               f"the limit is {MAX_CHARS:,}", details={"limit": MAX_CHARS})
    if not extracted.text.strip():
        raise DocumentInvalid("the document has no text (a scanned PDF has no text layer)",
                              code="document_empty")
    chunks = chunk(extracted, settings)
    if len(chunks) > MAX_CHUNKS:
        raise DocumentTooLarge(f"the document makes {len(chunks):,} chunks; the limit is "
                               f"{MAX_CHUNKS:,}", details={"limit": MAX_CHUNKS})
    seen: dict[str, int] = {}
    keyed = []
    for c in chunks:
        n = seen.get(c.key, 0)
        seen[c.key] = n + 1
        keyed.append((f"{c.key}.{n}", c))
    return Prepared(format_kind=kind, title=extracted.title,
                    sha256=hashlib.sha256(content).hexdigest(), size=len(content),
                    chars=len(extracted.text), chunks=keyed)


EmbedTexts = Callable[[list[str]], Awaitable[list[list[float]]]]


def vector_key(document_id: str, key: str) -> str:
    return f"{document_id}.{key}"


async def write_chunks(base: KnowledgeBase, document_id: str, prepared: Prepared, *,
                       index: VectorIndex, store_chunks: Callable[[list[ChunkRecord]], None],
                       old: list[ChunkRecord], sealer: ContentSealer, reembed: bool,
                       embed: EmbedTexts) -> IndexStats:
    """Everything before the document record: new vectors, then chunk records."""
    present = set() if reembed else {
        k.removeprefix(f"{document_id}.")
        for k in index.keys(base.base_id, document_id)}
    todo = [(key, c) for key, c in prepared.chunks if key not in present]
    if todo:
        embedded = await embed([c.embedded_text for _, c in todo])
        index.upsert(base.base_id, [
            IndexedVector(vector_key(document_id, key), document_id, vector)
            for (key, _), vector in zip(todo, embedded, strict=True)])
    before = {r.key: r for r in old}
    records = []
    for ordinal, (key, c) in enumerate(prepared.chunks):
        kept = before.get(key)
        if kept is not None and (kept.ordinal, kept.start, kept.end, kept.heading) == \
                (ordinal, c.start, c.end, c.heading):
            continue  # unchanged: neither its text nor its place moved
        records.append(ChunkRecord(
            document_id=document_id, key=key, ordinal=ordinal, start=c.start, end=c.end,
            heading=c.heading, sealed=sealer.seal(base.space_id, base.base_id,
                                                  chunk_item(document_id, key), c.text)))
    store_chunks(records)
    return IndexStats(embedded=len(todo), reused=len(prepared.chunks) - len(todo),
                      removed=len(set(before) - {k for k, _ in prepared.chunks}))


def new_document(base: KnowledgeBase, document_id: str, name: str, prepared: Prepared,
                 stats: IndexStats, *, previous: DocumentRecord | None, who: str,
                 identity: str, at: float) -> DocumentRecord:
    return DocumentRecord(
        base_id=base.base_id, document_id=document_id, name=name,
        format_kind=prepared.format_kind, title=prepared.title, sha256=prepared.sha256,
        size=prepared.size, chars=prepared.chars, chunks=len(prepared.chunks),
        embedded=stats.embedded, revision=(previous.revision + 1) if previous else 1,
        identity=identity, updated_by=who,
        created_at=previous.created_at if previous else at, updated_at=at)
