"""Conformance fixtures: a fresh checkpoint store per test, for every adapter, plain and
encrypted (the same suite runs over stores given an ``EnvelopeCodec``: memory and SQLite
with a ``LocalKeyring``, DynamoDB with a ``KmsKeyring``, both on moto).

Each adapter declares what it supports (``Backend``); a test that needs a capability an
adapter does not declare skips with that declaration as its reason, never silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from agentloom.crypto import EnvelopeCodec, Keyring, LocalKeyring, fixed_scope
from agentloom.crypto.kms_keyring import KmsKeyring
from agentloom.stores.dynamodb_checkpoints import (
    DynamoDbCheckpointStore,
    create_table,
)
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.checkpoint import BaseCheckpointStore, InMemoryCheckpointStore

BACKENDS = ["memory", "sqlite", "dynamodb", "memory+local", "sqlite+local", "dynamodb+kms"]
ENCRYPTED_BACKENDS = [name for name in BACKENDS if "+" in name]
DYNAMODB_TABLE = "agentloom-checkpoints-test"


class EncryptedInMemoryStore(InMemoryCheckpointStore):
    """The reference store with a codec (its constructor predates the codec hook)."""

    def __init__(self, codec: EnvelopeCodec | None) -> None:
        super().__init__()
        BaseCheckpointStore.__init__(self, codec=codec)


def memory_reopener(store: InMemoryCheckpointStore
                    ) -> Callable[[EnvelopeCodec | None], BaseCheckpointStore]:
    def reopen(codec: EnvelopeCodec | None) -> BaseCheckpointStore:
        other = EncryptedInMemoryStore(codec)
        other._lock, other._heads = store._lock, store._heads
        other._rows, other._blobs = store._rows, store._blobs
        return other

    return reopen


def session_scope(run_id: str) -> dict[str, str]:
    """A scope per run, as the platform's is per session: many scopes, many data keys."""
    return {"space": "conformance", "session": run_id[:200]}


@dataclass(frozen=True)
class Backend:
    name: str
    store: BaseCheckpointStore
    # None = the capability is supported; otherwise, why it is not tested here.
    thread_race: str | None = None
    max_entries_per_commit: int | None = None  # None: no limit of its own
    client: Any = None  # the backend's client, for adapter-specific checks
    codec: EnvelopeCodec | None = None  # the store encrypts with it
    kms: Any = None  # the KMS client of a KMS-encrypted store
    # Another store over the same data, with another codec (None: plaintext), as a
    # second process would open it.
    reopen: Callable[[EnvelopeCodec | None], BaseCheckpointStore] | None = None
    # A keyring of the same kind under another master key (encrypted backends).
    other_keyring: Callable[[], Keyring] | None = None

    @property
    def encrypted(self) -> bool:
        return self.codec is not None


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
            client=client,
            reopen=lambda c: DynamoDbCheckpointStore(DYNAMODB_TABLE, client=client, codec=c))


@pytest.fixture
def kms_dynamodb_backend(fake_aws_env: None) -> Iterator[Backend]:
    """DynamoDB encrypted under a KMS key, both on moto; a key scope per run."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        kms = boto3.client("kms", region_name="us-east-1")
        create_table(client, DYNAMODB_TABLE)
        key_arn = kms.create_key(Description="agentloom conformance")["KeyMetadata"]["Arn"]
        codec = EnvelopeCodec(KmsKeyring(key_arn, client=kms), scope=session_scope)

        def other_keyring() -> Keyring:
            return KmsKeyring(kms.create_key()["KeyMetadata"]["Arn"], client=kms)

        yield Backend(
            "dynamodb+kms", DynamoDbCheckpointStore(DYNAMODB_TABLE, client=client, codec=codec),
            thread_race="moto runs in-process; the race is tested sequentially",
            client=client, codec=codec,
            kms=kms, other_keyring=other_keyring,
            reopen=lambda c: DynamoDbCheckpointStore(DYNAMODB_TABLE, client=client, codec=c))


def local_codec(tmp_path: Path) -> EnvelopeCodec:
    return EnvelopeCodec(LocalKeyring(tmp_path / "agentloom.key"),
                         scope=fixed_scope(space="conformance", session="local"))


def other_local_keyring(tmp_path: Path) -> Callable[[], Keyring]:
    return lambda: LocalKeyring(tmp_path / "other.key")


def make_backend(name: str, request: pytest.FixtureRequest,
                 tmp_path: Path) -> Iterator[Backend]:
    if name == "memory":
        memory = InMemoryCheckpointStore()
        yield Backend(name, memory, reopen=memory_reopener(memory))
    elif name == "memory+local":
        codec = local_codec(tmp_path)
        memory = EncryptedInMemoryStore(codec)
        yield Backend(name, memory, codec=codec, reopen=memory_reopener(memory),
                      other_keyring=other_local_keyring(tmp_path))
    elif name in ("sqlite", "sqlite+local"):
        sqlite_codec = local_codec(tmp_path) if name == "sqlite+local" else None
        path = tmp_path / "checkpoints.db"
        opened = [SqliteCheckpointStore(path, codec=sqlite_codec)]

        def reopen(other: EnvelopeCodec | None) -> BaseCheckpointStore:
            opened.append(SqliteCheckpointStore(path, codec=other))
            return opened[-1]

        try:
            yield Backend(name, opened[0], codec=sqlite_codec, reopen=reopen,
                          other_keyring=other_local_keyring(tmp_path) if sqlite_codec else None)
        finally:
            for store in opened:
                store.close()
    elif name == "dynamodb":
        yield request.getfixturevalue("dynamodb_backend")
    elif name == "dynamodb+kms":
        yield request.getfixturevalue("kms_dynamodb_backend")
    else:  # pragma: no cover
        raise AssertionError(name)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from make_backend(request.param, request, tmp_path)


@pytest.fixture(params=ENCRYPTED_BACKENDS)
def encrypted_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The encrypted backends only, for the properties of encryption itself."""
    yield from make_backend(request.param, request, tmp_path)


@pytest.fixture
def store(backend: Backend) -> BaseCheckpointStore:
    return backend.store
