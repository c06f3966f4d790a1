"""The model catalogue: a versioned, dated manifest of exact OpenAI model ids, and the
models known not to serve Chat Completions.

OpenAI's ``GET /v1/models`` returns ids without window sizes, so the platform keeps the
figures from each model's page on platform.openai.com. Rules:

- exact ids only: ``gpt-4o-mini`` is listed, ``gpt-4o-mini-custom`` is not — a fine-tune
  or a proxy alias may have any window, so nothing is matched by prefix;
- only at OpenAI's own endpoint (``https://api.openai.com/v1``, provider ``openai``): a
  custom base URL (a proxy, a gateway, a self-hosted server) may serve anything under a
  familiar name, so it never gets these figures;
- dated and versioned: ``CATALOGUE_VERSION`` changes whenever an entry is added or a
  figure changes, and every entry names the page it was read from.

The manifest's ids are a subset of the token estimator's table
(``agentloom_runtime.context.estimators.OPENAI_MODELS``, checked the same month), so a
model with a known window also has a known tokenizer.

Non-chat models (embeddings, speech, transcription, images, moderation, realtime-only,
legacy completions-only and Responses-only models) are recognised by family: these are
refusals of what is known not to work, not a claim that every other id does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

CATALOGUE_VERSION = "openai-models/2025-08"
CATALOGUE_CHECKED = "2025-08"
OPENAI_BASE_URL = "https://api.openai.com/v1"
DEEPSEEK_BASE_URL = "https://api.deepseek.com"
_DOCS = "https://platform.openai.com/docs/models/"


@dataclass(frozen=True)
class ManifestEntry:
    """The figures OpenAI publishes for one exact model id."""

    model_id: str
    context_window: int
    max_output_tokens: int
    source_url: str
    checked: str = CATALOGUE_CHECKED


def _family(page: str, context_window: int, max_output_tokens: int,
            *ids: str) -> dict[str, ManifestEntry]:
    return {i: ManifestEntry(i, context_window, max_output_tokens, _DOCS + page) for i in ids}


OPENAI_MANIFEST: Mapping[str, ManifestEntry] = {
    **_family("gpt-4.1", 1_047_576, 32_768, "gpt-4.1", "gpt-4.1-2025-04-14"),
    **_family("gpt-4.1-mini", 1_047_576, 32_768, "gpt-4.1-mini", "gpt-4.1-mini-2025-04-14"),
    **_family("gpt-4.1-nano", 1_047_576, 32_768, "gpt-4.1-nano", "gpt-4.1-nano-2025-04-14"),
    **_family("gpt-4o", 128_000, 16_384, "gpt-4o", "gpt-4o-2024-08-06",
              "gpt-4o-2024-11-20"),
    **_family("gpt-4o", 128_000, 4_096, "gpt-4o-2024-05-13"),
    **_family("gpt-4o-mini", 128_000, 16_384, "gpt-4o-mini", "gpt-4o-mini-2024-07-18"),
    **_family("chatgpt-4o-latest", 128_000, 16_384, "chatgpt-4o-latest"),
    **_family("gpt-5", 400_000, 128_000, "gpt-5", "gpt-5-2025-08-07"),
    **_family("gpt-5-mini", 400_000, 128_000, "gpt-5-mini", "gpt-5-mini-2025-08-07"),
    **_family("gpt-5-nano", 400_000, 128_000, "gpt-5-nano", "gpt-5-nano-2025-08-07"),
    **_family("gpt-5-chat-latest", 128_000, 16_384, "gpt-5-chat-latest"),
    **_family("o1", 200_000, 100_000, "o1", "o1-2024-12-17"),
    **_family("o3", 200_000, 100_000, "o3", "o3-2025-04-16"),
    **_family("o3-mini", 200_000, 100_000, "o3-mini", "o3-mini-2025-01-31"),
    **_family("o4-mini", 200_000, 100_000, "o4-mini", "o4-mini-2025-04-16"),
    **_family("gpt-4-turbo", 128_000, 4_096, "gpt-4-turbo", "gpt-4-turbo-2024-04-09"),
    **_family("gpt-4", 8_192, 8_192, "gpt-4", "gpt-4-0613"),
    **_family("gpt-3.5-turbo", 16_385, 4_096, "gpt-3.5-turbo", "gpt-3.5-turbo-0125",
              "gpt-3.5-turbo-1106"),
}


def is_official_openai(provider: str, base_url: str) -> bool:
    """True only for provider ``openai`` at ``https://api.openai.com/v1`` (default port,
    any trailing slash): the one endpoint the manifest describes."""
    if provider != "openai":
        return False
    import httpx  # its URL parser, on first use: the api and trigger never load httpx

    try:
        url = httpx.URL(base_url)
    except (TypeError, httpx.InvalidURL):
        return False
    return (url.scheme == "https" and url.host == "api.openai.com" and url.port is None
            and not url.userinfo and not url.query and not url.fragment
            and url.path.rstrip("/") == "/v1")


def manifest_entry(provider: str, base_url: str, model_id: str) -> ManifestEntry | None:
    """The manifest's figures for this exact id at OpenAI's own endpoint, else None."""
    if not is_official_openai(provider, base_url):
        return None
    return OPENAI_MANIFEST.get(model_id)


# ------------------------------------------------------------------ non-chat models

_DATED = r"(-\d{4}-\d{2}-\d{2})?"
# (pattern on the lower-cased last path segment of the id, what the model is)
_NOT_CHAT: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), kind) for pattern, kind in (
        (r"(^|[-_.])embed(ding|dings)?([-_.]|$)", "an embeddings model"),
        (r"(^|[-_.])tts([-_.]|$)", "a text-to-speech model"),
        (r"^whisper([-_.]|$)", "a speech-to-text model"),
        (r"(^|[-_.])transcribe([-_.]|$)", "a speech-to-text model"),
        (r"^dall-e([-_.]|$)", "an image generation model"),
        (r"^gpt-image([-_.]|$)", "an image generation model"),
        (r"^sora([-_.]|$)", "a video generation model"),
        (r"(^|[-_.])moderation([-_.]|$)", "a moderation model"),
        (r"(^|[-_.])realtime([-_.]|$)", "a realtime-only model"),
        (r"^(babbage|davinci)-002$", "a legacy completions-only model"),
        (r"^gpt-3\.5-turbo-instruct(-\d{4})?$", "a legacy completions-only model"),
        (rf"^(o1-pro|o3-pro|o3-deep-research|o4-mini-deep-research){_DATED}$",
         "a Responses-API-only model"),
        (r"^(codex-mini-latest|computer-use-preview(-\d{4}-\d{2}-\d{2})?)$",
         "a Responses-API-only model"),
    ))


def not_chat_reason(model_id: str) -> str | None:
    """Why ``model_id`` cannot serve Chat Completions, or None when nothing is known
    against it (which does not prove that it can: a test call still has to)."""
    name = model_id.rsplit("/", 1)[-1].lower()
    for pattern, kind in _NOT_CHAT:
        if pattern.search(name):
            return kind
    return None


def not_chat_message(model_id: str, reason: str) -> str:
    return f"model {model_id!r} is {reason}; it does not support Chat Completions " \
           f"and cannot be selected as a chat model"
