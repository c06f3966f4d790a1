"""Known credentials out of projections and events (docs/contract.md#three-kinds-of-data).

The embedded app knows the provider keys it uses: the value of the environment variable
the model connection's ``api_key_ref`` names, and the conventional ``OPENAI_API_KEY`` /
``DEEPSEEK_API_KEY``. ``Redactor.scrub`` replaces each of them with ``[redacted]`` in any
JSON-like value (strings inside dicts, lists and tuples, keys included), without
changing the value it was given.

This is not a general secret detector: text the app does not know as a credential (a
password a tool printed, a key of another service) passes unchanged. Values shorter than
``MIN_SECRET_CHARS`` are not treated as credentials — replacing a two-letter "key"
everywhere would destroy the text and protect nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8
PROVIDER_KEY_VARS = ("OPENAI_API_KEY", "DEEPSEEK_API_KEY")


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: tuple[str, ...] = ()
        self.add(*secrets)

    @classmethod
    def from_environment(cls, *refs: str | None,
                         environ: Mapping[str, str] | None = None) -> Redactor:
        """The values of ``refs`` (environment variable names, e.g. an ``api_key_ref``)
        and of the conventional provider key variables."""
        env = os.environ if environ is None else environ
        names = {*PROVIDER_KEY_VARS, *(r for r in refs if r)}
        return cls(env.get(name, "") for name in sorted(names))

    def add(self, *secrets: str) -> None:
        known = {s for s in (*self._secrets, *secrets) if len(s) >= MIN_SECRET_CHARS}
        # longest first: a key that contains another is replaced whole
        self._secrets = tuple(sorted(known, key=lambda s: (-len(s), s)))

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def scrub(self, value: Any) -> Any:
        """``value`` with every known credential replaced (a new value where anything
        changed; the input is never mutated)."""
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(k) if isinstance(k, str) else k: self.scrub(v)
                    for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub(v) for v in value]
        return value
