"""Embeddings through an OpenAI-compatible ``POST {base_url}/embeddings``.

``OpenAIEmbeddings.embed`` has the safety of model discovery (``agentloom.models``): the
host is resolved once and every address checked against the SSRF policy (metadata and
link-local always refused; loopback / private only when the policy allows), the request
goes through ``PinnedTransport`` (connects to a checked address only, so DNS rebinding
cannot redirect it) with ``trust_env=False`` (no proxy variables) and no redirects, the
response is read up to ``max_response_bytes`` while streaming, and one total deadline
covers it all. The key is sent as a bearer header and never kept in an error: errors are
``EmbeddingFailed`` with a short ``reason`` token, raised outside the ``except`` blocks
that noticed the problem (no ``__context__`` holding the request headers) and never
carrying the provider's body.

Batches adapt to the endpoint's speed: the first holds ``FIRST_BATCH`` texts (at most
``max_batch``); a batch answered within a quarter of ``timeout`` doubles the next one
(up to ``max_batch``), one that took over half of it halves the next. A batch that
misses its deadline is abandoned — its connection is closed, the only cancel HTTP has (a
server that watches its connection stops; others finish and the answer is dropped) —
and sent again in halves; one text alone over the deadline fails (``deadline``), naming
the connection setting to raise. ``max_batch`` and ``timeout`` come from the model
connection's ``embedding`` settings. The answer must hold one finite vector per input,
all of one dimension. Vectors are normalised to unit length here, so every index
compares by dot product (= cosine). ``Embedder`` is the port the knowledge service uses:
``ConnectionEmbedder`` pairs a document model and a query model (e5-style models embed
queries and passages differently) on one connection.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import httpx

from agentloom.models._addresses import (
    AddressPolicy,
    Resolver,
    check_addresses,
    system_resolver,
)
from agentloom.models._transport import fetch_pinned
from agentloom.models.errors import DiscoveryError

from .errors import EmbeddingFailed

Purpose = Literal["document", "query"]
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
MAX_DIMENSION = 8_192
FIRST_BATCH = 8


@dataclass(frozen=True)
class Embedded:
    vectors: list[list[float]]
    usage: dict[str, int] = field(default_factory=dict)
    model: str = ""


class Embedder(Protocol):
    @property
    def identity(self) -> str:
        """What produced the vectors (connection and models): vectors of different
        identities are never compared."""
        ...

    async def embed(self, texts: Sequence[str], purpose: Purpose) -> Embedded: ...


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # normalised, without a trailing slash (``…/v1``)
    api_key: str = field(default="", repr=False)


class OpenAIEmbeddings:
    def __init__(self, endpoint: Endpoint, *, policy: AddressPolicy | None = None,
                 timeout: float = 30.0, max_batch: int = 64,
                 max_response_bytes: int = MAX_RESPONSE_BYTES,
                 resolver: Resolver | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._endpoint = endpoint
        self.policy = policy or AddressPolicy()
        self.timeout = timeout
        self.max_batch = max_batch
        self.max_response_bytes = max_response_bytes
        self._resolver: Resolver = resolver or system_resolver
        self._transport = transport

    def __repr__(self) -> str:
        return f"OpenAIEmbeddings({self._endpoint.base_url!r}, policy={self.policy!r})"

    async def embed(self, model: str, texts: Sequence[str]) -> Embedded:
        vectors: list[list[float]] = []
        usage: dict[str, int] = {}
        start, size = 0, min(FIRST_BATCH, self.max_batch)
        while start < len(texts):
            batch = list(texts[start:start + size])
            began = time.monotonic()
            outcome = await self._deadline(model, batch)
            if isinstance(outcome, EmbeddingFailed):
                if outcome.reason != "deadline" or len(batch) == 1:
                    raise outcome
                size = len(batch) // 2  # abandoned (its connection closed): halves
                continue
            vectors.extend(outcome.vectors)
            for key, value in outcome.usage.items():
                usage[key] = usage.get(key, 0) + value
            start += len(batch)
            size = self._next_size(len(batch), time.monotonic() - began)
        if vectors and any(len(v) != len(vectors[0]) for v in vectors):
            raise EmbeddingFailed("the embeddings endpoint answered vectors of different "
                                  "dimensions", reason="dimension_mismatch")
        return Embedded(vectors=vectors, usage=usage, model=model)

    def _next_size(self, size: int, took: float) -> int:
        """Twice ``size`` after a batch well within its deadline, half after one that
        took over half of it (a request's fixed cost is part of ``took``: sizes settle
        where a batch takes a quarter to a half of the deadline)."""
        if took <= self.timeout / 4:
            return min(self.max_batch, 2 * size)
        if took > self.timeout / 2:
            return max(1, size // 2)
        return min(self.max_batch, size)

    async def _deadline(self, model: str, batch: list[str]) -> Embedded | EmbeddingFailed:
        try:
            async with asyncio.timeout(self.timeout):
                return await self._send(model, batch)
        except TimeoutError:
            pass
        what = "one text" if len(batch) == 1 else f"a batch of {len(batch)} texts"
        return EmbeddingFailed(f"the embeddings endpoint did not answer {what} within "
                               f"{self.timeout:g} s (raise the model connection's "
                               "embedding.timeout_seconds for a slow endpoint)",
                               reason="deadline", details={"texts": len(batch)})

    async def _send(self, model: str, batch: list[str]) -> Embedded | EmbeddingFailed:
        target = httpx.URL(f"{self._endpoint.base_url}/embeddings")
        port = target.port or (443 if target.scheme == "https" else 80)
        refused: DiscoveryError | None = None
        try:
            addresses = check_addresses(await self._resolver(target.host, port), self.policy)
        except DiscoveryError as err:
            refused = err
        if refused is not None:
            return EmbeddingFailed(refused.message.replace("model discovery", "AgentLoom"),
                                   reason=str(refused.details.get("reason", "address")))
        body = await self._post(target, addresses, {"model": model, "input": batch,
                                                    "encoding_format": "float"})
        if isinstance(body, EmbeddingFailed):
            return body
        return parse_embeddings(body, len(batch), model)

    async def _post(self, target: httpx.URL, addresses: list[str],
                    payload: dict[str, Any]) -> bytes | EmbeddingFailed:
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if self._endpoint.api_key:
            headers["Authorization"] = f"Bearer {self._endpoint.api_key}"
        got = await fetch_pinned("POST", target, addresses, headers=headers,
                                 content=json.dumps(payload).encode(),
                                 limit=self.max_response_bytes, io_timeout=self.timeout,
                                 inner=self._transport)
        if got.status_code is not None:
            return _status_error(got.status_code)
        if got.failure == "too_large":
            return EmbeddingFailed(f"the embeddings answer exceeds "
                                   f"{self.max_response_bytes:,} bytes", reason="too_large")
        if got.failure:
            return EmbeddingFailed(f"could not reach the embeddings endpoint ({got.failure})",
                                   reason=got.failure)
        return got.body


def _status_error(status: int) -> EmbeddingFailed:
    if status in (401, 403):
        return EmbeddingFailed(f"the embeddings endpoint refused the key (HTTP {status})",
                               reason="auth", details={"status": status})
    if 300 <= status < 400:
        return EmbeddingFailed(f"the embeddings endpoint answered HTTP {status}, a "
                               "redirect; redirects are not followed: check the base URL",
                               reason="redirect", details={"status": status})
    return EmbeddingFailed(f"the embeddings endpoint answered HTTP {status}",
                           reason="status", details={"status": status})


def parse_embeddings(body: bytes, count: int, model: str) -> Embedded | EmbeddingFailed:
    """``{"data": [{"index", "embedding"}...], "usage"?}``: one vector per input."""
    invalid = EmbeddingFailed("the embeddings endpoint's answer is not a valid list of "
                              f"{count} vectors", reason="invalid_response")
    try:
        data = json.loads(body)
    except ValueError:
        return invalid
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list) or len(items) != count:
        return invalid
    vectors: list[list[float] | None] = [None] * count
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            return invalid
        index = item.get("index", position)
        vector = _vector(item.get("embedding"))
        if not isinstance(index, int) or not 0 <= index < count or vector is None \
                or vectors[index] is not None:
            return invalid
        vectors[index] = vector
    usage = data.get("usage")
    counts = {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)
              and k in ("prompt_tokens", "total_tokens")} if isinstance(usage, dict) else {}
    return Embedded(vectors=[v for v in vectors if v is not None], usage=counts, model=model)


def _vector(raw: object) -> list[float] | None:
    if not isinstance(raw, list) or not 0 < len(raw) <= MAX_DIMENSION:
        return None
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in raw):
        return None
    values = [float(x) for x in raw]
    norm = math.sqrt(math.fsum(x * x for x in values))
    if not math.isfinite(norm) or norm == 0.0:
        return None
    return [x / norm for x in values]


class ConnectionEmbedder:
    """A knowledge base's embedder: ``document_model`` for passages, ``query_model`` for
    queries (the same model unless the base names another), on one connection."""

    def __init__(self, client: OpenAIEmbeddings, *, connection_id: str, document_model: str,
                 query_model: str) -> None:
        self._client = client
        self._models = {"document": document_model, "query": query_model}
        self.identity = f"{connection_id}:{document_model}:{query_model}"

    async def embed(self, texts: Sequence[str], purpose: Purpose) -> Embedded:
        return await self._client.embed(self._models[purpose], texts)
