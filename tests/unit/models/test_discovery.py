"""Discovery's logic with httpx.MockTransport and a fake resolver (no sockets)."""

from __future__ import annotations

import json
import traceback
from typing import Any

import httpx
import pytest

from agentloom.models import (
    ConnectionInputError,
    DiscoveryError,
    ModelDiscovery,
    ProviderAuthFailed,
    ProviderRedirected,
    ProviderResponseInvalid,
    ProviderResponseTooLarge,
    ProviderStatusError,
    parse_model_list,
)

KEY = "sk-test-0123456789abcdef"
PUBLIC = "93.184.216.34"


class Resolver:
    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        return self.answers[min(len(self.calls), len(self.answers)) - 1]


def listing(*entries: Any) -> dict:
    return {"object": "list", "data": list(entries)}


def client(handler, resolver=None, **kwargs) -> ModelDiscovery:
    return ModelDiscovery(transport=httpx.MockTransport(handler),
                          resolver=resolver or Resolver([PUBLIC]), **kwargs)


def everything_about(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc) + json.dumps(
        exc.to_dict() if isinstance(exc, DiscoveryError) else {})


async def test_openai_listing_is_described_with_sources():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=listing(
            {"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "system"},
            {"id": "text-embedding-3-small", "object": "model", "owned_by": "system"},
            {"id": "gpt-4o-mini-custom", "object": "model", "owned_by": "user-abc"},
            {"id": "gpt-4o", "object": "model"},  # a duplicate is listed once
            {"id": 42}, {"object": "model"}, "junk", {"id": "bad id"}))

    resolver = Resolver([PUBLIC])
    models = await client(handler, resolver).discover("openai", "https://api.openai.com/v1/",
                                                      KEY)
    assert [m.id for m in models] == ["gpt-4o", "gpt-4o-mini-custom", "text-embedding-3-small"]
    gpt, custom, embedding = models
    assert gpt.selectable and gpt.budget is not None
    assert gpt.budget.context_window.source == "official_manifest"
    assert (gpt.created, gpt.owned_by) == (1715367049, "system")
    assert custom.budget is not None
    assert custom.budget.context_window.source == "platform_default"
    assert not embedding.selectable and embedding.budget is None
    assert embedding.not_selectable_reason is not None
    assert "embeddings" in embedding.not_selectable_reason
    # pinned: the transport is asked for the checked IP, with the original Host and SNI
    (request,) = seen
    assert request.url == httpx.URL(f"https://{PUBLIC}/v1/models")
    assert request.headers["host"] == "api.openai.com"
    assert request.extensions["sni_hostname"] == "api.openai.com"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert resolver.calls == [("api.openai.com", 443)]
    assert KEY not in repr(models) and KEY not in json.dumps([m.model_dump() for m in models])


async def test_deepseek_list_fields_are_provider_sourced():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=listing(
            {"id": "deepseek-chat", "object": "model", "owned_by": "deepseek",
             "context_window": 131_072, "max_output_tokens": 8_192},
            {"id": "deepseek-reasoner", "object": "model", "owned_by": "deepseek"}))

    chat, reasoner = await client(handler).discover("deepseek", "https://api.deepseek.com", KEY)
    assert chat.provider_fields == {"context_window": 131_072, "max_output_tokens": 8_192}
    assert chat.budget is not None and chat.budget.context_window.source == "provider"
    assert reasoner.budget is not None
    assert reasoner.budget.context_window.source == "platform_default"


async def test_a_keyless_compatible_server_gets_no_authorization_header():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=listing({"id": "llama"}))

    await client(handler, allow_private=True, resolver=Resolver(["10.0.0.8"])).discover(
        "openai_compatible", "http://gpu-box.internal:8000/v1", "")
    assert "authorization" not in seen[0].headers
    assert seen[0].url == httpx.URL("http://10.0.0.8:8000/v1/models")
    assert seen[0].headers["host"] == "gpu-box.internal:8000"


