"""A run's search as a durable operation (``search.RunSearch``): each phase of the
``QueryOp`` saved before the next acts, so a call interrupted anywhere and run again
sends the embedding request only when no vectors were saved, and a finished call
answers again with its saved citations — no request, no search."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from unit.knowledge.builders import local_service

from agentloom.knowledge.index import MemoryIndex
from agentloom.knowledge.search import SearchCall
from agentloom.knowledge.store import KnowledgeBase

DOC = "# Refunds\n\nRefunds are paid in 14 days.\n\n# Shipping\n\nShips from Lisbon.\n"


class Boom(Exception):
    pass


def _base(tmp_path: Path, index: Any = None) -> tuple[Any, Any, KnowledgeBase]:
    service, embedders = local_service(tmp_path, index)
    service.store.store.spaces.create(  # a space the records can live in
        *_space())
    base = KnowledgeBase(space_id="spc_1", base_id="kbs_1", name="B", connection_id="mdl_1",
                         document_model="d", query_model="q", chunk_size=200,
                         chunk_overlap=0, created_by="alice", created_at=0.0)
    service.store.add_base(base)
    from agentloom.knowledge.chunking import ChunkSettings
    from agentloom.knowledge.indexing import new_document, prepare, write_chunks

    prepared = prepare("g.md", DOC.encode(), None, ChunkSettings(200, 0))

    async def embed(texts: list[str]) -> list[list[float]]:
        return (await embedders.embedder.embed(texts, "document")).vectors

    stats = asyncio.run(write_chunks(base, "doc_1", prepared, index=service.index,
                                     store_chunks=service.store.put_chunks, old=[],
                                     sealer=service.sealer, reembed=False, embed=embed))
    service.store.save_document(new_document(base, "doc_1", "g.md", prepared, stats,
                                             previous=None, who="alice", identity="hash:test",
                                             at=0.0), -1)
    return service, embedders, base


def _space() -> tuple[Any, Any]:
    from agentloom.platform.domain import Member, Space

    return (Space(space_id="spc_1", name="T", created_by="alice", created_at=0.0),
            Member(space_id="spc_1", user_id="alice", role="owner", added_by="alice",
                   added_at=0.0))


CALL = SearchCall(space_id="spc_1", run_id="run_1", request_id="run_1.main.1",
                  instance="main", top_k=2)


def search(service: Any) -> Any:
    return asyncio.run(service.search_for_run(CALL, ["kbs_1"], "refunds paid", None))


def test_a_finished_call_answers_again_from_its_saved_citations(tmp_path: Path) -> None:
    service, embedders, _ = _base(tmp_path)
    first = search(service)
    assert first[0].heading == "Refunds" and [c.rank for c in first] == [1, 2]
    queries = [c for c in embedders.embedder.calls if c[0] == "query"]
    service.index.drop("kbs_1")  # even a changed index cannot change a finished call
    again = search(service)
    assert again == first
    assert [c for c in embedders.embedder.calls if c[0] == "query"] == queries
    assert len(service.store.citations("run_1")) == 2


def test_saved_vectors_are_searched_without_a_new_request(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    index = MemoryIndex()
    service, embedders, _ = _base(tmp_path, index)
    original = index.query

    def dies(*args: Any) -> Any:
        raise Boom("the host died after the vectors were saved")

    monkeypatch.setattr(index, "query", dies)
    with pytest.raises(Boom):
        search(service)
    op, _ = service.store.query_op("run_1", CALL.request_id)
    assert op.phase == "embedded" and op.attempts == 1
    monkeypatch.setattr(index, "query", original)
    found = search(service)
    assert found[0].heading == "Refunds"
    assert sum(1 for c in embedders.embedder.calls if c[0] == "query") == 1
    assert service.store.query_op("run_1", CALL.request_id)[0].phase == "done"


def test_a_request_of_unknown_outcome_is_sent_again(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    service, embedders, _ = _base(tmp_path)
    original = embedders.embedder.embed

    async def dies(texts: Any, purpose: str) -> Any:
        await original(texts, purpose)  # the provider answered; the host died first
        raise Boom("gone")

    monkeypatch.setattr(embedders.embedder, "embed", dies)
    with pytest.raises(Boom):
        search(service)
    assert service.store.query_op("run_1", CALL.request_id)[0].phase == "sent"
    monkeypatch.setattr(embedders.embedder, "embed", original)
    assert search(service)[0].heading == "Refunds"
    op, _ = service.store.query_op("run_1", CALL.request_id)
    assert (op.phase, op.attempts) == ("done", 2)


def test_deleted_documents_and_missing_bases_are_skipped(tmp_path: Path) -> None:
    service, _, base = _base(tmp_path)
    service.store.remove_document(base.base_id, "doc_1")  # vectors still there
    assert search(service) == []
    other = SearchCall(space_id="spc_1", run_id="run_1", request_id="r2", instance="main",
                       top_k=2)
    assert asyncio.run(service.search_for_run(other, ["kbs_gone"], "x", None)) == []


def test_bases_of_two_embedders_are_each_queried_with_their_own(tmp_path: Path) -> None:
    from unit.knowledge.builders import HashEmbedder

    service, embedders, base = _base(tmp_path)
    other = base.model_copy(update={"base_id": "kbs_2", "connection_id": "mdl_2"})
    service.store.add_base(other)
    second = HashEmbedder(identity="hash:other")
    service.index.upsert("kbs_2", [])
    from unit.knowledge.builders import hash_vector

    from agentloom.knowledge.index import IndexedVector
    from agentloom.knowledge.store import ChunkRecord, chunk_item

    text = "Refunds for gift cards are paid in store credit."
    service.index.upsert("kbs_2", [IndexedVector("doc_2.k.0", "doc_2", hash_vector(text))])
    service.store.put_chunks([ChunkRecord(document_id="doc_2", key="k.0", ordinal=0, start=0,
                                          end=len(text), heading="Gift cards",
                                          sealed=service.sealer.seal("spc_1", "kbs_2",
                                                                     chunk_item("doc_2", "k.0"),
                                                                     text))])
    doc = service.store.document("kbs_1", "doc_1")[0]
    service.store.save_document(doc.model_copy(update={"base_id": "kbs_2",
                                                       "document_id": "doc_2"}), -1)
    original = embedders.for_base
    embedders.for_base = lambda b: second if b.base_id == "kbs_2" else original(b)
    call = SearchCall(space_id="spc_1", run_id="run_1", request_id="r9", instance="main",
                      top_k=3)
    found = asyncio.run(service.search_for_run(call, ["kbs_1", "kbs_2"], "refunds paid",
                                               None))
    assert {c.base_id for c in found} == {"kbs_1", "kbs_2"}
    assert [c for c in second.calls if c[0] == "query"] == [("query", ["refunds paid"])]
    op, _ = service.store.query_op("run_1", "r9")
    assert set(op.vectors) == {"hash:test", "hash:other"} and op.attempts == 1
