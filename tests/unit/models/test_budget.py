"""resolve_budget: each figure with its source and the warnings an admin sees."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentloom.models import (
    DEFAULT_CONTEXT_WINDOW,
    BudgetOverrides,
    ModelNotChatCapable,
    resolve_budget,
)

OFFICIAL = "https://api.openai.com/v1"
PROXY = "https://llm-proxy.example.com/v1"
DEEPSEEK = "https://api.deepseek.com"


def codes(budget):
    return [w.code for w in budget.warnings]


def test_official_manifest_for_an_exact_id_at_openai():
    budget = resolve_budget("openai", OFFICIAL, "gpt-4.1")
    assert budget.context_window.value == 1_047_576
    assert budget.context_window.source == "official_manifest"
    assert budget.context_window.reference == "https://platform.openai.com/docs/models/gpt-4.1"
    assert budget.context_window.checked
    assert budget.provider_max_output_tokens is not None
    assert budget.provider_max_output_tokens.value == 32_768
    assert budget.provider_max_output_tokens.source == "official_manifest"
    assert budget.max_output_tokens.value == 4_096
    assert budget.max_output_tokens.source == "platform_default"
    assert budget.safety_margin_tokens.value == 1_024
    assert budget.warnings == ()
    assert budget.effective_input_budget == 1_047_576 - 4_096 - 1_024


def test_a_look_alike_id_gets_the_platform_default_with_a_warning():
    budget = resolve_budget("openai", OFFICIAL, "gpt-4o-mini-custom")
    assert budget.context_window.value == DEFAULT_CONTEXT_WINDOW == 32_768
    assert budget.context_window.source == "platform_default"
    assert "platform_default_window" in codes(budget)
    warning = next(w for w in budget.warnings if w.code == "platform_default_window")
    assert warning.field == "context_window" and "32,768" in warning.message
    assert budget.provider_max_output_tokens is None


@pytest.mark.parametrize(("provider", "base_url"), [
    ("openai", PROXY), ("openai_compatible", PROXY), ("openai_compatible", OFFICIAL),
    ("openai", "https://api.openai.com:8443/v1")])
def test_a_proxy_never_gets_the_official_manifest(provider, base_url):
    budget = resolve_budget(provider, base_url, "gpt-4o")
    assert budget.context_window.source == "platform_default"
    assert budget.context_window.value == 32_768
    assert codes(budget)[:2] == ["official_manifest_not_applied", "platform_default_window"]


def test_provider_fields_win_over_the_manifest_and_default():
    listed = {"id": "deepseek-chat", "object": "model", "context_window": 131_072,
              "max_output_tokens": 8_192}
    budget = resolve_budget("deepseek", DEEPSEEK, "deepseek-chat", listed=listed)
    assert (budget.context_window.value, budget.context_window.source) == (131_072, "provider")
    assert budget.context_window.reference == "GET /models"
    assert budget.provider_max_output_tokens is not None
    assert budget.provider_max_output_tokens.source == "provider"
    assert budget.max_output_tokens.value == 4_096
    assert budget.warnings == ()
    official = resolve_budget("openai", OFFICIAL, "gpt-4o", listed={"context_length": 64_000})
    assert (official.context_window.value, official.context_window.source) == \
        (64_000, "provider")
    assert official.provider_max_output_tokens is not None
    assert official.provider_max_output_tokens.source == "official_manifest"


def test_deepseek_without_list_fields_falls_back():
    listed = {"id": "deepseek-chat", "object": "model", "owned_by": "deepseek"}
    budget = resolve_budget("deepseek", DEEPSEEK, "deepseek-chat", listed=listed)
    assert budget.context_window.source == "platform_default"
    assert "platform_default_window" in codes(budget)


@pytest.mark.parametrize("value", ["131072", 1.5e5, True, -1, 10, 10**12, [1]])
def test_unusable_provider_fields_are_ignored_without_echoing_them(value):
    budget = resolve_budget("openai_compatible", PROXY, "m", listed={"context_window": value})
    assert budget.context_window.source == "platform_default"
    warning = next(w for w in budget.warnings if w.code == "provider_field_invalid")
    assert warning.message == \
        "the provider's 'context_window' is not an integer in 1,024–10,000,000; it is ignored"


def test_vllm_max_model_len_is_read():
    budget = resolve_budget("openai_compatible", "http://10.0.0.5:8000/v1", "qwen",
                            listed={"max_model_len": 65_536})
    assert (budget.context_window.value, budget.context_window.source) == (65_536, "provider")


def test_manual_overrides_win_and_are_labelled():
    overrides = BudgetOverrides(context_window=100_000, max_output_tokens=8_000,
                                safety_margin_tokens=2_000)
    budget = resolve_budget("openai", OFFICIAL, "gpt-4o", overrides=overrides)
    assert (budget.context_window.value, budget.context_window.source) == (100_000, "manual")
    assert (budget.max_output_tokens.value, budget.max_output_tokens.source) == (8_000, "manual")
    assert budget.safety_margin_tokens.source == "manual"
    assert budget.warnings == ()


def test_a_manual_window_above_the_known_one_is_warned():
    budget = resolve_budget("openai", OFFICIAL, "gpt-4o",
                            overrides=BudgetOverrides(context_window=200_000))
    assert budget.context_window.value == 200_000
    assert codes(budget) == ["manual_above_known"]


def test_max_output_starts_at_4096_and_is_clamped_to_the_known_maximum():
    small = resolve_budget("openai_compatible", PROXY, "m",
                           listed={"context_window": 16_000, "max_output_tokens": 2_048})
    assert small.max_output_tokens.value == 2_048
    assert small.max_output_tokens.source == "platform_default"
    assert small.max_output_tokens.note == "the provider's maximum output"
    manual = resolve_budget("openai", OFFICIAL, "gpt-4o-2024-05-13",
                            overrides=BudgetOverrides(max_output_tokens=16_000))
    assert manual.max_output_tokens.value == 4_096  # the catalogue's maximum for this id
    assert manual.max_output_tokens.source == "manual"
    assert codes(manual) == ["max_output_clamped"]
    limited = resolve_budget("openai_compatible", PROXY, "m", overrides=BudgetOverrides(
        provider_max_output_tokens=1_000, max_output_tokens=3_000))
    assert limited.max_output_tokens.value == 1_000
    assert limited.provider_max_output_tokens is not None
    assert limited.provider_max_output_tokens.source == "manual"


def test_an_unknown_maximum_output_is_said():
    budget = resolve_budget("openai_compatible", PROXY, "m", listed={"context_window": 50_000})
    assert codes(budget) == ["provider_max_output_unknown"]


def test_a_small_window_keeps_half_for_input():
    budget = resolve_budget("openai_compatible", PROXY, "tiny",
                            listed={"context_window": 4_096, "max_output_tokens": 4_096})
    assert budget.max_output_tokens.value == (4_096 - 1_024) // 2
    assert budget.effective_input_budget > 0
    assert "no_input_budget" not in codes(budget)


def test_no_input_budget_is_warned_for_manual_figures():
    budget = resolve_budget("openai_compatible", PROXY, "m", overrides=BudgetOverrides(
        context_window=8_192, max_output_tokens=8_000))
    assert codes(budget)[-1] == "no_input_budget"


def test_non_chat_models_cannot_be_resolved():
    with pytest.raises(ModelNotChatCapable) as caught:
        resolve_budget("openai", OFFICIAL, "text-embedding-3-large")
    assert caught.value.code == "model_not_chat_capable"
    assert caught.value.details == {"field": "model_id", "reason": "an embeddings model"}


def test_overrides_name_their_field():
    with pytest.raises(ValidationError) as caught:
        BudgetOverrides(context_window=10)
    assert caught.value.errors()[0]["loc"] == ("context_window",)


def test_spec_fields_round_trip():
    budget = resolve_budget("openai", OFFICIAL, "gpt-4o")
    fields = budget.spec_fields()
    assert fields["budget_sources"] == {
        "context_window": "official_manifest", "max_output_tokens": "platform_default",
        "safety_margin_tokens": "platform_default",
        "provider_max_output_tokens": "official_manifest"}
    assert fields["context_window"] == 128_000
    assert fields["provider_max_output_tokens"] == 16_384
