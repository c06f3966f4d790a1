"""Errors of knowledge bases, under the platform's tree (``agentloom.platform.errors``)::

    PlatformError
    ├── Invalid (422)
    │   └── DocumentInvalid       a document that cannot be read (names ``field``)
    ├── TooLarge (413)
    │   └── DocumentTooLarge      over the size or chunk cap
    └── EmbeddingFailed (502)     the embeddings endpoint failed, refused or answered
                                  wrongly (``details.reason``: a short token)

``EmbeddingFailed`` messages are built from constants: never a provider's body or a key.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agentloom.platform.errors import Invalid, PlatformError, TooLarge


class DocumentInvalid(Invalid):
    code = "document_invalid"

    def __init__(self, message: str, *, code: str | None = None,
                 field: str = "content") -> None:
        super().__init__(message, code=code,
                         details={"fields": [{"field": field, "message": message}]})


class DocumentTooLarge(TooLarge):
    code = "document_too_large"


class EmbeddingFailed(PlatformError):
    status: ClassVar[int] = 502
    code = "embedding_failed"

    def __init__(self, message: str, *, reason: str,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details={"reason": reason, **(details or {})})
        self.reason = reason
