"""The vector bucket teardown's handler on moto's S3 Vectors: Delete empties the bucket
(every index), Create and Update change nothing, a bucket already
gone is empty, and every outcome is answered to the pre-signed URL — a failure as
FAILED with its reason, so CloudFormation does not wait for an hour."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from agentloom_infra import vector_teardown_handler as teardown
from functional.aws.harness import fake_credentials
from moto import mock_aws

BUCKET = "agentloom-test-kb"


@pytest.fixture
def answers() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local stand-in for CloudFormation's pre-signed response URL."""
    got: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None

        def do_PUT(self) -> None:
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/response", got
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def vectors(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    fake_credentials(monkeypatch)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("s3vectors", region_name="us-east-1")
        client.create_vector_bucket(vectorBucketName=BUCKET)
        yield client


def _event(kind: str, url: str, bucket: str = BUCKET) -> dict[str, Any]:
    return {"RequestType": kind, "ResponseURL": url, "StackId": "stack", "RequestId": "r1",
            "LogicalResourceId": "KnowledgeTeardown", "PhysicalResourceId": "pid",
            "ResourceProperties": {"VectorBucketName": bucket}}


def _indexes(client: Any) -> list[str]:
    return [i["indexName"] for i in client.list_indexes(vectorBucketName=BUCKET)["indexes"]]


def _create(client: Any, count: int) -> None:
    for n in range(count):
        client.create_index(vectorBucketName=BUCKET, indexName=f"kb-{n}", dataType="float32",
                            dimension=3, distanceMetric="cosine")


def test_delete_removes_every_index_and_answers_success(vectors: Any, answers: Any) -> None:
    url, got = answers
    _create(vectors, 3)
    teardown.handler(_event("Delete", url), None)
    assert _indexes(vectors) == []
    vectors.delete_vector_bucket(vectorBucketName=BUCKET)  # what CloudFormation does next
    assert [(a["Status"], a["PhysicalResourceId"], a["RequestId"]) for a in got] == [
        ("SUCCESS", "pid", "r1")]


@pytest.mark.parametrize("kind", ["Create", "Update"])
def test_create_and_update_change_nothing(vectors: Any, answers: Any, kind: str) -> None:
    url, got = answers
    _create(vectors, 1)
    teardown.handler(_event(kind, url), None)
    assert _indexes(vectors) == ["kb-0"] and got[0]["Status"] == "SUCCESS"


def test_a_bucket_already_gone_is_empty(vectors: Any) -> None:
    assert teardown.empty(vectors, "agentloom-gone-kb") == 0


def test_a_failure_is_answered_failed_with_its_reason(vectors: Any, answers: Any,
                                                      monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    url, got = answers
    _create(vectors, 1)

    def refused(client: Any, bucket: str) -> int:
        raise PermissionError("s3vectors:DeleteIndex denied")

    monkeypatch.setattr(teardown, "empty", refused)
    teardown.handler(_event("Delete", url), None)
    assert got[0]["Status"] == "FAILED"
    assert got[0]["Reason"] == "PermissionError: s3vectors:DeleteIndex denied"
