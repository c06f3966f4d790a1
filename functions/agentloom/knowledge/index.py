"""The vector index port and its in-memory reference.

An index holds unit-length vectors (``embeddings`` normalises them) per knowledge base,
each under a key unique in its base, with the document it belongs to; ``query`` returns
the ``top_k`` nearest by cosine similarity (= dot product) over the bases named, best
first, ties broken by (base, key) so results are deterministic. ``dimension`` is fixed by
a base's first vectors; others are refused (``IndexDimensionMismatch``). Adapters:
``MemoryIndex`` (here), ``SqliteIndex`` (embedded default: exact scan with numpy) and
``S3VectorsIndex`` (AWS). One conformance suite runs against all three
(``tests/conformance/test_knowledge_index.py``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agentloom.platform.errors import Invalid

MAX_TOP_K = 50


@dataclass(frozen=True)
class IndexedVector:
    key: str
    document_id: str
    vector: Sequence[float]


@dataclass(frozen=True)
class Hit:
    base_id: str
    key: str
    document_id: str
    score: float


class IndexDimensionMismatch(Invalid):
    code = "embedding_dimension_mismatch"


class VectorIndex(Protocol):
    def upsert(self, base_id: str, vectors: Sequence[IndexedVector]) -> None: ...

    def delete(self, base_id: str, keys: Sequence[str]) -> None:
        """Absent keys are ignored."""
        ...

    def drop(self, base_id: str) -> None:
        """Every vector of the base; an absent base is a no-op."""
        ...

    def keys(self, base_id: str, document_id: str) -> set[str]: ...

    def query(self, base_ids: Sequence[str], vector: Sequence[float],
              top_k: int) -> list[Hit]: ...


def check_dimension(base_id: str, have: int | None, vectors: Sequence[IndexedVector]) -> int:
    dims = {len(v.vector) for v in vectors}
    if have is not None:
        dims.add(have)
    if len(dims) > 1:
        raise IndexDimensionMismatch(
            f"knowledge base {base_id} holds {have}-dimensional vectors; the embedding "
            f"model answered {sorted(dims - {have})}: re-index the base with "
            "POST …/reindex after changing its model", details={"dimensions": sorted(dims)})
    return dims.pop()


def rank(hits: list[Hit], top_k: int) -> list[Hit]:
    return heapq.nsmallest(top_k, hits, key=lambda h: (-h.score, h.base_id, h.key))


class MemoryIndex:
    """The reference: dicts and an exact scan."""

    def __init__(self) -> None:
        self._bases: dict[str, dict[str, IndexedVector]] = {}

    def upsert(self, base_id: str, vectors: Sequence[IndexedVector]) -> None:
        if not vectors:
            return
        base = self._bases.setdefault(base_id, {})
        have = len(next(iter(base.values())).vector) if base else None
        check_dimension(base_id, have, vectors)
        for v in vectors:
            base[v.key] = IndexedVector(v.key, v.document_id, tuple(v.vector))

    def delete(self, base_id: str, keys: Sequence[str]) -> None:
        base = self._bases.get(base_id, {})
        for key in keys:
            base.pop(key, None)

    def drop(self, base_id: str) -> None:
        self._bases.pop(base_id, None)

    def keys(self, base_id: str, document_id: str) -> set[str]:
        return {k for k, v in self._bases.get(base_id, {}).items()
                if v.document_id == document_id}

    def query(self, base_ids: Sequence[str], vector: Sequence[float],
              top_k: int) -> list[Hit]:
        hits = [Hit(base_id, v.key, v.document_id,
                    math.fsum(a * b for a, b in zip(vector, v.vector, strict=False)))
                for base_id in dict.fromkeys(base_ids)
                for v in self._bases.get(base_id, {}).values()
                if len(v.vector) == len(vector)]
        return rank(hits, top_k)
