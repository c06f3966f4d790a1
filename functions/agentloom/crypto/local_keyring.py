"""``LocalKeyring``: data keys wrapped under a master key kept in a local key file.

The key file holds exactly 32 random bytes (the AES-256 master key) and nothing else.
It is created on first use, complete or not at all (written to a 0600 temporary file in
the same directory, then linked into place; two processes creating it at once agree on
one key). It is refused — ``ConfigError``, before anything is read from it — unless it
is a regular file owned by this user and not accessible by group or others (mode 0600
or stricter), like an SSH private key.

A wrapped data key (72 bytes)::

    "ALK" | 0x01 | fingerprint (8) | nonce (12) | AES-256-GCM(data key) | tag (16)

with the header and the key scope (canonical JSON) as AAD. The fingerprint (the first 8
bytes of HMAC-SHA256(master key, "agentloom local keyring id")) names the master key
without revealing it: ``keyring_id`` is ``local:<fingerprint hex>``, and a data key
wrapped under another key file is refused with ``ConfigError`` by name.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import stat
import tempfile
from pathlib import Path

from agentloom_runtime.errors import ConfigError, PersistenceError

try:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
except ImportError as exc:  # pragma: no cover - the extra is installed in tests
    raise ImportError("LocalKeyring needs cryptography: pip install 'agentloom[aws]'") \
        from exc

from .contracts import KeyScope, check_scope

MASTER_KEY_BYTES = 32
_MAGIC = b"ALK\x01"
_FINGERPRINT_BYTES = 8
_NONCE_BYTES = 12
_WRAPPED_BYTES = len(_MAGIC) + _FINGERPRINT_BYTES + _NONCE_BYTES + 32 + 16


class LocalKeyring:
    """A ``Keyring`` whose master key is the key file at ``path``.

    ``create``: make the key file if it does not exist (else ``ConfigError``)."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        self.path = Path(path).expanduser()
        if create and not self.path.exists():
            _create_key_file(self.path)
        master = _read_key_file(self.path)
        self._aead = AESGCM(master)
        self._fingerprint = hmac.new(master, b"agentloom local keyring id",
                                     hashlib.sha256).digest()[:_FINGERPRINT_BYTES]
        self._keyring_id = "local:" + self._fingerprint.hex()

    @property
    def keyring_id(self) -> str:
        return self._keyring_id

    def generate(self, context: KeyScope) -> tuple[bytes, bytes]:
        data_key = os.urandom(32)
        nonce = os.urandom(_NONCE_BYTES)
        header = _MAGIC + self._fingerprint + nonce
        return data_key, header + self._aead.encrypt(nonce, data_key,
                                                     _aad(header, context))

    def unwrap(self, wrapped: bytes, context: KeyScope) -> bytes:
        if len(wrapped) != _WRAPPED_BYTES or wrapped[:len(_MAGIC)] != _MAGIC:
            raise ConfigError("the wrapped data key is not a local keyring's")
        fingerprint = wrapped[len(_MAGIC):len(_MAGIC) + _FINGERPRINT_BYTES]
        if fingerprint != self._fingerprint:
            raise ConfigError(f"it was wrapped under another key file, not {self.path}",
                              details={"wrapped_by": "local:" + fingerprint.hex()})
        header = wrapped[:len(_MAGIC) + _FINGERPRINT_BYTES + _NONCE_BYTES]
        try:
            return self._aead.decrypt(header[-_NONCE_BYTES:], wrapped[len(header):],
                                      _aad(header, context))
        except InvalidTag:
            raise PersistenceError("the wrapped data key or its key scope was altered") \
                from None


def _aad(header: bytes, context: KeyScope) -> bytes:
    scope = check_scope(context, "LocalKeyring")
    return header + json.dumps(scope, ensure_ascii=False, separators=(",", ":"),
                               sort_keys=True).encode()


def _create_key_file(path: Path) -> None:
    """Write a new master key to ``path`` unless it exists, atomically: a reader never
    sees a partial key file."""
    if not path.parent.is_dir():
        raise ConfigError(f"key file {path}: directory {path.parent} does not exist")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".agentloom-key-")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(os.urandom(MASTER_KEY_BYTES))
            file.flush()
            os.fsync(file.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first
            os.link(tmp, path)
    finally:
        os.unlink(tmp)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _read_key_file(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ConfigError(f"key file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"key file {path}: cannot open it: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"key file {path} is not a regular file")
        if info.st_uid != os.geteuid():
            raise ConfigError(f"key file {path} is owned by uid {info.st_uid}, not by this "
                              f"user (uid {os.geteuid()})")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise ConfigError(f"key file {path} is accessible by group or others (mode "
                              f"{mode:04o}); refusing to use it: chmod 600 {path}")
        data = b""
        while len(data) <= MASTER_KEY_BYTES:
            chunk = os.read(fd, MASTER_KEY_BYTES + 1 - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) != MASTER_KEY_BYTES:
        raise ConfigError(f"key file {path} must hold exactly {MASTER_KEY_BYTES} bytes")
    return data
