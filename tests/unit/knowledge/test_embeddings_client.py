"""The embeddings client: one vector per input, normalised; every failure a short,
body-free ``EmbeddingFailed``; the SSRF policy and pinning of model discovery; batches."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest

from agentloom.knowledge import EmbeddingFailed, Endpoint, OpenAIEmbeddings
from agentloom.models._addresses import AddressPolicy

KEY = "sk-test-secret-key"


def client(handler: Any, *, address: str = "93.184.216.34", **kw: Any) -> OpenAIEmbeddings:
    async def resolver(host: str, port: int) -> list[str]:
        return [address]

    return OpenAIEmbeddings(Endpoint("https://emb.example.com/v1", KEY), resolver=resolver,
                            transport=httpx.MockTransport(handler), **kw)


def ok(vectors: list[list[float]]) -> httpx.Response:
    return httpx.Response(200, json={"data": [{"index": i, "embedding": v}
                                              for i, v in enumerate(vectors)],
                                     "usage": {"prompt_tokens": 3, "total_tokens": 3}})


async def test_vectors_in_input_order_normalised_with_the_key_pinned() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = json.loads(request.content)
        data = [{"index": i, "embedding": [3.0 * (i + 1), 4.0]}
                for i in reversed(range(len(body["input"])))]
        return httpx.Response(200, json={"data": data, "usage": {"total_tokens": 7}})

    result = await client(handler, max_batch=2).embed("m", ["a", "b", "c"])
    assert [round(x, 6) for x in result.vectors[0]] == [0.6, 0.8]
    assert all(math.isclose(sum(x * x for x in v), 1.0) for v in result.vectors)
    assert result.vectors[1] != result.vectors[0]
    assert len(seen) == 2 and result.usage["total_tokens"] == 14  # batches of 2
    assert seen[0].url.host == "93.184.216.34"  # pinned to the checked address
    assert seen[0].headers["host"] == "emb.example.com"
    assert seen[0].headers["authorization"] == f"Bearer {KEY}"
    assert json.loads(seen[0].content)["model"] == "m"


@pytest.mark.parametrize(("response", "reason"), [
    (httpx.Response(401, text="key sk-leak invalid"), "auth"),
    (httpx.Response(302, headers={"location": "http://169.254.169.254/"}), "redirect"),
    (httpx.Response(500, text="internal secret"), "status"),
    (httpx.Response(200, text="not json"), "invalid_response"),
    (httpx.Response(200, json={"data": [{"index": 0, "embedding": [0.0, 0.0]}]}),
     "invalid_response"),
    (httpx.Response(200, json={"data": [{"index": 0, "embedding": [1, "x"]}]}),
     "invalid_response"),
    (httpx.Response(200, json={"data": []}), "invalid_response"),
    (httpx.Response(200, content=b"x" * 2_000), "too_large"),
])
async def test_failures_are_short_and_carry_no_body(response: httpx.Response,
                                                    reason: str) -> None:
    with pytest.raises(EmbeddingFailed) as err:
        await client(lambda r: response, max_response_bytes=1_000).embed("m", ["a"])
    assert err.value.reason == reason and err.value.status == 502
    text = f"{err.value.message} {err.value.details}"
    assert "secret" not in text and "sk-" not in text and "169.254" not in text
    assert err.value.__context__ is None and err.value.__cause__ is None


async def test_mixed_dimensions_are_refused() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return ok([[1.0, 0.0]] if "a" in json.loads(request.content)["input"] else [[1.0]])

    with pytest.raises(EmbeddingFailed) as err:
        await client(handler, max_batch=1).embed("m", ["a", "b"])
    assert err.value.reason == "dimension_mismatch"


@pytest.mark.parametrize(("address", "policy", "reason"), [
    ("169.254.169.254", AddressPolicy(allow_loopback=True, allow_private=True), "metadata"),
    ("127.0.0.1", AddressPolicy(), "loopback"),
    ("10.0.0.8", AddressPolicy(), "private"),
])
async def test_ssrf_policy(address: str, policy: AddressPolicy, reason: str) -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return ok([[1.0]])

    with pytest.raises(EmbeddingFailed) as err:
        await client(handler, address=address, policy=policy).embed("m", ["a"])
    assert err.value.reason == reason and not sent


async def test_connect_failure_and_deadline() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(EmbeddingFailed) as err:
        await client(refuse).embed("m", ["a"])
    assert err.value.reason == "connect"

    import asyncio

    async def slow_resolver(host: str, port: int) -> list[str]:
        await asyncio.sleep(1)
        return ["93.184.216.34"]

    slow = OpenAIEmbeddings(Endpoint("https://emb.example.com/v1"), resolver=slow_resolver,
                            timeout=0.05)
    with pytest.raises(EmbeddingFailed) as err:
        await slow.embed("m", ["a"])
    assert err.value.reason == "deadline"


async def test_batches_adapt_to_a_slow_embedder_within_the_deadline() -> None:
    """Issue 17: 33 chunks (a 28 KB document) went out as one batch under a fixed
    deadline and failed (deadline) on a slow local embedder. Batches start small and
    stay where they fit, so the same texts are embedded, in order."""
    from unit.knowledge.builders import slow_server

    with slow_server(per_text=0.06) as served:  # one batch of 33: 2 s > the deadline
        client = OpenAIEmbeddings(Endpoint(served.url), timeout=1.5,
                                  policy=AddressPolicy(allow_loopback=True))
        result = await client.embed("m", [f"t{i}" for i in range(33)])
    assert [round(v[1] / v[0]) for v in result.vectors] == list(range(33))
    assert sum(n for state, n in served.log if state == "done") == 33
    assert max(n for _, n in served.log) <= 8


async def test_an_abandoned_batch_is_cancelled_and_sent_again_in_halves() -> None:
    """A batch that misses its deadline is abandoned — its connection closed, so a
    server that watches it stops computing — and its texts go again in halves; one
    text alone over the deadline fails, naming the setting to raise."""
    from unit.knowledge.builders import slow_server

    with slow_server(per_text=0.2) as served:
        client = OpenAIEmbeddings(Endpoint(served.url), timeout=1.0,
                                  policy=AddressPolicy(allow_loopback=True))
        result = await client.embed("m", [f"t{i}" for i in range(6)])
        assert len(result.vectors) == 6
        assert served.log[0] == ("abandoned", 6), served.log  # stopped, not finished
        assert next(n for state, n in served.log[1:] if state == "done") == 3
        assert sum(n for state, n in served.log if state == "done") == 6
    with slow_server(per_text=2.0) as served:
        client = OpenAIEmbeddings(Endpoint(served.url), timeout=1.0,
                                  policy=AddressPolicy(allow_loopback=True))
        with pytest.raises(EmbeddingFailed) as late:
            await client.embed("m", ["t1"])
    assert late.value.reason == "deadline" and late.value.details["texts"] == 1
    assert "embedding.timeout_seconds" in late.value.message
