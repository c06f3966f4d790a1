"""Knowledge routes (``agentloom.knowledge``): bases, documents, re-index, search, and a
run's citations. Prefix ``/api/v1``:

    POST/GET          /spaces/{s}/knowledge/bases                     admin / member
    GET/DELETE        /spaces/{s}/knowledge/bases/{b}                 member / admin
    POST/GET          /spaces/{s}/knowledge/bases/{b}/documents       admin / member
    GET/DELETE        /spaces/{s}/knowledge/bases/{b}/documents/{d}   member / admin
    POST              /spaces/{s}/knowledge/bases/{b}/reindex         admin
    POST              /spaces/{s}/knowledge/search                    member
    GET               /sessions/{ses}/runs/{r}/citations              the session's creator

A document is uploaded as JSON: ``text`` (text, Markdown, HTML) or ``content_base64``
(any format, PDF included), within the API's 1 MiB request limit. Uploading a name that
exists replaces that document (200; 201 for a new one). The service is the
``KnowledgeCapability`` the host wired; without one every knowledge route answers 404
``knowledge_unavailable`` (no base exists here) and a run's citations are empty.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from pydantic import BaseModel, ConfigDict, Field

from agentloom.api.routing import declare, json_response
from agentloom.knowledge.index import MAX_TOP_K
from agentloom.platform.errors import Invalid, NotFound

if TYPE_CHECKING:
    from agentloom.api._resolver import ApiResolver
    from agentloom.knowledge import KnowledgeService
    from agentloom.platform.admin import AdminService
    from agentloom.platform.sessions import SessionService

P = "/api/v1"
TAG = ["knowledge"]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BaseIn(_In):
    name: str = Field(min_length=1, max_length=200)
    connection_id: str = Field(min_length=1, max_length=100)
    document_model: str = Field(min_length=1, max_length=200)
    query_model: str = Field(default="", max_length=200)
    description: str = Field(default="", max_length=2_000)
    chunk_size: int = Field(default=1_000, ge=200, le=8_000)
    chunk_overlap: int = Field(default=150, ge=0, le=4_000)


class BaseOut(BaseModel):
    base_id: str
    space_id: str
    name: str
    description: str
    connection_id: str
    document_model: str
    query_model: str
    chunk_size: int
    chunk_overlap: int
    created_by: str
    created_at: float


class BasesOut(BaseModel):
    items: list[BaseOut]


class DocumentIn(_In):
    name: str = Field(min_length=1, max_length=200)
    media_type: str | None = Field(default=None, max_length=100)
    text: str | None = None
    content_base64: str | None = None


class DocumentOut(BaseModel):
    document_id: str
    base_id: str
    name: str
    format: str
    title: str
    sha256: str
    size: int
    chars: int
    chunks: int
    revision: int
    updated_by: str
    created_at: float
    updated_at: float


class UploadOut(BaseModel):
    document: DocumentOut
    created: bool
    embedded: int = Field(description="chunks embedded by this upload")
    reused: int = Field(description="unchanged chunks whose vectors were kept")
    removed: int = Field(description="chunks of the previous content dropped")


class DocumentsOut(BaseModel):
    items: list[DocumentOut]


class ReindexOut(BaseModel):
    chunks: int


class SearchIn(_In):
    query: str = Field(min_length=1, max_length=4_000)
    knowledge_bases: list[str] = Field(min_length=1, max_length=20)
    top_k: int = Field(default=5, ge=1, le=MAX_TOP_K)


class PassageOut(BaseModel):
    knowledge_base: str
    document_id: str
    document: str
    title: str
    heading: str
    start: int
    end: int
    score: float
    text: str


class PassagesOut(BaseModel):
    items: list[PassageOut]


class CitationOut(BaseModel):
    citation_id: str
    request_id: str
    instance: str
    rank: int
    knowledge_base: str
    knowledge_base_name: str
    document_id: str
    document: str
    title: str
    heading: str
    start: int
    end: int
    score: float
    text: str
    created_at: float


class CitationsOut(BaseModel):
    items: list[CitationOut]


def _wired(admin: AdminService) -> KnowledgeService | None:
    # The knowledge package (indexing, parsing, embeddings) loads with the first
    # knowledge request, not with the API's routes (the function's cold start).
    from agentloom.knowledge import KnowledgeCapability

    capability = admin.capabilities.find(KnowledgeCapability)
    return None if capability is None else capability.service


def _service(admin: AdminService) -> KnowledgeService:
    """The wired service; without one, no base exists here (404, not a server error)."""
    service = _wired(admin)
    if service is None:
        raise NotFound("this deployment has no knowledge bases",
                       code="knowledge_unavailable")
    return service


def _document(d: Any) -> DocumentOut:
    return DocumentOut(document_id=d.document_id, base_id=d.base_id, name=d.name,
                       format=d.format_kind, title=d.title, sha256=d.sha256, size=d.size,
                       chars=d.chars, chunks=d.chunks, revision=d.revision,
                       updated_by=d.updated_by, created_at=d.created_at,
                       updated_at=d.updated_at)


def _content(body: DocumentIn) -> bytes:
    if (body.text is None) == (body.content_base64 is None):
        raise Invalid("give exactly one of text and content_base64", code="field_invalid",
                      details={"fields": [{"field": "text", "message": "text or "
                                           "content_base64, exactly one"}]})
    if body.text is not None:
        return body.text.encode("utf-8", "surrogatepass")
    try:
        return base64.b64decode(body.content_base64 or "", validate=True)
    except (binascii.Error, ValueError):
        raise Invalid("content_base64 is not valid base64", code="field_invalid",
                      details={"fields": [{"field": "content_base64",
                                           "message": "not valid base64"}]}) from None


def register(app: ApiResolver, admin: AdminService, sessions: SessionService) -> None:
    _base_routes(app, admin)
    _document_routes(app, admin)

    @app.post(f"{P}/spaces/<space_id>/knowledge/search", tags=TAG,
              responses=declare(404, 502, body=True))
    def search_knowledge(space_id: str, body: SearchIn) -> PassagesOut:
        found = _service(admin).search(app.principal(), space_id, body.knowledge_bases,
                                       body.query, body.top_k)
        return PassagesOut(items=[PassageOut(
            knowledge_base=p.base.base_id, document_id=p.document.document_id,
            document=p.document.name, title=p.document.title, heading=p.heading,
            start=p.start, end=p.end, score=p.score, text=p.text) for p in found])

    @app.get(f"{P}/sessions/<session_id>/runs/<run_id>/citations", tags=["runs"],
             responses=declare(404))
    def run_citations(session_id: str, run_id: str) -> CitationsOut:
        service = _wired(admin)
        if service is None:  # no knowledge here: the run (if it is yours) cited nothing
            sessions.run(app.principal(), session_id, run_id)
            return CitationsOut(items=[])
        found = service.citations(app.principal(), session_id, run_id)
        return CitationsOut(items=[CitationOut(
            citation_id=c.citation_id, request_id=c.request_id, instance=c.instance,
            rank=c.rank, knowledge_base=c.base_id, knowledge_base_name=c.base_name,
            document_id=c.document_id, document=c.document_name, title=c.title,
            heading=c.heading, start=c.start, end=c.end, score=c.score, text=text,
            created_at=c.created_at) for c, text in found])


def _base_out(b: Any) -> BaseOut:
    return BaseOut(**{k: getattr(b, k) for k in BaseOut.model_fields})


def _base_routes(app: ApiResolver, admin: AdminService) -> None:
    bases = f"{P}/spaces/<space_id>/knowledge/bases"

    @app.post(bases, tags=TAG, status_code=201,
              responses=declare(403, 404, body=True, ok={201: "The new knowledge base"}))
    def create_knowledge_base(space_id: str, body: BaseIn) -> BaseOut:
        from agentloom.knowledge import BaseSpec

        return _base_out(_service(admin).create_base(app.principal(), space_id, BaseSpec(
            name=body.name, connection_id=body.connection_id,
            document_model=body.document_model, query_model=body.query_model,
            description=body.description, chunk_size=body.chunk_size,
            chunk_overlap=body.chunk_overlap)))

    @app.get(bases, tags=TAG, responses=declare(404))
    def list_knowledge_bases(space_id: str) -> BasesOut:
        return BasesOut(items=[_base_out(b) for b in
                               _service(admin).bases(app.principal(), space_id)])

    @app.get(f"{bases}/<base_id>", tags=TAG, responses=declare(404))
    def get_knowledge_base(space_id: str, base_id: str) -> BaseOut:
        return _base_out(_service(admin).base(app.principal(), space_id, base_id))

    @app.delete(f"{bases}/<base_id>", tags=TAG, status_code=204,
                responses=declare(403, 404, ok={204: "Deleted, with its documents"}))
    def delete_knowledge_base(space_id: str, base_id: str) -> Response[str]:
        _service(admin).delete_base(app.principal(), space_id, base_id)
        return Response(status_code=204, body="")

    @app.post(f"{bases}/<base_id>/reindex", tags=TAG, responses=declare(403, 404, 502))
    def reindex_knowledge_base(space_id: str, base_id: str) -> ReindexOut:
        return ReindexOut(chunks=_service(admin).reindex(app.principal(), space_id, base_id))


def _document_routes(app: ApiResolver, admin: AdminService) -> None:
    docs = f"{P}/spaces/<space_id>/knowledge/bases/<base_id>/documents"

    @app.post(docs, tags=TAG, responses=declare(
        403, 404, 409, 502, body=True, model=UploadOut,
        ok={201: "A new document, indexed", 200: "The document of that name, replaced"}))
    def upload_document(space_id: str, base_id: str, body: DocumentIn) -> Response[UploadOut]:
        doc, created, stats = _service(admin).put_document(
            app.principal(), space_id, base_id, body.name, _content(body), body.media_type)
        return json_response(201 if created else 200, UploadOut(
            document=_document(doc), created=created, embedded=stats.embedded,
            reused=stats.reused, removed=stats.removed))

    @app.get(docs, tags=TAG, responses=declare(404))
    def list_documents(space_id: str, base_id: str) -> DocumentsOut:
        return DocumentsOut(items=[_document(d) for d in _service(admin).documents(
            app.principal(), space_id, base_id)])

    @app.get(f"{docs}/<document_id>", tags=TAG, responses=declare(404))
    def get_document(space_id: str, base_id: str, document_id: str) -> DocumentOut:
        return _document(_service(admin).document(app.principal(), space_id, base_id,
                                                  document_id))

    @app.delete(f"{docs}/<document_id>", tags=TAG, status_code=204,
                responses=declare(403, 404, ok={204: "Deleted"}))
    def delete_document(space_id: str, base_id: str, document_id: str) -> Response[str]:
        _service(admin).delete_document(app.principal(), space_id, base_id, document_id)
        return Response(status_code=204, body="")
