"""Provider keys sealed with KMS (issue 10): ``CodecSecrets`` — the platform's
``SecretSealer`` — over a ``KmsKeyring`` and the DynamoDB platform store, both on moto,
as the AWS wiring builds it (``CodecSecrets.kms(key_id, client=, store=)``).

- the key opens for its own (space, connection) and fails for another connection or
  another space (the AAD and the KMS encryption context are bound to both), and with
  another KMS key;
- the table holds no plaintext key; KMS saw the encryption context {space, connection};
- opening a key again in the same process costs no KMS call (the codec's cache).
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from agentloom.platform.secrets import CodecSecrets
from agentloom.platform.store import PlatformStore
from agentloom.platform.store.dynamodb import DynamoDbItemStore, create_table
from agentloom_runtime.errors import ConfigError, PersistenceError

KEY = "sk-live-provider-key-6f1c2b9a"
TABLE = "agentloom-platform"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, Any]]:
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_KMS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        kms = boto3.client("kms", region_name="us-east-1")
        create_table(dynamodb, TABLE)
        yield {"dynamodb": dynamodb, "kms": kms,
               "key": kms.create_key()["KeyMetadata"]["Arn"]}


def test_a_kms_sealed_key_opens_only_for_its_space_and_connection(
        aws: dict[str, Any]) -> None:
    kms, store = aws["kms"], PlatformStore(DynamoDbItemStore(TABLE, client=aws["dynamodb"]))
    calls: Counter[str] = Counter()
    contexts: list[dict[str, str]] = []
    kms.meta.events.register("before-call.kms",
                             lambda model, **_: calls.update([model.name]))
    kms.meta.events.register("provide-client-params.kms", lambda params, **_: contexts.append(
        dict(params.get("EncryptionContext", {}))))
    secrets = CodecSecrets.kms(aws["key"], client=kms, store=store)

    sealed = secrets.seal("spc_a", "mdl_1", KEY)
    assert KEY not in sealed and KEY.encode() not in base64.b64decode(sealed)
    assert secrets.open("spc_a", "mdl_1", sealed) == KEY
    assert contexts[0] == {"space": "spc_a", "connection": "mdl_1"}
    assert calls == {"GenerateDataKey": 1}, "sealing costs one data key, opening none"

    secrets.seal("spc_a", "mdl_2", "sk-another")  # the other connection has its own key
    with pytest.raises(PersistenceError, match="failed authentication"):
        secrets.open("spc_a", "mdl_2", sealed)  # moved to another connection
    with pytest.raises(PersistenceError):
        secrets.open("spc_b", "mdl_1", sealed)  # moved to another space

    # a cold process (its own codec) opens it with one Decrypt; then from its cache
    calls.clear()
    cold = CodecSecrets.kms(aws["key"], client=kms, store=store)
    assert cold.open("spc_a", "mdl_1", sealed) == KEY
    assert cold.open("spc_a", "mdl_1", sealed) == KEY
    assert calls == {"Decrypt": 1}
    # another KMS key cannot open it
    other = CodecSecrets.kms(kms.create_key()["KeyMetadata"]["Arn"], client=kms, store=store)
    with pytest.raises((ConfigError, PersistenceError)):
        other.open("spc_a", "mdl_1", sealed)

    scan = aws["dynamodb"].scan(TableName=TABLE)["Items"]
    assert scan and KEY not in repr(scan) and "sk-another" not in repr(scan)