async def test_the_name_is_resolved_once_so_a_rebinding_answer_is_never_used():
    resolver = Resolver([PUBLIC], ["169.254.169.254"])
    hosts: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        hosts.append(request.url.host)
        return httpx.Response(200, json=listing({"id": "m"}))

    await client(handler, resolver).discover("openai_compatible", "https://rebind.example/v1",
                                             KEY)
    assert len(resolver.calls) == 1 and hosts == [PUBLIC]


@pytest.mark.parametrize(("status", "error", "code"), [
    (401, ProviderAuthFailed, "provider_auth_failed"),
    (403, ProviderAuthFailed, "provider_auth_failed"),
    (301, ProviderRedirected, "provider_redirected"),
    (307, ProviderRedirected, "provider_redirected"),
    (404, ProviderStatusError, "provider_status_error"),
    (429, ProviderStatusError, "provider_status_error"),
    (500, ProviderStatusError, "provider_status_error"),
])
async def test_statuses_map_to_stable_codes_without_the_body_or_key(status, error, code):
    body = {"error": {"message": f"Incorrect API key provided: {KEY}", "code": KEY}}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body, headers={"location": f"https://x/?k={KEY}"})

    with pytest.raises(error) as caught:
        await client(handler).discover("openai", "https://api.openai.com/v1", KEY)
    assert caught.value.code == code
    assert caught.value.details == {"status": status}
    text = everything_about(caught.value)
    assert KEY not in text and "Incorrect API key" not in text
    assert caught.value.__cause__ is None and caught.value.__context__ is None


@pytest.mark.parametrize("body", [
    b"not json " + KEY.encode(), json.dumps({"data": KEY}).encode(),
    json.dumps([{"id": KEY}]).encode(), b"[" * 100_000])
async def test_an_invalid_body_is_refused_without_echoing_it(body):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body)

    with pytest.raises(ProviderResponseInvalid) as caught:
        await client(handler).discover("openai", "https://api.openai.com/v1", KEY)
    assert caught.value.code == "provider_response_invalid"
    assert KEY not in everything_about(caught.value)
    assert caught.value.__context__ is None


async def test_the_size_cap_applies_to_the_decoded_body():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=json.dumps(
            listing(*({"id": f"m-{i}"} for i in range(200)))).encode())

    with pytest.raises(ProviderResponseTooLarge) as caught:
        await client(handler, max_response_bytes=1_000).discover(
            "openai", "https://api.openai.com/v1", KEY)
    assert caught.value.code == "provider_response_too_large"
    assert caught.value.details == {"reason": "too_large", "limit": 1_000}


def test_too_many_models_are_refused():
    body = json.dumps(listing(*({"id": f"m-{i}"} for i in range(5_001)))).encode()
    with pytest.raises(ProviderResponseInvalid) as caught:
        parse_model_list("openai_compatible", "https://x.example/v1", body)
    assert caught.value.details["reason"] == "too_many_models"


@pytest.mark.parametrize(("provider", "base_url", "key", "code"), [
    ("anthropic", "https://api.anthropic.com", KEY, "provider_invalid"),
    ("openai", "http://api.openai.com/v1", KEY, "base_url_invalid"),
    ("openai", "https://api.openai.com/v1?x=1", KEY, "base_url_invalid"),
    ("openai", "https://api.openai.com/v1", "", "api_key_required"),
    ("deepseek", "https://api.deepseek.com", "sk bad", "api_key_invalid"),
    ("deepseek", "https://api.deepseek.com", "sk-\r\nX-Injected: 1", "api_key_invalid"),
])
async def test_bad_input_is_refused_before_any_request(provider, base_url, key, code):
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request may be sent")

    resolver = Resolver([PUBLIC])
    with pytest.raises(ConnectionInputError) as caught:
        await client(handler, resolver).discover(provider, base_url, key)
    assert caught.value.code == code
    assert resolver.calls == []
    if key:
        assert key not in everything_about(caught.value)


def test_the_client_holds_no_key():
    discovery = ModelDiscovery(allow_loopback=True)
    assert "allow_loopback=True" in repr(discovery)
    assert not any("key" in name for name in vars(discovery))
