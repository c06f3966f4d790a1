"""No size wedges a run on the real adapters (issue 9): a model answer, tool-call
arguments or a tool result of 100 KB, 1 MB or 4 MB completes on SQLite and on DynamoDB
(moto), with a small head; the scenario is ``unit.engine.test_no_wedge_sizes.run_big``.
Text that is not valid Unicode from a model is made storable before it reaches them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from unit.engine.test_no_wedge_sizes import KINDS, SIZES, head_bytes, run_big
from unit.engine.test_no_wedge_unicode import run_surrogates

from agentloom.stores.dynamodb_checkpoints import DynamoDbCheckpointStore, create_table
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.checkpoint import BaseCheckpointStore

TABLE = "agentloom-no-wedge"


@pytest.fixture
def fake_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Fake credentials and no profile, config file or endpoint from the host."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_SECURITY_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))


@pytest.fixture(params=["sqlite", "dynamodb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseCheckpointStore]:
    if request.param == "sqlite":
        sqlite = SqliteCheckpointStore(tmp_path / "checkpoints.db")
        try:
            yield sqlite
        finally:
            sqlite.close()
        return
    request.getfixturevalue("fake_aws_env")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        yield DynamoDbCheckpointStore(TABLE, client=client)


@pytest.mark.parametrize("size", list(SIZES.values()), ids=list(SIZES))
@pytest.mark.parametrize("kind", KINDS)
async def test_large_data_completes_on_the_store_with_a_small_head(
        store: BaseCheckpointStore, kind: str, size: int) -> None:
    run_id = await run_big(store, kind, size)
    assert head_bytes(store, run_id) <= 2_048


async def test_lone_surrogates_from_the_model_are_stored_and_the_run_completes(
        store: BaseCheckpointStore) -> None:
    await run_surrogates(store)
