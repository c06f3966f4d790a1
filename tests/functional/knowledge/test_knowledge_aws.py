"""The AWS shape of knowledge bases, on moto: records on the DynamoDB platform store,
passages sealed under a KMS key, vectors in S3 Vectors (``QueryVectors`` through the
declared shim), embeddings from a real local server. Upload, change, search, a run's
search with citations, delete — and no passage text in the table or the vector index."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from unit.knowledge.builders import ALICE, hashing_server, s3vectors_query_shim, world

from agentloom.crypto.kms_keyring import KmsKeyring
from agentloom.knowledge.s3vectors_index import S3VectorsIndex, index_name
from agentloom.knowledge.search import SearchCall
from agentloom.platform.store import DynamoDbItemStore, PlatformStore
from agentloom.platform.store.dynamodb import create_table

SECRET = "The vault code is kept in the blue folder on the third shelf."
BUCKET = "agentloom-kb-test"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_table(dynamodb, "agentloom-test")
        kms = boto3.client("kms", region_name="us-east-1")
        key = kms.create_key()["KeyMetadata"]["KeyId"]
        vectors = boto3.client("s3vectors", region_name="us-east-1")
        vectors.create_vector_bucket(vectorBucketName=BUCKET)
        s3vectors_query_shim(vectors)
        yield {"dynamodb": dynamodb, "keyring": KmsKeyring(key, client=kms),
               "vectors": vectors}


def test_knowledge_on_dynamodb_kms_and_s3_vectors(tmp_path: Path, aws: dict[str, Any]) -> None:
    with hashing_server() as served:
        store = PlatformStore(DynamoDbItemStore("agentloom-test", client=aws["dynamodb"]))
        w = world(tmp_path, served.url, store=store, keyring=aws["keyring"],
                  index=S3VectorsIndex(aws["vectors"], BUCKET))
        base = w.base(chunk_size=200, chunk_overlap=0)
        text = f"# Vault\n\n{SECRET}\n\n# Lunch\n\nLunch is served at noon.\n"
        doc, _, stats = w.service.put_document(ALICE, w.space_id, base.base_id, "v.md",
                                               text.encode())
        assert stats.embedded == 2
        found = w.service.search(ALICE, w.space_id, [base.base_id], "vault code folder", 1)
        assert found[0].text.endswith(SECRET)
        _, _, stats = w.service.put_document(ALICE, w.space_id, base.base_id, "v.md",
                                             text.replace("noon", "one").encode())
        assert (stats.embedded, stats.reused, stats.removed) == (1, 1, 1)

        call = SearchCall(space_id=w.space_id, run_id="run_1", request_id="run_1.main.1",
                          instance="main", top_k=2)
        cited = asyncio.run(w.service.search_for_run(call, [base.base_id], "vault code",
                                                     None))
        assert cited[0].heading == "Vault"
        assert w.service.runs.text(cited[0], w.space_id).endswith(SECRET)

        items = aws["dynamodb"].scan(TableName="agentloom-test")["Items"]
        assert SECRET not in json.dumps(items) and "vault code" not in json.dumps(items)
        listed = aws["vectors"].list_vectors(vectorBucketName=BUCKET,
                                             indexName=index_name(base.base_id),
                                             returnMetadata=True)["vectors"]
        assert len(listed) == 2 and SECRET not in json.dumps(listed)

        w.service.delete_base(ALICE, w.space_id, base.base_id)
        assert not aws["vectors"].list_indexes(vectorBucketName=BUCKET)["indexes"]
        assert w.service.store.chunks(doc.document_id) == []
