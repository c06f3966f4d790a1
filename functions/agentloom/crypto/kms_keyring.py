"""``KmsKeyring``: data keys from AWS KMS, the client injected.

``generate`` is ``GenerateDataKey(KeyId, KeySpec=AES_256, EncryptionContext=scope)``;
``unwrap`` is ``Decrypt(CiphertextBlob, EncryptionContext=scope, KeyId)`` — the key id
is passed so KMS refuses a data key of another KMS key instead of opening it with
whatever key it names. The encryption context is bound to the wrapped key (KMS checks
it), recorded in CloudTrail and usable in key-policy conditions
(``kms:EncryptionContext:space``).

Errors: a key that is missing, disabled, not ours or not allowed (``NotFound``,
``Disabled``, ``KMSInvalidState``, ``InvalidKeyUsage``, ``IncorrectKey``,
``AccessDenied``) is a ``ConfigError``; ``InvalidCiphertext`` (the wrapped key or its
context was altered) a ``PersistenceError``; throttling, KMS internal errors and
connection failures a ``PersistenceError`` with ``details["retryable"] = True``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloom_runtime.errors import ConfigError, PersistenceError

try:
    from botocore.exceptions import BotoCoreError, ClientError
except ImportError as exc:
    raise ImportError("KmsKeyring needs boto3: pip install 'agentloom[aws]'") from exc

from .contracts import KeyScope, check_scope

if TYPE_CHECKING:  # the boto3 stubs (the dev extra); never loaded at run time
    from mypy_boto3_kms import KMSClient

# Matched by code, not by ``client.exceptions``: ``AccessDeniedException`` is no modeled
# KMS error (it has no class there), and one table reads better than seven classes.
_CONFIG_ERRORS = frozenset({
    "NotFoundException", "DisabledException", "KMSInvalidStateException",
    "InvalidKeyUsageException", "IncorrectKeyException", "AccessDeniedException",
    "KeyUnavailableException"})


class KmsKeyring:
    """A ``Keyring`` over the KMS key ``key_id`` (an id, ARN, alias name or alias ARN)."""

    def __init__(self, key_id: str, *, client: KMSClient) -> None:
        if not key_id:
            raise ConfigError("KmsKeyring needs a key_id")
        self.key_id = key_id
        self._client = client

    @property
    def keyring_id(self) -> str:
        return f"kms:{self.key_id}"

    def generate(self, context: KeyScope) -> tuple[bytes, bytes]:
        scope = check_scope(context, "KmsKeyring")
        try:
            response = self._client.generate_data_key(
                KeyId=self.key_id, KeySpec="AES_256", EncryptionContext=scope)
        except (ClientError, BotoCoreError) as exc:
            raise _translate(exc, f"KMS GenerateDataKey with {self.key_id}",
                             "the key is missing, disabled, or not allowed to this role") \
                from exc
        return bytes(response["Plaintext"]), bytes(response["CiphertextBlob"])

    def unwrap(self, wrapped: bytes, context: KeyScope) -> bytes:
        scope = check_scope(context, "KmsKeyring")
        try:
            response = self._client.decrypt(CiphertextBlob=wrapped, EncryptionContext=scope,
                                            KeyId=self.key_id)
        except (ClientError, BotoCoreError) as exc:
            raise _translate(exc, f"KMS Decrypt with {self.key_id}",
                             "another KMS key wrapped it, or the key is missing, disabled, "
                             "or not allowed to this role") from exc
        return bytes(response["Plaintext"])


def _translate(exc: Exception, what: str, refused: str) -> Exception:
    if not isinstance(exc, ClientError):
        return PersistenceError(f"{what} failed: {type(exc).__name__}",
                                details={"retryable": True})
    code = str(exc.response.get("Error", {}).get("Code", "Unknown"))
    if code in _CONFIG_ERRORS:
        return ConfigError(f"{what} refused ({code}): {refused}", details={"code": code})
    if code == "InvalidCiphertextException":
        return PersistenceError(f"{what} refused the wrapped key ({code}): it or its "
                                "encryption context was altered", details={"code": code})
    return PersistenceError(f"{what} failed ({code})",
                            details={"code": code, "retryable": True})
