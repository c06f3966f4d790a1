"""Knowledge records on the platform store, passage text sealed by the envelope codec.

The records ride on ``PlatformStore`` (its SQLite and DynamoDB adapters, their
conditional writes and size caps) under their own keys:

    space#{space}   kb#{base}              KnowledgeBase
    kb#{base}       doc#{document}         DocumentRecord
    kbdoc#{doc}     chunk#{key}            ChunkRecord (text sealed)
    kbrun#{run}     cite#{request}#{rank}  Citation (passage sealed)
    kbrun#{run}     op#{request}           QueryOp: a query's durable embedding

Passage text (chunks and the passages a run cited) is ciphertext: ``ContentSealer`` seals
it under document ``kb:{space}:{base}`` with key scope ``{space, knowledge_base}`` and
AAD bound to the item (``chunk:{document}:{key}`` / ``cite:{run}:{request}:{rank}``), so
a sealed passage moved to another item, base or space fails to open. Names, offsets,
headings, hashes and scores stay plaintext (they are what lists and indexes need).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from agentloom.crypto import EnvelopeCodec, Keyring
from agentloom.platform.domain import Record
from agentloom.platform.store import PlatformStore, WriteConflict
from agentloom.platform.store.items import ABSENT, Write, delete, put
from agentloom_runtime.checkpoint.store import ItemId, KeySlots
from agentloom_runtime.errors import PersistenceError

BATCH = 25  # items per transaction: far below DynamoDB's 100 actions / 4 MB


class KnowledgeBase(Record):
    format: Literal[1] = 1
    space_id: str
    base_id: str
    name: str
    description: str = ""
    connection_id: str
    document_model: str
    query_model: str
    chunk_size: int
    chunk_overlap: int
    created_by: str
    created_at: float


class DocumentRecord(Record):
    format: Literal[1] = 1
    base_id: str
    document_id: str
    name: str
    format_kind: str
    title: str
    sha256: str
    size: int
    chars: int
    chunks: int
    embedded: int  # chunks embedded by the last upload (the others were unchanged)
    revision: int
    identity: str  # the embedder that made its vectors (connection:models)
    updated_by: str
    created_at: float
    updated_at: float


class ChunkRecord(Record):
    format: Literal[1] = 1
    document_id: str
    key: str  # unique in the document: {content hash}.{occurrence}
    ordinal: int
    start: int
    end: int
    heading: str
    sealed: str


class Citation(Record):
    format: Literal[1] = 1
    run_id: str
    citation_id: str
    request_id: str
    instance: str
    rank: int
    base_id: str
    base_name: str
    document_id: str
    document_name: str
    title: str
    heading: str
    chunk_key: str
    start: int
    end: int
    score: float
    sealed: str
    created_at: float


class QueryOp(Record):
    format: Literal[1] = 1
    run_id: str
    request_id: str
    phase: Literal["sent", "embedded", "done"]
    attempts: int
    vectors: dict[str, str] = Field(default_factory=dict)  # embedder identity ->
    # base64 of its float32 query vector
    tokens: int = 0


class ContentSealer:
    def __init__(self, keyring: Keyring, slots: KeySlots) -> None:
        self._codec = EnvelopeCodec(keyring, scope=self._scope)
        self._slots = slots

    @staticmethod
    def _scope(document: str) -> dict[str, str]:
        _, space_id, base_id = document.split(":", 2)
        return {"space": space_id, "knowledge_base": base_id}

    def seal(self, space_id: str, base_id: str, name: str, text: str) -> str:
        item = ItemId.blob(f"kb:{space_id}:{base_id}", name)
        sealed = self._codec.sealer(item.run_id, self._slots).seal(item, text.encode())
        return base64.b64encode(sealed).decode("ascii")

    def open(self, space_id: str, base_id: str, name: str, sealed: str) -> str:
        try:
            envelope = base64.b64decode(sealed, validate=True)
        except ValueError:
            raise PersistenceError(f"a passage of knowledge base {base_id} is not an "
                                   "encrypted envelope") from None
        item = ItemId.blob(f"kb:{space_id}:{base_id}", name)
        return self._codec.open(item, envelope, self._slots).decode()


def chunk_item(document_id: str, key: str) -> str:
    return f"chunk:{document_id}:{key}"


def citation_item(run_id: str, request_id: str, rank: int) -> str:
    return f"cite:{run_id}:{request_id}:{rank}"


class KnowledgeStore:
    def __init__(self, store: PlatformStore) -> None:
        self.store = store

    # -- bases and documents --------------------------------------------------------------

    def add_base(self, base: KnowledgeBase) -> None:
        self.store.items.transact([put(f"space#{base.space_id}", f"kb#{base.base_id}", base,
                                       ABSENT)])

    def base(self, space_id: str, base_id: str) -> KnowledgeBase | None:
        found = self.store.items.get(f"space#{space_id}", f"kb#{base_id}", KnowledgeBase)
        return None if found is None else found.value

    def bases(self, space_id: str) -> list[KnowledgeBase]:
        return self.store.items.query(f"space#{space_id}", "kb#", KnowledgeBase)

    def remove_base(self, base: KnowledgeBase) -> None:
        self.store.items.transact([delete(f"space#{base.space_id}", f"kb#{base.base_id}")])

    def documents(self, base_id: str) -> list[DocumentRecord]:
        return self.store.items.query(f"kb#{base_id}", "doc#", DocumentRecord)

    def document(self, base_id: str, document_id: str) -> tuple[DocumentRecord, int] | None:
        found = self.store.items.get(f"kb#{base_id}", f"doc#{document_id}", DocumentRecord)
        return None if found is None else (found.value, found.version)

    def save_document(self, doc: DocumentRecord, expect: int) -> None:
        """``expect``: the version read (``ABSENT`` for a new one); a concurrent upload of
        the same document raises ``WriteConflict``."""
        self.store.items.transact([put(f"kb#{doc.base_id}", f"doc#{doc.document_id}", doc,
                                       expect)])

    def remove_document(self, base_id: str, document_id: str) -> None:
        self.store.items.transact([delete(f"kb#{base_id}", f"doc#{document_id}")])

    # -- chunks ---------------------------------------------------------------------------

    def chunks(self, document_id: str) -> list[ChunkRecord]:
        return self.store.items.query(f"kbdoc#{document_id}", "chunk#", ChunkRecord)

    def chunk(self, document_id: str, key: str) -> ChunkRecord | None:
        found = self.store.items.get(f"kbdoc#{document_id}", f"chunk#{key}", ChunkRecord)
        return None if found is None else found.value

    def put_chunks(self, chunks: Sequence[ChunkRecord]) -> None:
        self._batches([put(f"kbdoc#{c.document_id}", f"chunk#{c.key}", c) for c in chunks])

    def remove_chunks(self, document_id: str, keys: Sequence[str]) -> None:
        self._batches([delete(f"kbdoc#{document_id}", f"chunk#{k}") for k in keys])

    def _batches(self, writes: Sequence[Write]) -> None:
        for start in range(0, len(writes), BATCH):
            self.store.items.transact(writes[start:start + BATCH])

    # -- what runs keep -------------------------------------------------------------------

    def query_op(self, run_id: str, request_id: str) -> tuple[QueryOp, int] | None:
        found = self.store.items.get(f"kbrun#{run_id}", f"op#{request_id}", QueryOp)
        return None if found is None else (found.value, found.version)

    def save_query_op(self, op: QueryOp, expect: int) -> None:
        self.store.items.transact([put(f"kbrun#{op.run_id}", f"op#{op.request_id}", op, expect)])

    def add_citations(self, citations: Sequence[Citation]) -> None:
        """Idempotent: a citation already saved (a re-run search) is kept as it was."""
        for c in citations:
            try:
                self.store.items.transact([put(f"kbrun#{c.run_id}",
                                               f"cite#{c.request_id}#{c.rank:03d}", c, ABSENT)])
            except WriteConflict:
                pass

    def citations(self, run_id: str) -> list[Citation]:
        return self.store.items.query(f"kbrun#{run_id}", "cite#", Citation)
