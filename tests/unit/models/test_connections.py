"""ModelConnectionSpec: what an admin saves; errors name the field."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import ValidationError

from agentloom.models import ModelConnectionSpec, resolve_budget

OFFICIAL = "https://api.openai.com/v1"
PROXY = "https://llm-proxy.example.com/v1"


def errors(**fields):
    with pytest.raises(ValidationError) as caught:
        ModelConnectionSpec(**fields)
    return {(e["loc"][0] if e["loc"] else None): e for e in caught.value.errors()}, caught.value


def test_defaults_come_from_the_manifest_at_openai():
    spec = ModelConnectionSpec(provider="openai", model_id="gpt-4o", api_key_ref="key-1")
    assert spec.base_url == OFFICIAL
    assert (spec.context_window, spec.max_output_tokens, spec.safety_margin_tokens) == \
        (128_000, 4_096, 1_024)
    assert spec.provider_max_output_tokens == 16_384
    assert spec.budget_sources.context_window == "official_manifest"
    assert spec.format_version == 1
    assert spec.budget().warnings == ()


def test_deepseek_defaults():
    spec = ModelConnectionSpec(provider="deepseek", model_id="deepseek-chat", api_key_ref="k")
    assert spec.base_url == "https://api.deepseek.com"
    assert spec.budget_sources.context_window == "platform_default"
    assert [w.code for w in spec.budget().warnings] == [
        "platform_default_window", "provider_max_output_unknown"]
    model = spec.to_snapshot_model()
    assert (model.dialect, model.model, model.api_key_ref) == ("deepseek", "deepseek-chat", "k")


def test_a_proxy_spec_gets_the_platform_default_and_never_the_manifest():
    spec = ModelConnectionSpec(provider="openai", base_url=PROXY, model_id="gpt-4o",
                               api_key_ref="k")
    assert spec.context_window == 32_768
    assert spec.budget_sources.context_window == "platform_default"
    by_field, _ = errors(provider="openai", base_url=PROXY, model_id="gpt-4o", api_key_ref="k",
                         context_window=128_000,
                         budget_sources={"context_window": "official_manifest"})
    assert by_field["context_window"]["type"] == "source_mismatch"


def test_given_figures_are_manual():
    spec = ModelConnectionSpec(provider="openai_compatible", base_url="http://10.1.2.3:8000/v1/",
                               model_id="qwen2.5-72b", context_window=131_072,
                               max_output_tokens=8_192)
    assert spec.base_url == "http://10.1.2.3:8000/v1"
    assert spec.budget_sources.context_window == "manual"
    assert spec.budget_sources.max_output_tokens == "manual"
    assert spec.budget_sources.safety_margin_tokens == "platform_default"
    assert spec.budget().context_window.source == "manual"
    assert spec.to_snapshot_model().dialect == "openai"


def test_resolved_fields_make_a_valid_spec_with_the_same_budget():
    listed = {"id": "m", "context_length": 65_536, "max_completion_tokens": 2_048}
    budget = resolve_budget("openai_compatible", PROXY, "m", listed=listed)
    spec = ModelConnectionSpec(provider="openai_compatible", base_url=PROXY, model_id="m",
                               **budget.spec_fields())
    assert spec.budget() == budget
    assert spec.budget_sources.context_window == "provider"
    assert spec.max_output_tokens == 2_048


def test_model_spec_round_trips_through_json():
    spec = ModelConnectionSpec(provider="openai", model_id="gpt-4.1", api_key_ref="k",
                               input_price_per_million=Decimal("2.00"),
                               output_price_per_million=Decimal("8"))
    again = ModelConnectionSpec.model_validate_json(spec.model_dump_json())
    assert again == spec
    assert again.output_price_per_million == Decimal(8)


@pytest.mark.parametrize("model_id", ["text-embedding-3-small", "whisper-1", "tts-1",
                                      "dall-e-3", "omni-moderation-latest",
                                      "gpt-4o-realtime-preview"])
def test_non_chat_models_cannot_be_selected(model_id):
    by_field, exc = errors(provider="openai", model_id=model_id, api_key_ref="k")
    assert set(by_field) == {"model_id"}
    assert by_field["model_id"]["type"] == "model_not_chat_capable"
    assert "does not support Chat Completions" in str(exc)


def test_max_output_never_above_a_known_maximum():
    by_field, _ = errors(provider="openai", model_id="gpt-4o", api_key_ref="k",
                         max_output_tokens=20_000)
    assert by_field["max_output_tokens"]["type"] == "max_output_above_provider_max"
    by_field, _ = errors(provider="openai_compatible", base_url=PROXY, model_id="m",
                         provider_max_output_tokens=1_000, max_output_tokens=2_000)
    assert by_field["max_output_tokens"]["type"] == "max_output_above_provider_max"
    # the manifest's maximum applies whatever the saved provider maximum says
    by_field, _ = errors(provider="openai", model_id="gpt-4o-2024-05-13", api_key_ref="k",
                         provider_max_output_tokens=100_000, max_output_tokens=8_000)
    assert by_field["max_output_tokens"]["type"] == "max_output_above_provider_max"


@pytest.mark.parametrize(("fields", "field", "kind"), [
    ({"provider": "anthropic"}, "provider", "literal_error"),
    ({"base_url": "ftp://x"}, "base_url", "base_url_invalid"),
    ({"base_url": "https://u:p@proxy.example/v1"}, "base_url", "base_url_invalid"),
    ({"base_url": "https://proxy.example/v1?k=1"}, "base_url", "base_url_invalid"),
    ({"base_url": "https://exa mple.com/v1"}, "base_url", "base_url_invalid"),
    ({"model_id": ""}, "model_id", "string_pattern_mismatch"),
    ({"model_id": "gpt 4o"}, "model_id", "string_pattern_mismatch"),
    ({"context_window": 100}, "context_window", "greater_than_equal"),
    ({"context_window": True}, "context_window", "int_type"),
    ({"max_output_tokens": "4096"}, "max_output_tokens", "int_type"),
    ({"max_output_tokens": 0}, "max_output_tokens", "greater_than_equal"),
    ({"safety_margin_tokens": -1}, "safety_margin_tokens", "greater_than_equal"),
    ({"context_window": 8_192, "max_output_tokens": 4_096, "safety_margin_tokens": 4_096},
     "safety_margin_tokens", "no_input_budget"),
    ({"input_price_per_million": -1}, "input_price_per_million", "greater_than_equal"),
    ({"output_price_per_million": "1.0000001"}, "output_price_per_million",
     "decimal_max_places"),
    ({"price_currency": "usd"}, "price_currency", "string_pattern_mismatch"),
    ({"api_key_ref": "sk-live-abc"}, "api_key_ref", "key_in_reference"),
    ({"api_key_ref": "has space"}, "api_key_ref", "string_pattern_mismatch"),
    ({"budget_sources": {"context_window": "guess"}}, "budget_sources", "literal_error"),
    ({"format_version": 2}, "format_version", "literal_error"),
])
def test_errors_name_the_field(fields, field, kind):
    base = {"provider": "openai_compatible", "base_url": PROXY, "model_id": "m"}
    by_field, _ = errors(**{**base, **fields})
    assert field in by_field, by_field
    assert by_field[field]["type"] == kind


def test_a_keyed_provider_needs_a_key_reference():
    by_field, _ = errors(provider="openai", model_id="gpt-4o")
    assert by_field["api_key_ref"]["type"] == "api_key_required"
    keyless = ModelConnectionSpec(provider="openai_compatible", base_url="http://127.0.0.1:1/v1",
                                  model_id="local")
    assert keyless.api_key_ref is None


def test_openai_and_deepseek_need_https():
    by_field, _ = errors(provider="deepseek", base_url="http://api.deepseek.com",
                         model_id="deepseek-chat", api_key_ref="k")
    assert by_field["base_url"]["type"] == "base_url_invalid"


def test_a_key_is_never_a_field_and_never_echoed():
    key = "sk-proj-SECRET-VALUE-123"
    by_field, exc = errors(provider="openai", model_id="gpt-4o", api_key_ref="k", api_key=key)
    assert by_field["api_key"]["type"] == "extra_forbidden"
    assert key not in str(exc) and key not in repr(exc)
    spec = ModelConnectionSpec(provider="openai", model_id="gpt-4o", api_key_ref="key-7")
    assert "api_key" not in {name for name in spec.model_dump() if name != "api_key_ref"}


def test_a_record_saved_under_an_older_catalogue_still_loads_as_stored():
    saved = ModelConnectionSpec(provider="openai", model_id="gpt-4o", api_key_ref="k")
    record = saved.model_dump(mode="json")
    record["context_window"] = 120_000  # what an older catalogue said
    record["provider_max_output_tokens"] = 4_096
    by_field, _ = errors(**record)  # a new save with these figures is refused
    assert by_field["context_window"]["type"] == "source_mismatch"
    loaded = ModelConnectionSpec.model_validate(record, context={"stored": True})
    budget = loaded.budget()
    assert budget.context_window.value == 120_000
    assert budget.context_window.source == "official_manifest"
    assert budget.context_window.note == "saved; the current rules give another value"
    assert budget.max_output_tokens.value == 4_096
    assert budget.max_output_tokens.note is None  # unchanged figures keep their details
    # the consistency of the record itself is still checked
    record["safety_margin_tokens"] = 200_000
    with pytest.raises(ValidationError):
        ModelConnectionSpec.model_validate(record, context={"stored": True})


def test_a_stored_model_refused_by_newer_rules_still_loads():
    record = {"provider": "openai_compatible", "base_url": PROXY, "model_id": "m-realtime",
              "context_window": 32_768, "max_output_tokens": 4_096,
              "safety_margin_tokens": 1_024}
    errors(**record)
    loaded = ModelConnectionSpec.model_validate(record, context={"stored": True})
    assert loaded.budget().context_window.value == 32_768
