"""The knowledge service over a real local embeddings server (hashing vectors): bases,
uploads and re-indexing by content hash, search, access rules and bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from unit.knowledge.builders import (
    ALICE,
    BOB,
    EVE,
    hashing_server,
    slow_server,
    text_pdf,
    world,
)

from agentloom.knowledge import BaseSpec, DocumentInvalid, DocumentTooLarge, EmbeddingFailed
from agentloom.knowledge.index import MemoryIndex
from agentloom.platform.errors import Forbidden, Invalid, NotFound

GUIDE = "# Refunds\n\nRefunds are paid within 14 days of the return.\n\n" \
        "# Shipping\n\nParcels ship from Lisbon on weekdays.\n"


@pytest.fixture
def served() -> Any:
    with hashing_server(key="sk-emb") as s:
        yield s


def test_upload_search_and_reupload_embeds_only_what_changed(tmp_path: Path,
                                                             served: Any,
                                                             monkeypatch: Any) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # ignored: trust_env=False
    index = MemoryIndex()
    w = world(tmp_path, served.url, index=index, api_key="sk-emb")
    base = w.base(chunk_size=200, chunk_overlap=20)
    doc, created, stats = w.service.put_document(ALICE, w.space_id, base.base_id,
                                                 "guide.md", GUIDE.encode())
    assert created and stats.embedded == doc.chunks == 2 and doc.title == "Refunds"
    assert served.requests[-1]["auth"] == "Bearer sk-emb"
    found = w.service.search(BOB, w.space_id, [base.base_id], "when are refunds paid", 1)
    assert found[0].heading == "Refunds" and "14 days" in found[0].text
    assert found[0].document.name == "guide.md"

    calls = len(served.requests)
    _, created, stats = w.service.put_document(ALICE, w.space_id, base.base_id,
                                                  "guide.md", GUIDE.encode())
    assert not created and stats.embedded == 0 and len(served.requests) == calls

    changed = GUIDE.replace("Lisbon", "Porto") + "\n# Returns\n\nUse the form.\n"
    doc2, created, stats = w.service.put_document(ALICE, w.space_id, base.base_id,
                                                  "guide.md", changed.encode())
    assert not created and doc2.document_id == doc.document_id and doc2.revision == 2
    assert (stats.embedded, stats.reused, stats.removed) == (2, 1, 1)
    assert served.requests[-1]["input"] == ["Shipping\n\n# Shipping\n\nParcels ship from "
                                            "Porto on weekdays.", "Returns\n\n# Returns\n\n"
                                            "Use the form."]
    keys = index.keys(base.base_id, doc.document_id)
    assert len(keys) == 3 == len(w.service.store.chunks(doc.document_id))
    hit = w.service.search(ALICE, w.space_id, [base.base_id], "parcels ship weekdays", 1)[0]
    assert "Porto" in hit.text


def test_formats_pdf_and_html(tmp_path: Path, served: Any) -> None:
    w = world(tmp_path, served.url, api_key="sk-emb")
    base = w.base()
    pdf, _, _ = w.service.put_document(ALICE, w.space_id, base.base_id, "policy.pdf",
                                       text_pdf(["Warranty lasts two years."], "Policy"))
    html, _, _ = w.service.put_document(
        ALICE, w.space_id, base.base_id, "page", b"<h1>Care</h1><p>Wash cold.</p>"
        b"<script>steal()</script>", "text/html")
    assert (pdf.format_kind, pdf.title, html.format_kind) == ("pdf", "Policy", "html")
    top = w.service.search(ALICE, w.space_id, [base.base_id], "warranty years", 1)[0]
    assert top.document.name == "policy.pdf"
    texts = [r for r in w.service.store.chunks(html.document_id)]
    assert len(texts) == 1


def test_delete_document_and_base_drop_vectors(tmp_path: Path, served: Any) -> None:
    index = MemoryIndex()
    w = world(tmp_path, served.url, index=index, api_key="sk-emb")
    base = w.base()
    doc, _, _ = w.service.put_document(ALICE, w.space_id, base.base_id, "a.txt", b"alpha")
    w.service.delete_document(ALICE, w.space_id, base.base_id, doc.document_id)
    assert not index.keys(base.base_id, doc.document_id)
    assert w.service.search(ALICE, w.space_id, [base.base_id], "alpha") == []
    w.service.put_document(ALICE, w.space_id, base.base_id, "b.txt", b"beta")
    w.service.delete_base(ALICE, w.space_id, base.base_id)
    with pytest.raises(NotFound):
        w.service.base(ALICE, w.space_id, base.base_id)


def test_reindex_embeds_every_chunk_again(tmp_path: Path, served: Any) -> None:
    w = world(tmp_path, served.url, api_key="sk-emb")
    base = w.base(chunk_size=200, chunk_overlap=0)
    w.service.put_document(ALICE, w.space_id, base.base_id, "g.md", GUIDE.encode())
    assert w.service.reindex(ALICE, w.space_id, base.base_id) == 2
    assert w.service.search(ALICE, w.space_id, [base.base_id], "refunds paid")[0].text


def test_access_rules(tmp_path: Path, served: Any) -> None:
    w = world(tmp_path, served.url, api_key="sk-emb")
    base = w.base()
    with pytest.raises(Forbidden):
        w.service.put_document(BOB, w.space_id, base.base_id, "a.txt", b"x")
    with pytest.raises(Forbidden):
        w.service.create_base(BOB, w.space_id, BaseSpec("B", w.connection_id, "m"))
    with pytest.raises(NotFound):
        w.service.bases(EVE, w.space_id)
    with pytest.raises(NotFound):
        w.service.search(EVE, w.space_id, [base.base_id], "x")
    other = w.admin.create_space(EVE, "Other")
    with pytest.raises(NotFound):  # a base id of another space names nothing here
        w.service.base(EVE, other.space_id, base.base_id)
    with pytest.raises(Invalid) as err:
        w.service.create_base(ALICE, w.space_id, BaseSpec("B", "mdl_00000000000000000000",
                                                          "m"))
    assert err.value.code == "model_connection_not_found"


def test_bad_documents(tmp_path: Path, served: Any) -> None:
    w = world(tmp_path, served.url, api_key="sk-emb")
    base = w.base()
    for content, name, code in [(b"   \n", "a.txt", "document_empty"),
                                (b"x", "a.exe", "media_type_unsupported"),
                                (b"\xff\xfe", "a.txt", "document_not_utf8")]:
        with pytest.raises(DocumentInvalid) as err:
            w.service.put_document(ALICE, w.space_id, base.base_id, name, content)
        assert err.value.code == code
    with pytest.raises(DocumentTooLarge):
        w.service.put_document(ALICE, w.space_id, base.base_id, "a.txt",
                               b"x" * (8 * 1024 * 1024 + 1))
    assert w.service.documents(ALICE, w.space_id, base.base_id) == []


def test_embedding_failures_leave_nothing_half_done(tmp_path: Path, served: Any) -> None:
    w = world(tmp_path, served.url, api_key="wrong-key")
    base = w.base()
    with pytest.raises(EmbeddingFailed) as err:
        w.service.put_document(ALICE, w.space_id, base.base_id, "a.txt", b"alpha")
    assert err.value.reason == "auth" and "bad key" not in err.value.message
    assert w.service.documents(ALICE, w.space_id, base.base_id) == []
    served.fail.append(500)
    with pytest.raises(EmbeddingFailed):
        w.service.search(ALICE, w.space_id, [base.base_id], "alpha")


def test_the_production_policy_refuses_a_loopback_connection(tmp_path: Path,
                                                             served: Any) -> None:
    """Without the test-mode flag a base on a 127.0.0.1 connection cannot embed: 502
    embedding_failed (reason loopback), and nothing is sent."""
    from agentloom.crypto import LocalKeyring
    from agentloom.knowledge.wiring import knowledge_service

    w = world(tmp_path, served.url, api_key="sk-emb")
    strict = knowledge_service(w.store, LocalKeyring(tmp_path / "agentloom.key"),
                               MemoryIndex())
    base = strict.create_base(ALICE, w.space_id, BaseSpec("B", w.connection_id, "m"))
    sent = len(served.requests)
    with pytest.raises(EmbeddingFailed) as err:
        strict.put_document(ALICE, w.space_id, base.base_id, "a.txt", b"alpha")
    assert err.value.reason == "loopback" and len(served.requests) == sent


def test_a_slow_embedder_indexes_a_28_kb_document_with_the_connections_settings(
        tmp_path: Path) -> None:
    """Issue 17: a 28 KB document (33 chunks) failed with embedding_failed/deadline on
    a slow local embedder. The connection's ``embedding`` settings bound the batches
    and the deadline; batches adapt below them; a stored connection saved before the
    settings existed gets the defaults; a bad setting is a 422 naming the field."""
    text = "\n\n".join(f"# Part {i}\n\n" + f"Paragraph {i} says something. " * 29
                       for i in range(33))
    assert 27_000 < len(text) < 29_000
    with slow_server(per_text=0.03) as served:
        w = world(tmp_path, served.url, spec={
            "embedding": {"max_batch": 6, "timeout_seconds": 1.5}})
        base = w.base()
        doc, _, stats = w.service.put_document(ALICE, w.space_id, base.base_id, "big.md",
                                               text.encode())
        assert stats.embedded == doc.chunks >= 30
        assert max(n for _, n in served.log) <= 6  # the connection's max_batch
        # a connection stored before the settings existed: the defaults
        pk, sk = f"space#{w.space_id}", f"model#{w.connection_id}"
        from agentloom.platform.domain import ModelConnectionRecord
        from agentloom.platform.store.items import put
        found = w.store.items.get(pk, sk, ModelConnectionRecord)
        assert found is not None and found.value.spec["embedding"]["max_batch"] == 6
        old = found.value.model_copy(update={"spec": {
            k: v for k, v in found.value.spec.items() if k != "embedding"}})
        w.store.items.transact([put(pk, sk, old, found.version)])
        assert w.service.reindex(ALICE, w.space_id, base.base_id) == doc.chunks
    with pytest.raises(Invalid) as bad:
        w.admin.create_model_connection(ALICE, w.space_id, "Bad", {
            "provider": "openai_compatible", "base_url": served.url,
            "model_id": "chat-model", "embedding": {"max_batch": 0}})
    assert bad.value.details["fields"][0]["field"] == "spec.embedding.max_batch"
