"""Search: hits to citable passages, and a run's search as a durable operation.

``passages`` turns index hits into passages (base, document, heading, offsets, score and
text), skipping a hit whose chunk record or document is gone (an interrupted upload, a
deleted document), best first.

``RunSearch.search`` is ``search_with_context`` (docs/contract.md#capabilities): the query embedding
has its own recovery state, the ``QueryOp`` item of the call (``kbrun#{run}`` /
``op#{request}``), which moves ``sent`` → ``embedded`` (vectors saved, one per
embedder of the bound bases) → ``done``
(citations saved), each saved before the next step acts:

- ``done``: the call's citations are read back — the same passages, no request, no
  search — so a call run again after an interruption answers exactly as before;
- ``embedded``: the saved vectors are searched (the request is not sent again);
- ``sent`` without (all) vectors (the process died while the request was out): an embedding
  request is read-only — it changes nothing at the provider and costs a few tokens — so
  it is sent again (``attempts`` counts each), unlike a chat request whose unknown
  outcome blocks the run. The ``knowledge_search`` tool is therefore ``read_only`` and
  ``resume_inflight``.

Citations (``Citation``) are saved for every passage returned, under the call, with
their text sealed; the run's API returns them (``GET …/runs/{id}/citations``).
"""

from __future__ import annotations

import base64
import hashlib
from array import array
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from agentloom.platform.domain import now
from agentloom.platform.store.items import ABSENT

from .index import Hit, VectorIndex, rank
from .store import (
    Citation,
    ContentSealer,
    DocumentRecord,
    KnowledgeBase,
    KnowledgeStore,
    QueryOp,
    chunk_item,
    citation_item,
)


@dataclass(frozen=True)
class Passage:
    base: KnowledgeBase
    document: DocumentRecord
    chunk_key: str
    heading: str
    start: int
    end: int
    score: float
    text: str


def passages(store: KnowledgeStore, sealer: ContentSealer, bases: Sequence[KnowledgeBase],
             hits: Sequence[Hit]) -> list[Passage]:
    by_id = {b.base_id: b for b in bases}
    docs: dict[str, DocumentRecord | None] = {}
    out = []
    for hit in hits:
        base = by_id.get(hit.base_id)
        if hit.document_id not in docs:
            found = store.document(hit.base_id, hit.document_id)
            docs[hit.document_id] = found[0] if found else None
        doc = docs[hit.document_id]
        key = hit.key.removeprefix(f"{hit.document_id}.")
        record = store.chunk(hit.document_id, key) if doc else None
        if base is None or doc is None or record is None:
            continue
        text = sealer.open(base.space_id, base.base_id, chunk_item(doc.document_id, key),
                           record.sealed)
        out.append(Passage(base, doc, key, record.heading, record.start, record.end,
                           round(hit.score, 6), text))
    return out


def citation_id(run_id: str, request_id: str, rank: int) -> str:
    short = hashlib.sha256(f"{run_id}/{request_id}".encode()).hexdigest()[:6]
    return f"kb-{short}-{rank}"


# A saved query vector is float32 in native byte order, as numpy wrote it before; the stdlib
# array keeps numpy (the embedded index's dependency) out of the Lambda path.
def _pack(vector: Sequence[float]) -> str:
    return base64.b64encode(array("f", vector).tobytes()).decode("ascii")


def _unpack(text: str) -> list[float]:
    return array("f", base64.b64decode(text)).tolist()


EmbedQuery = Callable[[], Awaitable[tuple[list[float], int]]]


@dataclass(frozen=True)
class QueryGroup:
    identity: str  # the embedder's
    bases: Sequence[KnowledgeBase]
    embed_query: EmbedQuery


@dataclass(frozen=True)
class SearchCall:
    space_id: str
    run_id: str
    request_id: str
    instance: str
    top_k: int


class RunSearch:
    def __init__(self, store: KnowledgeStore, sealer: ContentSealer,
                 index: VectorIndex) -> None:
        self.store, self.sealer, self.index = store, sealer, index

    async def search(self, call: SearchCall, groups: Sequence[QueryGroup]) -> list[Citation]:
        """``groups``: the bound bases by embedder (a query vector compares only with
        vectors of its own model), each embedded once; hits merged by score."""
        saved = self.store.query_op(call.run_id, call.request_id)
        op, version = saved if saved else (None, ABSENT)
        if op is not None and op.phase == "done":
            return [c for c in self.store.citations(call.run_id)
                    if c.request_id == call.request_id]
        if op is None:
            op = QueryOp(run_id=call.run_id, request_id=call.request_id, phase="sent",
                         attempts=0)
        vectors = dict(op.vectors)
        missing = [g for g in groups if g.identity not in vectors]
        if missing:  # durable before the requests go out; a re-send counts an attempt
            op = op.model_copy(update={"phase": "sent", "attempts": op.attempts + 1})
            version = self._save(op, version)
        for group in missing:
            vector, tokens = await group.embed_query()
            vectors[group.identity] = _pack(vector)
            done = all(g.identity in vectors for g in groups)
            op = op.model_copy(update={"vectors": dict(vectors), "tokens": op.tokens + tokens,
                                       "phase": "embedded" if done else "sent"})
            version = self._save(op, version)
        hits = rank([hit for g in groups for hit in self.index.query(
            [b.base_id for b in g.bases], _unpack(vectors[g.identity]), call.top_k)],
            call.top_k)
        bases = [b for g in groups for b in g.bases]
        found = passages(self.store, self.sealer, bases, hits)
        citations = [self._citation(call, n, p) for n, p in enumerate(found, 1)]
        self.store.add_citations(citations)
        self._save(op.model_copy(update={"phase": "done"}), version)
        return citations

    def _save(self, op: QueryOp, version: int) -> int:
        self.store.save_query_op(op, version)
        found = self.store.query_op(op.run_id, op.request_id)
        assert found is not None
        return found[1]

    def _citation(self, call: SearchCall, rank: int, p: Passage) -> Citation:
        return Citation(
            run_id=call.run_id, citation_id=citation_id(call.run_id, call.request_id, rank),
            request_id=call.request_id, instance=call.instance, rank=rank,
            base_id=p.base.base_id, base_name=p.base.name,
            document_id=p.document.document_id, document_name=p.document.name,
            title=p.document.title, heading=p.heading, chunk_key=p.chunk_key, start=p.start,
            end=p.end, score=p.score, created_at=now(),
            sealed=self.sealer.seal(p.base.space_id, p.base.base_id,
                                    citation_item(call.run_id, call.request_id, rank),
                                    p.text))

    def text(self, citation: Citation, space_id: str) -> str:
        return self.sealer.open(space_id, citation.base_id,
                                citation_item(citation.run_id, citation.request_id,
                                              citation.rank), citation.sealed)
