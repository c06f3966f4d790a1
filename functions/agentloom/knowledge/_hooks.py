"""The ``model.embedding.before/after`` hook points around one embedding request.

``StageRunner`` is what a host offers: inside a run it is the engine's ``ToolHooks``
(``ToolContext.services["hooks"]``: durable, keyed by the call). ``before`` may rewrite
the texts (the point keeps their count); ``after`` observes the vectors. With no runner
(document uploads happen outside any agent version, whose hooks these are) the request
goes out as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .embeddings import Embedded, Embedder, Purpose


class StageRunner(Protocol):
    def has(self, point: str, **fields: Any) -> bool: ...

    async def run(self, point: str, payload: dict[str, Any],
                  **fields: Any) -> tuple[dict[str, Any], Any]: ...

    async def observe(self, point: str, payload: dict[str, Any], **fields: Any) -> None: ...


async def embed(embedder: Embedder, texts: Sequence[str], purpose: Purpose, *,
                hooks: StageRunner | None, instance: str = "main", model: str = "",
                resource_id: str = "") -> Embedded:
    texts = list(texts)
    ids = {"instance": instance, "model": model, "resource_id": resource_id}
    if hooks is not None and hooks.has("model.embedding.before", purpose=purpose):
        payload, _ = await hooks.run("model.embedding.before",
                                     {"purpose": purpose, "texts": texts, **ids},
                                     purpose=purpose)
        texts = [str(t) for t in payload["texts"]]
    result = await embedder.embed(texts, purpose)
    if hooks is not None and hooks.has("model.embedding.after", purpose=purpose):
        await hooks.observe("model.embedding.after", {
            "purpose": purpose, "vectors": result.vectors, "texts": texts,
            "usage": dict(result.usage) or None, **ids}, purpose=purpose)
    return result
