"""Conformance fixtures: a fresh checkpoint store per test, for every adapter.

Each adapter declares what it supports (``Backend``); a test that needs a capability an
adapter does not declare skips with that declaration as its reason, never silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from agentloom.stores.dynamodb_checkpoints import (
    MAX_ENTRIES_PER_COMMIT,
    DynamoDbCheckpointStore,
    create_table,
)
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.checkpoint import BaseCheckpointStore, InMemoryCheckpointStore

BACKENDS = ["memory", "sqlite", "dynamodb"]
DYNAMODB_TABLE = "agentloom-checkpoints-test"


@dataclass(frozen=True)
class Backend:
    name: str
    store: BaseCheckpointStore
    # None = the capability is supported; otherwise, why it is not tested here.
    thread_race: str | None = None
    max_entries_per_commit: int | None = None  # None: no limit of its own
    client: Any = None  # the backend's client, for adapter-specific checks


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


@pytest.fixture
def dynamodb_backend(fake_aws_env: None) -> Iterator[Backend]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, DYNAMODB_TABLE)
        yield Backend(
            "dynamodb", DynamoDbCheckpointStore(DYNAMODB_TABLE, client=client),
            thread_race="moto runs in-process; the race is tested sequentially",
            max_entries_per_commit=MAX_ENTRIES_PER_COMMIT, client=client)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    name = request.param
    if name == "memory":
        yield Backend(name, InMemoryCheckpointStore())
    elif name == "sqlite":
        store = SqliteCheckpointStore(tmp_path / "checkpoints.db")
        try:
            yield Backend(name, store)
        finally:
            store.close()
    elif name == "dynamodb":
        yield request.getfixturevalue("dynamodb_backend")
    else:  # pragma: no cover
        raise AssertionError(name)


@pytest.fixture
def store(backend: Backend) -> BaseCheckpointStore:
    return backend.store
