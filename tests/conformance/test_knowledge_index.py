"""The ``VectorIndex`` port over every adapter: ``MemoryIndex`` (the reference),
``SqliteIndex`` (a real SQLite file) and ``S3VectorsIndex`` on moto's ``s3vectors``.

moto 5.2.5 implements vector buckets, indexes and put/get/list/delete vectors, but not
``QueryVectors``: ``query_shim`` answers that one operation from moto's stored vectors
(exact cosine distance over the index's vectors, ``topK``, metadata and distance as S3
Vectors returns them), through botocore's ``before-call`` event, so the adapter's own
requests and its parsing of the answer run unchanged. Declared here and in ADR 0005.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from unit.knowledge.builders import s3vectors_query_shim

from agentloom.knowledge.index import IndexDimensionMismatch, IndexedVector, MemoryIndex
from agentloom.knowledge.s3vectors_index import S3VectorsIndex
from agentloom.knowledge.sqlite_index import SqliteIndex

BACKENDS = ["memory", "sqlite", "s3vectors"]
BUCKET = "agentloom-knowledge-test"


@pytest.fixture(params=BACKENDS)
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryIndex()
    elif request.param == "sqlite":
        made = SqliteIndex(tmp_path / "index.sqlite3")
        yield made
        made.close()
    else:
        with mock_aws():
            client = boto3.client("s3vectors", region_name="us-east-1")
            client.create_vector_bucket(vectorBucketName=BUCKET)
            s3vectors_query_shim(client)
            yield S3VectorsIndex(client, BUCKET)


def unit(v: list[float]) -> list[float]:
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def vectors(n: int, dim: int = 16, seed: int = 7, doc: str = "doc_a") -> list[IndexedVector]:
    rnd = random.Random(seed)
    return [IndexedVector(f"{doc}.k{i:03d}.0", doc, unit([rnd.gauss(0, 1) for _ in range(dim)]))
            for i in range(n)]


def test_query_ranks_like_the_reference(index: Any) -> None:
    stored = vectors(60)
    index.upsert("kbs_a", stored)
    reference = MemoryIndex()
    reference.upsert("kbs_a", stored)
    for probe in vectors(5, seed=99):
        got = index.query(["kbs_a"], probe.vector, 5)
        want = reference.query(["kbs_a"], probe.vector, 5)
        assert [h.key for h in got] == [h.key for h in want]
        assert all(math.isclose(g.score, w.score, abs_tol=1e-5) for g, w in zip(got, want,
                                                                                 strict=True))
        assert got[0].document_id == "doc_a" and got[0].base_id == "kbs_a"
    exact = index.query(["kbs_a"], stored[3].vector, 1)[0]
    assert exact.key == stored[3].key and math.isclose(exact.score, 1.0, abs_tol=1e-5)


def test_bases_are_apart_and_merge_when_both_are_named(index: Any) -> None:
    index.upsert("kbs_a", vectors(10, doc="doc_a"))
    index.upsert("kbs_b", vectors(10, seed=8, doc="doc_b"))
    probe = vectors(1, seed=8, doc="doc_b")[0].vector
    assert {h.base_id for h in index.query(["kbs_a"], probe, 10)} == {"kbs_a"}
    both = index.query(["kbs_a", "kbs_b"], probe, 3)
    assert both[0].base_id == "kbs_b" and len(both) == 3
    assert index.query(["kbs_missing"], probe, 3) == []


def test_upsert_replaces_delete_and_drop(index: Any) -> None:
    stored = vectors(5)
    index.upsert("kbs_a", stored)
    moved = IndexedVector(stored[0].key, "doc_a", stored[4].vector)
    index.upsert("kbs_a", [moved])
    hits = index.query(["kbs_a"], stored[4].vector, 2)
    assert {h.key for h in hits} == {stored[0].key, stored[4].key}
    index.delete("kbs_a", [stored[4].key, "absent.key"])
    assert stored[4].key not in index.keys("kbs_a", "doc_a")
    assert index.keys("kbs_a", "doc_a") == {v.key for v in stored[:4]}
    assert index.keys("kbs_a", "doc_other") == set()
    index.drop("kbs_a")
    index.drop("kbs_a")  # idempotent
    assert index.query(["kbs_a"], stored[1].vector, 3) == []
    index.delete("kbs_a", ["x"])  # on a dropped base: nothing


def test_a_base_keeps_one_dimension(index: Any) -> None:
    index.upsert("kbs_a", vectors(3, dim=16))
    with pytest.raises(IndexDimensionMismatch) as err:
        index.upsert("kbs_a", vectors(1, dim=8))
    assert err.value.status == 422
    assert index.query(["kbs_a"], vectors(1, dim=8)[0].vector, 3) == []
    index.upsert("kbs_b", vectors(2, dim=8))  # another base may differ


def test_top_k_and_large_batches(index: Any) -> None:
    many = vectors(1_200, dim=8)
    index.upsert("kbs_a", many)  # S3 Vectors: three put_vectors batches of ≤ 500
    assert len(index.keys("kbs_a", "doc_a")) == 1_200
    assert len(index.query(["kbs_a"], many[0].vector, 7)) == 7
    index.delete("kbs_a", [v.key for v in many[:600]])
    assert len(index.keys("kbs_a", "doc_a")) == 600


def test_sqlite_cache_sees_writes_of_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    reader, writer = SqliteIndex(path), SqliteIndex(path)
    stored = vectors(4)
    writer.upsert("kbs_a", stored[:2])
    assert len(reader.query(["kbs_a"], stored[0].vector, 10)) == 2
    writer.upsert("kbs_a", stored[2:])
    assert len(reader.query(["kbs_a"], stored[0].vector, 10)) == 4
    writer.delete("kbs_a", [stored[0].key])
    assert stored[0].key not in {h.key for h in reader.query(["kbs_a"], stored[0].vector, 10)}
    reader.close()
    writer.close()
