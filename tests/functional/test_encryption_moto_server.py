"""The encrypted DynamoDB store with KMS over real HTTP: a moto server on 127.0.0.1 (a
free port), boto3 clients given its ``endpoint_url``. The representative engine run,
then a Scan finds no plaintext, the KMS calls are counted on the wire, and a cold
process reads the run back with one Decrypt."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import boto3
import pytest
from functional.test_encryption_at_rest import (
    SCOPE,
    assert_reads_back,
    item_values,
    plaintext_found,
    representative_run,
)
from moto.server import ThreadedMotoServer

from agentloom.crypto import EnvelopeCodec, fixed_scope
from agentloom.crypto.kms_keyring import KmsKeyring
from agentloom.stores.dynamodb_checkpoints import DynamoDbCheckpointStore, create_table
from agentloom_runtime.errors import ConfigError

TABLE = "agentloom-http"


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_KMS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        port = server._server.server_port  # type: ignore[union-attr]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def client(service: Literal["dynamodb", "kms"], endpoint: str) -> Any:
    return boto3.client(service, region_name="us-east-1", endpoint_url=endpoint)


async def test_encrypted_dynamodb_with_kms_over_http(endpoint: str) -> None:
    dynamodb, kms = client("dynamodb", endpoint), client("kms", endpoint)
    requests: Counter[str] = Counter()
    kms.meta.events.register("before-send.kms", lambda request, **_: requests.update(
        [request.headers["X-Amz-Target"].decode().split(".")[-1]]))
    create_table(dynamodb, TABLE)
    key_arn = kms.create_key(Description="agentloom over HTTP")["KeyMetadata"]["Arn"]
    requests.clear()

    def store(key: str = key_arn) -> DynamoDbCheckpointStore:
        codec = EnvelopeCodec(KmsKeyring(key, client=kms), scope=fixed_scope(**SCOPE))
        return DynamoDbCheckpointStore(TABLE, client=dynamodb, codec=codec)

    assert await representative_run(store()) == 8
    assert requests == {"GenerateDataKey": 1}  # HTTP requests actually sent to KMS
    items = dynamodb.scan(TableName=TABLE)["Items"]
    assert len(items) > 10 and plaintext_found(item_values(items)) == []
    assert_reads_back(store())  # a cold process
    assert requests == {"GenerateDataKey": 1, "Decrypt": 1}
    other = kms.create_key()["KeyMetadata"]["Arn"]
    with pytest.raises(ConfigError, match="cannot open its data key"):
        store(other).load_head("run-1")
