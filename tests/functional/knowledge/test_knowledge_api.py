"""The knowledge routes through a real server on 127.0.0.1 (embedded platform with the
knowledge capability, a local embeddings server): the happy path with text, Markdown
and a base64 PDF, replacement, search, delete; hostile and malformed payloads get stable
4xx codes; passage text never lies in plaintext in the SQLite file."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from unit.knowledge.builders import ALICE, hashing_server, text_pdf

from agentloom.api.app import build_app
from agentloom.api.server import ApiServer
from agentloom.capabilities import Capabilities
from agentloom.knowledge.wiring import embedded_knowledge
from agentloom.local.app import DATABASE
from agentloom.local.embedded import EmbeddedPlatform

SECRET = "Refunds are approved by Mariana in the Braga office"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One server for the module (each test makes its own bases)."""
    home = tmp_path_factory.mktemp("knowledge-api") / "home"
    home.mkdir(mode=0o700)
    platform = EmbeddedPlatform.open(home, capabilities=Capabilities.of(
        [embedded_knowledge(home, allow_loopback=True)]))
    server = ApiServer(build_app(platform.admin, platform.sessions, platform.tokens),
                       platform.sessions).start()
    with hashing_server() as served:
        space = platform.admin.create_space(ALICE, "Team")
        connection = platform.admin.create_model_connection(
            ALICE, space.space_id, "Embeddings", {"provider": "openai_compatible",
                                                  "base_url": served.url, "model_id": "m"})
        client = httpx.Client(base_url=f"{server.url}/api/v1", timeout=30, headers={
            "Authorization": f"Bearer {platform.tokens.issue('alice')[1]}"})
        try:
            yield {"client": client, "space": space.space_id, "home": home,
                   "connection": connection.connection_id, "served": served}
        finally:
            client.close()
            server.close()
            platform.close()


def test_bases_documents_search_and_delete(api: dict[str, Any]) -> None:
    c, s = api["client"], api["space"]
    made = c.post(f"/spaces/{s}/knowledge/bases", json={
        "name": "Policies", "connection_id": api["connection"], "document_model": "m",
        "chunk_size": 200, "chunk_overlap": 0})
    assert made.status_code == 201, made.text
    b = made.json()["base_id"]
    docs = f"/spaces/{s}/knowledge/bases/{b}/documents"
    md = c.post(docs, json={"name": "p.md", "text": f"# Refunds\n\n{SECRET}.\n\n# Hours\n\n"
                                                    "Open nine to five.\n"})
    assert md.status_code == 201 and md.json()["embedded"] == 2, md.text
    pdf = c.post(docs, json={"name": "w.pdf", "content_base64": base64.b64encode(
        text_pdf(["Warranty covers two years."], "Warranty")).decode()})
    assert pdf.status_code == 201 and pdf.json()["document"]["format"] == "pdf"
    again = c.post(docs, json={"name": "p.md", "text": f"# Refunds\n\n{SECRET}.\n"})
    assert again.status_code == 200
    assert (again.json()["reused"], again.json()["removed"]) == (1, 1)
    assert again.json()["document"]["revision"] == 2
    assert len(c.get(docs).json()["items"]) == 2

    found = c.post(f"/spaces/{s}/knowledge/search", json={
        "query": "who approves refunds", "knowledge_bases": [b], "top_k": 1})
    assert found.status_code == 200, found.text
    assert SECRET in found.json()["items"][0]["text"]

    raw = b"".join(p.read_bytes() for p in api["home"].glob(f"{DATABASE}*"))
    assert SECRET.encode() not in raw and b"Warranty covers" not in raw

    doc_id = pdf.json()["document"]["document_id"]
    assert c.delete(f"{docs}/{doc_id}").status_code == 204
    assert c.get(f"{docs}/{doc_id}").status_code == 404
    assert c.post(f"/spaces/{s}/knowledge/bases/{b}/reindex").json() == {"chunks": 1}
    assert c.delete(f"/spaces/{s}/knowledge/bases/{b}").status_code == 204
    gone = c.get(f"/spaces/{s}/knowledge/bases/{b}")
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "knowledge_base_not_found"


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"name": "a.txt"}, 422, "field_invalid"),
    ({"name": "a.txt", "text": "x", "content_base64": "eA=="}, 422, "field_invalid"),
    ({"name": "a.txt", "content_base64": "***"}, 422, "field_invalid"),
    ({"name": "a.exe", "text": "x"}, 422, "media_type_unsupported"),
    ({"name": "a.txt", "text": "x", "media_type": "image/png"}, 422, "media_type_unsupported"),
    ({"name": "a.txt", "text": "   "}, 422, "document_empty"),
    ({"name": "a.pdf", "content_base64": base64.b64encode(b"%PDF-1.4 junk").decode()},
     422, "pdf_unreadable"),
    ({"name": "a.txt", "content_base64": base64.b64encode(b"\xff\xfe").decode()},
     422, "document_not_utf8"),
    ({"name": "a.txt", "text": "x", "extra": 1}, 422, None),
    ({"name": "a.txt", "text": "x" * 1_100_000}, 413, None),
])
def test_bad_uploads(api: dict[str, Any], body: dict[str, Any], status: int,
                     code: str | None) -> None:
    c, s = api["client"], api["space"]
    b = c.post(f"/spaces/{s}/knowledge/bases", json={
        "name": "B", "connection_id": api["connection"], "document_model": "m"}).json()
    answer = c.post(f"/spaces/{s}/knowledge/bases/{b['base_id']}/documents", json=body)
    assert answer.status_code == status, answer.text
    if code is not None:
        assert answer.json()["error"]["code"] == code
    assert c.get(f"/spaces/{s}/knowledge/bases/{b['base_id']}/documents").json() == \
        {"items": []}


def test_bad_bases_and_searches(api: dict[str, Any]) -> None:
    c, s = api["client"], api["space"]
    bad = c.post(f"/spaces/{s}/knowledge/bases", json={
        "name": "B", "connection_id": "mdl_0123456789abcdef0123", "document_model": "m"})
    assert bad.status_code == 422
    assert bad.json()["error"]["code"] == "model_connection_not_found"
    small = c.post(f"/spaces/{s}/knowledge/bases", json={
        "name": "B", "connection_id": api["connection"], "document_model": "m",
        "chunk_size": 50})
    assert small.status_code == 422
    odd = c.post(f"/spaces/{s}/knowledge/search", json={
        "query": "x", "knowledge_bases": ["../../etc"]})
    assert odd.status_code == 404
    api["served"].fail.append(500)
    b = c.post(f"/spaces/{s}/knowledge/bases", json={
        "name": "B", "connection_id": api["connection"], "document_model": "m"}).json()
    failed = c.post(f"/spaces/{s}/knowledge/bases/{b['base_id']}/documents",
                    json={"name": "a.txt", "text": "alpha"})
    assert failed.status_code == 502
    assert failed.json()["error"]["code"] == "embedding_failed"
    assert "secret body" not in failed.text
