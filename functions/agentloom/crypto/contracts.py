"""The keyring port and the key scope of a stored document.

A **keyring** makes and opens *data keys*: ``generate(context)`` returns a fresh 256-bit
data key in plaintext and wrapped (encrypted under the keyring's master key, with
``context`` bound to it); ``unwrap(wrapped, context)`` returns the plaintext again, only
with the same context. Adapters: ``KmsKeyring`` (AWS KMS ``GenerateDataKey`` /
``Decrypt``; the context is KMS's encryption context) and ``LocalKeyring`` (a 0600 key
file; AES-GCM with the context as AAD).

A **key scope** is that context for a document of the checkpoint store (a run, or a
session document): a small mapping of strings, normally ``{"space": …, "session": …}``.
A ``ScopeResolver`` maps a document id (the store's ``run_id``) to its scope; the codec
asks it only when it needs a new data key for a document (see ``EnvelopeCodec``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from agentloom_runtime.errors import ConfigError

KeyScope = Mapping[str, str]
ScopeResolver = Callable[[str], KeyScope]


class Keyring(Protocol):
    """Makes and opens data keys under one master key.

    ``unwrap`` raises ``ConfigError`` when the wrapped key is not one this keyring can
    open (another key file, another KMS key, no permission) and ``PersistenceError``
    when it is but fails authentication (the wrapped key or its context was altered) or
    the key service fails (``details["retryable"]`` says whether a retry may help)."""

    @property
    def keyring_id(self) -> str:
        """``<kind>:<id>`` (``local:<fingerprint>``, ``kms:<key id>``), recorded with each
        wrapped key; never secret."""
        ...

    def generate(self, context: KeyScope) -> tuple[bytes, bytes]:
        """A new data key: (32 plaintext bytes, the wrapped key)."""
        ...

    def unwrap(self, wrapped: bytes, context: KeyScope) -> bytes:
        """The 32 plaintext bytes of a data key ``generate`` wrapped with ``context``."""
        ...


def fixed_scope(**context: str) -> ScopeResolver:
    """A resolver giving every document the same scope (an embedded store of one user,
    or a store whose documents all belong to one session)."""
    scope = check_scope(context, "fixed_scope")
    return lambda run_id: scope


def check_scope(scope: object, what: str) -> dict[str, str]:
    """``scope`` as a plain dict, or ``ConfigError``: 1–8 entries, strings of 1–256
    characters (KMS accepts more; a scope is ids, not content)."""
    if not isinstance(scope, Mapping) or not 1 <= len(scope) <= 8:
        raise ConfigError(f"{what}: a key scope is a mapping of 1 to 8 strings, "
                          f"got {type(scope).__name__}")
    checked: dict[str, str] = {}
    for name, value in scope.items():
        if not (isinstance(name, str) and isinstance(value, str)
                and 1 <= len(name) <= 256 and 1 <= len(value) <= 256):
            raise ConfigError(f"{what}: key scope entries are non-empty strings of at most "
                              f"256 characters: {name!r}")
        try:
            (name + value).encode()
        except UnicodeEncodeError:
            raise ConfigError(f"{what}: key scope holds a lone surrogate") from None
        checked[name] = value
    return dict(sorted(checked.items()))
