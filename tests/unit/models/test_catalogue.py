"""The catalogue: exact OpenAI ids at OpenAI's own endpoint, and non-chat families."""

from __future__ import annotations

import re

import pytest

from agentloom.models import (
    CATALOGUE_CHECKED,
    CATALOGUE_VERSION,
    OPENAI_MANIFEST,
    is_official_openai,
    manifest_entry,
    not_chat_reason,
)
from agentloom_runtime.context.estimators import MODELS_CHECKED, OPENAI_MODELS

OFFICIAL = "https://api.openai.com/v1"


def test_the_catalogue_is_versioned_dated_and_linked():
    assert CATALOGUE_VERSION.endswith(CATALOGUE_CHECKED)
    assert re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", CATALOGUE_CHECKED)
    for model_id, entry in OPENAI_MANIFEST.items():
        assert entry.model_id == model_id
        assert entry.source_url.startswith("https://platform.openai.com/docs/models/")
        assert entry.checked == CATALOGUE_CHECKED
        assert 1_024 <= entry.context_window <= 10_000_000
        assert 16 <= entry.max_output_tokens <= entry.context_window


def test_every_catalogued_model_has_a_known_tokenizer_checked_the_same_month():
    assert set(OPENAI_MANIFEST) <= set(OPENAI_MODELS)
    assert CATALOGUE_CHECKED.startswith(MODELS_CHECKED)


@pytest.mark.parametrize(("model_id", "window", "output"), [
    ("gpt-4.1", 1_047_576, 32_768), ("gpt-4o", 128_000, 16_384),
    ("gpt-4o-2024-05-13", 128_000, 4_096), ("gpt-4o-mini", 128_000, 16_384),
    ("gpt-5", 400_000, 128_000), ("o3", 200_000, 100_000), ("gpt-4", 8_192, 8_192),
])
def test_known_figures(model_id, window, output):
    entry = manifest_entry("openai", OFFICIAL, model_id)
    assert entry is not None
    assert (entry.context_window, entry.max_output_tokens) == (window, output)


@pytest.mark.parametrize("model_id", [
    "gpt-4o-mini-custom", "gpt-4o-2099-01-01", "GPT-4o", "gpt-4o ", "ft:gpt-4o-mini:acme",
    "openai/gpt-4o", "gpt-4.1-preview", "o3-mini-high"])
def test_no_prefix_guessing(model_id):
    assert manifest_entry("openai", OFFICIAL, model_id) is None


@pytest.mark.parametrize("base_url", [
    "https://api.openai.com/v1", "https://api.openai.com/v1/", "https://API.openai.com:443/v1"])
def test_official_endpoint_forms(base_url):
    assert is_official_openai("openai", base_url)


@pytest.mark.parametrize(("provider", "base_url"), [
    ("openai", "https://proxy.example.com/v1"),  # a proxy
    ("openai", "http://api.openai.com/v1"),  # not https
    ("openai", "https://api.openai.com:8443/v1"),  # another port
    ("openai", "https://api.openai.com/v2"),  # another path
    ("openai", "https://api.openai.com.evil.example/v1"),  # a look-alike host
    ("openai", "https://user@api.openai.com/v1"),
    ("openai_compatible", "https://api.openai.com/v1"),  # not the openai provider
    ("deepseek", "https://api.openai.com/v1"),
    ("openai", "not a url"),
])
def test_custom_endpoints_never_get_the_manifest(provider, base_url):
    assert not is_official_openai(provider, base_url)
    assert manifest_entry(provider, base_url, "gpt-4o") is None


@pytest.mark.parametrize(("model_id", "kind"), [
    ("text-embedding-3-small", "embeddings"), ("text-embedding-ada-002", "embeddings"),
    ("nomic-embed-text", "embeddings"), ("tts-1", "text-to-speech"),
    ("tts-1-hd", "text-to-speech"), ("gpt-4o-mini-tts", "text-to-speech"),
    ("whisper-1", "speech-to-text"), ("gpt-4o-transcribe", "speech-to-text"),
    ("dall-e-3", "image"), ("gpt-image-1", "image"), ("sora-2", "video"),
    ("omni-moderation-latest", "moderation"), ("text-moderation-007", "moderation"),
    ("gpt-4o-realtime-preview", "realtime"), ("gpt-realtime", "realtime"),
    ("davinci-002", "completions-only"), ("gpt-3.5-turbo-instruct", "completions-only"),
    ("o1-pro", "Responses"), ("o3-pro-2025-06-10", "Responses"),
    ("codex-mini-latest", "Responses"), ("computer-use-preview", "Responses"),
    ("openai/text-embedding-3-large", "embeddings"),  # a proxy's namespaced id
])
def test_models_known_not_to_chat(model_id, kind):
    reason = not_chat_reason(model_id)
    assert reason is not None and kind in reason


@pytest.mark.parametrize("model_id", [
    "gpt-4o", "gpt-4o-mini", "gpt-4.1-nano", "o3", "o1", "gpt-5-chat-latest",
    "gpt-4o-audio-preview", "gpt-4o-search-preview", "deepseek-chat", "deepseek-reasoner",
    "qwen2.5-coder-32b", "llama-3.1-8b-instruct", "embedded-systems-assistant"])
def test_chat_models_are_not_refused(model_id):
    assert not_chat_reason(model_id) is None
