"""The AWS index: Amazon S3 Vectors (docs/adr/0005-knowledge-vector-store.md).

One vector bucket per deployment (SSE-KMS), one vector index per knowledge base
(``kb-{base_id}``, cosine, float32, the dimension of the base's first vectors): deleting
a base deletes its index, and a query can only read the indexes of the bases it names.
Each vector's key is the chunk key; its metadata holds the document id (filterable) and
nothing else — no passage text leaves the platform store, where it is encrypted.
``put_vectors`` / ``delete_vectors`` go in batches of 500 (the API's cap); a query asks
each named base's index for ``top_k`` (≤ 100) and merges, score = 1 − cosine distance.

The client is injected (``boto3.client("s3vectors")``). moto 5.2.5 implements buckets,
indexes and put/get/list/delete vectors but not ``QueryVectors``: the conformance suite
serves that one operation from moto's stored vectors with a test-side shim (exact cosine),
so the adapter's request and response handling is what is tested, not S3 Vectors'
approximate ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .index import Hit, IndexedVector, check_dimension, rank

if TYPE_CHECKING:  # the boto3 stubs (the dev extra); never loaded at run time
    from mypy_boto3_s3vectors import S3VectorsClient
    from mypy_boto3_s3vectors.type_defs import ListVectorsInputTypeDef

BATCH = 500
MAX_QUERY_TOP_K = 100


def index_name(base_id: str) -> str:
    return f"kb-{base_id.replace('_', '-')}"


class S3VectorsIndex:
    def __init__(self, client: S3VectorsClient, bucket: str) -> None:
        self._client = client
        self._bucket = bucket

    def _describe(self, base_id: str) -> int | None:
        try:
            found = self._client.get_index(vectorBucketName=self._bucket,
                                           indexName=index_name(base_id))
        except self._client.exceptions.NotFoundException:
            return None
        return int(found["index"]["dimension"])

    def upsert(self, base_id: str, vectors: Sequence[IndexedVector]) -> None:
        if not vectors:
            return
        have = self._describe(base_id)
        dim = check_dimension(base_id, have, vectors)
        if have is None:
            try:
                self._client.create_index(
                    vectorBucketName=self._bucket, indexName=index_name(base_id),
                    dataType="float32", dimension=dim, distanceMetric="cosine",
                    metadataConfiguration={"nonFilterableMetadataKeys": []})
            except self._client.exceptions.ConflictException:
                pass  # created meanwhile by another writer: same dimension is checked next
        for start in range(0, len(vectors), BATCH):
            self._client.put_vectors(
                vectorBucketName=self._bucket, indexName=index_name(base_id),
                vectors=[{"key": v.key, "data": {"float32": [float(x) for x in v.vector]},
                          "metadata": {"document_id": v.document_id}}
                         for v in vectors[start:start + BATCH]])

    def delete(self, base_id: str, keys: Sequence[str]) -> None:
        if not keys or self._describe(base_id) is None:
            return
        for start in range(0, len(keys), BATCH):
            self._client.delete_vectors(vectorBucketName=self._bucket,
                                        indexName=index_name(base_id),
                                        keys=list(keys[start:start + BATCH]))

    def drop(self, base_id: str) -> None:
        try:
            self._client.delete_index(vectorBucketName=self._bucket,
                                      indexName=index_name(base_id))
        except self._client.exceptions.NotFoundException:
            pass

    def keys(self, base_id: str, document_id: str) -> set[str]:
        if self._describe(base_id) is None:
            return set()
        found: set[str] = set()
        token: str | None = None
        while True:
            args: ListVectorsInputTypeDef = {
                "vectorBucketName": self._bucket, "indexName": index_name(base_id),
                "returnMetadata": True, "maxResults": 1000}
            if token:
                args["nextToken"] = token
            page = self._client.list_vectors(**args)
            found.update(v["key"] for v in page.get("vectors", [])
                         if (v.get("metadata") or {}).get("document_id") == document_id)
            token = page.get("nextToken")
            if not token:
                return found

    def query(self, base_ids: Sequence[str], vector: Sequence[float],
              top_k: int) -> list[Hit]:
        hits: list[Hit] = []
        for base_id in dict.fromkeys(base_ids):
            if self._describe(base_id) != len(vector):
                continue  # no index yet, or vectors of another model
            answer = self._client.query_vectors(
                vectorBucketName=self._bucket, indexName=index_name(base_id),
                topK=min(top_k, MAX_QUERY_TOP_K),
                queryVector={"float32": [float(x) for x in vector]},
                returnMetadata=True, returnDistance=True)
            hits.extend(Hit(base_id, v["key"], str((v.get("metadata") or {})
                                                   .get("document_id", "")),
                            1.0 - float(v["distance"]))
                        for v in answer.get("vectors", []))
        return rank(hits, top_k)
