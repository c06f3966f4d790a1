"""The keyrings: ``LocalKeyring`` (a 0600 key file, refused otherwise) and ``KmsKeyring``
(KMS on moto), each with the errors the codec relies on: ``ConfigError`` for a key that
is not this keyring's, ``PersistenceError`` for an altered key or context or a failing
service."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

from agentloom.crypto import LocalKeyring
from agentloom.crypto.kms_keyring import KmsKeyring
from agentloom_runtime.errors import ConfigError, PersistenceError

SCOPE = {"space": "space-acme", "session": "session-42"}


# -- LocalKeyring ----------------------------------------------------------------------


def test_local_keyring_creates_a_0600_key_file_and_reopens_it(tmp_path: Path) -> None:
    path = tmp_path / "agentloom.key"
    keyring = LocalKeyring(path)
    info = path.stat()
    assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_size == 32
    assert sorted(os.listdir(tmp_path)) == ["agentloom.key"]  # no temporary file left
    data_key, wrapped = keyring.generate(SCOPE)
    assert len(data_key) == 32 and data_key not in wrapped and path.read_bytes() not in wrapped
    again = LocalKeyring(path, create=False)
    assert again.keyring_id == keyring.keyring_id and again.keyring_id.startswith("local:")
    assert again.unwrap(wrapped, SCOPE) == data_key
    assert keyring.generate(SCOPE)[0] != data_key  # a fresh data key each time


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o606, 0o700, 0o610])
def test_local_keyring_refuses_a_key_file_others_can_access(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "agentloom.key"
    LocalKeyring(path)
    path.chmod(mode)
    if mode & 0o077 == 0:  # 0700: only the owner, so accepted (the x bit is harmless)
        LocalKeyring(path)
        return
    with pytest.raises(ConfigError, match=rf"accessible by group or others \(mode "
                                          rf"{mode:04o}\).*chmod 600"):
        LocalKeyring(path)


def test_local_keyring_accepts_0400(tmp_path: Path) -> None:
    path = tmp_path / "agentloom.key"
    keyring_id = LocalKeyring(path).keyring_id
    path.chmod(0o400)
    assert LocalKeyring(path).keyring_id == keyring_id


@pytest.mark.parametrize("content", [b"", b"x" * 31, b"x" * 33, b"x" * 64])
def test_local_keyring_refuses_a_key_file_of_the_wrong_size(
        tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "agentloom.key"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(ConfigError, match="exactly 32 bytes"):
        LocalKeyring(path)


def test_local_keyring_refuses_what_is_not_a_usable_key_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        LocalKeyring(tmp_path / "missing.key", create=False)
    with pytest.raises(ConfigError, match=r"directory .* does not exist"):
        LocalKeyring(tmp_path / "no-such-dir" / "agentloom.key")
    (tmp_path / "dir.key").mkdir(mode=0o700)
    with pytest.raises(ConfigError, match="not a regular file"):
        LocalKeyring(tmp_path / "dir.key")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file to another user")
def test_local_keyring_refuses_a_key_file_owned_by_another_user(tmp_path: Path) -> None:
    path = tmp_path / "agentloom.key"
    LocalKeyring(path)
    os.chown(path, 65534, 65534)
    with pytest.raises(ConfigError, match="owned by uid 65534"):
        LocalKeyring(path)


def test_local_keyring_created_at_once_by_many_threads_is_one_key(tmp_path: Path) -> None:
    path, workers = tmp_path / "agentloom.key", 8
    barrier, ids, errors = threading.Barrier(workers), list[str](), list[BaseException]()

    def create() -> None:
        try:
            barrier.wait(timeout=30)
            ids.append(LocalKeyring(path).keyring_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == [] and len(ids) == workers and len(set(ids)) == 1
    assert sorted(os.listdir(tmp_path)) == ["agentloom.key"]


def test_local_unwrap_refuses_another_key_a_changed_scope_and_altered_bytes(
        tmp_path: Path) -> None:
    keyring, other = LocalKeyring(tmp_path / "a.key"), LocalKeyring(tmp_path / "b.key")
    data_key, wrapped = keyring.generate(SCOPE)
    with pytest.raises(ConfigError, match="another key file") as info:
        other.unwrap(wrapped, SCOPE)
    assert info.value.details["wrapped_by"] == keyring.keyring_id
    with pytest.raises(PersistenceError, match="altered"):
        keyring.unwrap(wrapped, {**SCOPE, "session": "session-43"})
    altered = bytearray(wrapped)
    altered[-1] ^= 0x01
    with pytest.raises(PersistenceError, match="altered"):
        keyring.unwrap(bytes(altered), SCOPE)
    with pytest.raises(ConfigError, match="not a local keyring's"):
        keyring.unwrap(b"\x01\x02\x03" * 40, SCOPE)  # e.g. a KMS ciphertext blob
    assert keyring.unwrap(wrapped, dict(reversed(list(SCOPE.items())))) == data_key


@pytest.mark.parametrize("scope", [{}, {"space": ""}, {"space": 1}, {f"k{n}": "v" for n in
                                                                    range(9)},
                                   {"space": "x" * 257}, {"space": "\udc80"}])
def test_keyrings_refuse_a_malformed_scope(tmp_path: Path, scope: Any) -> None:
    with pytest.raises(ConfigError, match="scope"):
        LocalKeyring(tmp_path / "a.key").generate(scope)


# -- KmsKeyring ------------------------------------------------------------------------


@pytest.fixture
def kms(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT_URL_KMS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    with mock_aws():
        yield boto3.client("kms", region_name="us-east-1")


def test_kms_keyring_round_trip_with_the_encryption_context(kms: Any) -> None:
    arn = kms.create_key()["KeyMetadata"]["Arn"]
    kms.create_alias(AliasName="alias/agentloom", TargetKeyId=arn)
    sent: list[dict[str, Any]] = []
    kms.meta.events.register("provide-client-params.kms",
                             lambda params, **_: sent.append(dict(params)))
    keyring = KmsKeyring("alias/agentloom", client=kms)
    assert keyring.keyring_id == "kms:alias/agentloom"
    data_key, wrapped = keyring.generate(SCOPE)
    assert len(data_key) == 32 and data_key not in wrapped
    assert keyring.unwrap(wrapped, SCOPE) == data_key
    assert KmsKeyring(arn, client=kms).unwrap(wrapped, SCOPE) == data_key  # alias or ARN
    assert sent[0] == {"KeyId": "alias/agentloom", "KeySpec": "AES_256",
                       "EncryptionContext": SCOPE}
    assert sent[1] == {"CiphertextBlob": wrapped, "EncryptionContext": SCOPE,
                       "KeyId": "alias/agentloom"}


def test_kms_keyring_errors(kms: Any) -> None:
    keyring = KmsKeyring(kms.create_key()["KeyMetadata"]["Arn"], client=kms)
    _, wrapped = keyring.generate(SCOPE)
    with pytest.raises(PersistenceError, match=r"InvalidCiphertextException.*altered"):
        keyring.unwrap(wrapped, {**SCOPE, "session": "session-43"})
    other = KmsKeyring(kms.create_key()["KeyMetadata"]["Arn"], client=kms)
    with pytest.raises(ConfigError, match="another KMS key wrapped it"):
        other.unwrap(wrapped, SCOPE)
    with pytest.raises(ConfigError, match=r"NotFoundException.*missing"):
        KmsKeyring("alias/missing", client=kms).generate(SCOPE)
    with pytest.raises(ConfigError, match="key_id"):
        KmsKeyring("", client=kms)


def test_kms_throttling_and_connection_failures_are_retryable(
        kms: Any, tmp_path: Path) -> None:
    keyring = KmsKeyring(kms.create_key()["KeyMetadata"]["Arn"], client=kms)
    _, wrapped = keyring.generate(SCOPE)

    def throttle(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}},
                          "Decrypt")

    kms.meta.events.register("before-call.kms.Decrypt", throttle)
    with pytest.raises(PersistenceError, match="ThrottlingException") as info:
        keyring.unwrap(wrapped, SCOPE)
    assert info.value.details["retryable"] is True
    unreachable = boto3.client("kms", region_name="us-east-1",
                               endpoint_url="http://127.0.0.1:9",
                               config=Config(retries={"total_max_attempts": 1},
                                             connect_timeout=2))
    with pytest.raises(PersistenceError, match="EndpointConnectionError") as info:
        KmsKeyring("alias/agentloom", client=unreachable).generate(SCOPE)
    assert info.value.details["retryable"] is True
