"""The skill store's conformance suite, over every backend: the in-memory reference,
SQLite (the platform's file) and DynamoDB (moto, KMS keyring on moto). Content is
ciphertext at rest in each, a file larger than one chunk round-trips, put-if-absent
holds, a ciphertext moved to another item fails to open, names are per space."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from unit.skills.builders import hello_zip

from agentloom.crypto import Keyring, LocalKeyring
from agentloom.crypto.kms_keyring import KmsKeyring
from agentloom.skills import (
    MemorySkillItems,
    SkillItems,
    SkillSource,
    SkillStore,
    SqliteSkillItems,
    tree_from_zip,
)
from agentloom.skills.dynamodb_store import DynamoDbSkillItems
from agentloom.stores.dynamodb_checkpoints import create_table
from agentloom_runtime.errors import PersistenceError

TABLE = "agentloom-skills-test"
BIG = "".join(f"{i:08d}\n" for i in range(60_000))  # 540 KB: three chunks


@dataclass
class Backend:
    items: SkillItems
    keyring: Keyring


@pytest.fixture(params=["memory", "sqlite", "dynamodb"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "memory":
        yield Backend(MemorySkillItems(), LocalKeyring(tmp_path / "k"))
    elif request.param == "sqlite":
        items = SqliteSkillItems(tmp_path / "agentloom.sqlite3")
        yield Backend(items, LocalKeyring(tmp_path / "k"))
        items.close()
    else:
        request.getfixturevalue("fake_aws_env")
        with mock_aws():
            client = boto3.client("dynamodb", region_name="us-east-1")
            kms = boto3.client("kms", region_name="us-east-1")
            create_table(client, TABLE)
            key = kms.create_key()["KeyMetadata"]["Arn"]
            yield Backend(DynamoDbSkillItems(TABLE, client=client),
                          KmsKeyring(key, client=kms))


def _raw_values(items: SkillItems, pk: str) -> list[bytes]:
    return [v for _, v in items.query(pk, "")]


def test_primitives(backend: Backend) -> None:
    items = backend.items
    assert items.put("p", "a#1", b"one") and items.get("p", "a#1") == b"one"
    assert not items.put("p", "a#1", b"two", if_absent=True)
    assert items.get("p", "a#1") == b"one"
    assert items.put("p", "a#1", b"two") and items.get("p", "a#1") == b"two"
    items.put("p", "a#2", b"x")
    items.put("p", "b#1", b"y")
    items.put("q", "a#3", b"z")
    assert [k for k, _ in items.query("p", "a#")] == ["a#1", "a#2"]
    items.delete("p", "a#1")
    assert items.get("p", "a#1") is None and items.get("x", "y") is None


def test_import_read_and_delete(backend: Backend) -> None:
    store = SkillStore(backend.items, backend.keyring)
    tree = tree_from_zip(hello_zip(**{"assets/big.txt": BIG}))
    record, created = store.import_tree("spc", tree, SkillSource(kind="zip"), user_id="u")
    assert created and store.list("spc") == [record] and store.list("other") == []
    manifest = store.manifest("spc", record.content_hash)
    assert manifest is not None and manifest.meta.name == "hello"
    assert store.read_file("spc", manifest, "assets/big.txt").decode() == BIG
    assert store.import_tree("spc", tree, SkillSource(kind="git"), user_id="v")[1] is False
    # at rest: no file content, description or name text in any value
    version = _raw_values(backend.items, f"skill#spc#{record.content_hash}")
    assert len(version) >= 6 and not any(b"00000042" in v or b"Says hello" in v
                                         for v in version)
    assert not any(b"Says hello" in v for v in _raw_values(backend.items, "skills#spc"))
    assert store.delete("spc", "hello") and store.get("spc", "hello") is None
    assert not store.delete("spc", "hello")
    assert store.manifest("spc", record.content_hash) == manifest  # pinned versions stay


def test_a_ciphertext_moved_to_another_item_fails(backend: Backend) -> None:
    store = SkillStore(backend.items, backend.keyring)
    record, _ = store.import_tree("spc", tree_from_zip(hello_zip()), SkillSource(kind="zip"),
                                  user_id="u")
    pk = f"skill#spc#{record.content_hash}"
    guide = backend.items.get(pk, "file#references/guide.md#0000")
    assert guide is not None
    backend.items.put(pk, "file#scripts/x.py#0000", guide)
    manifest = store.manifest("spc", record.content_hash)
    assert manifest is not None
    with pytest.raises(PersistenceError, match="failed authentication"):
        store.read_file("spc", manifest, "scripts/x.py")
