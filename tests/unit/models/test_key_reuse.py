"""key_for_update: an empty key reuses the stored one only for the same provider and
base URL; the stored key is never sent to an address it was not entered for."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from agentloom.models import KeyReuseRefused, ModelConnectionSpec, key_for_update


@dataclass(frozen=True)
class Edit:
    provider: str
    base_url: str


OLD = ModelConnectionSpec(provider="openai", model_id="gpt-4o", api_key_ref="key-1")


@pytest.mark.parametrize("empty", [None, "", "   "])
def test_an_empty_key_reuses_the_stored_one_for_the_same_endpoint(empty):
    assert key_for_update(OLD, Edit("openai", "https://api.openai.com/v1"), empty).action \
        == "reuse"
    # the same base URL in another spelling is the same address
    assert key_for_update(OLD, Edit("openai", "https://API.openai.com:443/v1/"), empty).action \
        == "reuse"
    # another model at the same endpoint is fine: the key belongs to the endpoint
    edited = OLD.model_copy(update={"model_id": "gpt-4.1"})
    assert key_for_update(OLD, edited, empty).action == "reuse"


@pytest.mark.parametrize("new", [
    Edit("openai", "https://proxy.example.com/v1"),
    Edit("openai", "https://api.openai.com/v2"),
    Edit("openai", "https://api.openai.com:8443/v1"),
    Edit("openai_compatible", "https://api.openai.com/v1"),
    Edit("deepseek", "https://api.deepseek.com"),
])
def test_an_empty_key_is_refused_when_the_provider_or_base_url_changed(new):
    decision = key_for_update(OLD, new, "")
    assert decision.action == "refuse"
    assert decision.code == "key_reuse_refused"
    assert decision.message is not None and "enter the key again" in decision.message
    with pytest.raises(KeyReuseRefused) as caught:
        decision.raise_if_refused()
    assert caught.value.code == "key_reuse_refused"
    assert caught.value.details == {"field": "api_key", "code": "key_reuse_refused"}


def test_a_new_key_is_new_wherever_it_goes():
    assert key_for_update(OLD, Edit("deepseek", "https://api.deepseek.com"), "sk-new").action \
        == "new"
    assert key_for_update(OLD, OLD, "sk-new").raise_if_refused().action == "new"


@pytest.mark.parametrize("bad", ["sk new", "sk-\n", "sk-é", "x" * 5_000])
def test_an_unusable_key_is_refused_without_echoing_it(bad):
    decision = key_for_update(OLD, OLD, bad)
    assert (decision.action, decision.code) == ("refuse", "api_key_invalid")
    assert bad.strip() not in (decision.message or "")


def test_no_stored_key():
    keyless = ModelConnectionSpec(provider="openai_compatible", base_url="http://127.0.0.1:9/v1",
                                  model_id="local")
    assert key_for_update(keyless, keyless, "").action == "reuse"  # stays keyless
    unkeyed = Edit("openai", "https://api.openai.com/v1")

    @dataclass(frozen=True)
    class Stored:
        provider: str = "openai"
        base_url: str = "https://api.openai.com/v1"
        api_key_ref: str | None = None

    decision = key_for_update(Stored(), unkeyed, None)
    assert (decision.action, decision.code) == ("refuse", "api_key_required")


def test_an_invalid_new_endpoint_is_refused():
    decision = key_for_update(OLD, Edit("openai", "ftp://api.openai.com"), "")
    assert (decision.action, decision.code) == ("refuse", "base_url_invalid")
    decision = key_for_update(OLD, Edit("anthropic", "https://api.anthropic.com"), "")
    assert (decision.action, decision.code) == ("refuse", "provider_invalid")
