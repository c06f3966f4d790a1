"""A model connection as an admin saves it, and the rule for reusing its key.

``ModelConnectionSpec`` holds where the model is (provider, base URL, exact model id),
its budget figures with their sources (``budget.py``), optional prices, the embedding
request settings of knowledge bases on it (``EmbeddingSettings``) and the key as a
*reference* (``api_key_ref``: the id of the encrypted secret the service stores). No
field holds a key and extra fields are refused, so a key cannot ride along by mistake.

Figures left out are resolved (``resolve_budget``: manifest or platform default); figures
given without a source are ``manual``. A store loads saved records with
``ModelConnectionSpec.model_validate(data, context={"stored": True})``: that skips the
checks tied to the current catalogue and model families (a newer catalogue must not make
an old record unreadable) and keeps the rest. Validation errors name the field (pydantic
``loc``) and carry a stable ``type`` for the custom checks: ``model_not_chat_capable``,
``base_url_invalid``, ``max_output_above_provider_max``, ``no_input_budget``,
``source_mismatch``, ``key_in_reference``.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal, Protocol

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from agentloom_runtime.snapshot import ModelConnection

from ._urls import DEFAULT_BASE_URLS, Provider, check_provider, normalize_base_url
from .budget import (
    CONTEXT_RANGE,
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_MAX_OUTPUT_TOKENS,
    DEFAULT_SAFETY_MARGIN_TOKENS,
    OUTPUT_RANGE,
    SAFETY_RANGE,
    BudgetOverrides,
    ResolvedBudget,
    Source,
    Sourced,
    resolve_budget,
)
from .catalogue import manifest_entry, not_chat_message, not_chat_reason
from .errors import ConnectionInputError, KeyReuseRefused, ModelNotChatCapable, ModelsError

FORMAT_VERSION: Literal[1] = 1
BUDGET_FIELDS = ("context_window", "max_output_tokens", "safety_margin_tokens",
                 "provider_max_output_tokens")
_MODEL_ID = r"^[^\s\x00-\x1f\x7f]{1,200}$"
_REF = r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,199}$"
_KEY_LIKE = ("sk-", "Bearer ")
Price = Annotated[Decimal, Field(ge=0, le=1_000_000, max_digits=16, decimal_places=6)]


class EmbeddingSettings(BaseModel):
    """How knowledge bases on this connection send embedding requests
    (``agentloom.knowledge.embeddings``): at most ``max_batch`` texts per request (fewer
    when the endpoint is slow: batches adapt below it), each request answered within
    ``timeout_seconds`` (a slow local embedder needs more)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_batch: int = Field(default=64, strict=True, ge=1, le=256)
    timeout_seconds: float = Field(default=30.0, ge=1, le=600)


class BudgetSources(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    context_window: Source = "platform_default"
    max_output_tokens: Literal["platform_default", "manual"] = "platform_default"
    safety_margin_tokens: Literal["platform_default", "manual"] = "platform_default"
    provider_max_output_tokens: Literal["provider", "official_manifest", "manual"] | None \
        = None


def _error(kind: str, message: str) -> PydanticCustomError:
    return PydanticCustomError(kind, message)


class ModelConnectionSpec(BaseModel):
    """What an admin saves (format 1). Declared in dependency order: each check reads
    only the fields above it (``info.data`` holds those that passed)."""

    # a value typed into the wrong field (a key in ``api_key``) must not reach a log
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    format_version: Literal[1] = FORMAT_VERSION
    provider: Provider
    # Defaults below are what ``_fill`` puts in when a value is missing (a provider's
    # own base URL, resolved figures); they are validated like given values.
    base_url: str = Field(default="", validate_default=True)
    model_id: str = Field(pattern=_MODEL_ID)
    budget_sources: BudgetSources = BudgetSources()
    # strict: a boolean or a numeric string is refused rather than coerced
    context_window: int = Field(default=DEFAULT_CONTEXT_WINDOW, validate_default=True,
                                strict=True, ge=CONTEXT_RANGE[0], le=CONTEXT_RANGE[1])
    provider_max_output_tokens: int | None = Field(default=None, strict=True,
                                                   ge=OUTPUT_RANGE[0], le=OUTPUT_RANGE[1])
    max_output_tokens: int = Field(default=DEFAULT_MAX_OUTPUT_TOKENS, validate_default=True,
                                   strict=True, ge=OUTPUT_RANGE[0], le=OUTPUT_RANGE[1])
    safety_margin_tokens: int = Field(default=DEFAULT_SAFETY_MARGIN_TOKENS,
                                      validate_default=True, strict=True,
                                      ge=SAFETY_RANGE[0], le=SAFETY_RANGE[1])
    input_price_per_million: Price | None = None
    output_price_per_million: Price | None = None
    price_currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    api_key_ref: str | None = Field(
        default=None, pattern=_REF, validate_default=True, description="Id of the stored, "
        "encrypted key; never the key. None: a keyless openai_compatible server.")
    embedding: EmbeddingSettings = Field(
        default_factory=EmbeddingSettings, description="Embedding requests of the "
        "knowledge bases on this connection: max_batch (1-256, default 64) and "
        "timeout_seconds per request (1-600, default 30).")

    # -------------------------------------------------------------- defaults

    @model_validator(mode="before")
    @classmethod
    def _fill(cls, data: Any) -> Any:
        """Missing base URL: the provider's own. Missing figures: resolved from the
        manifest or the platform default. Given figures without a source: manual."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        provider = data.get("provider")
        if not data.get("base_url") and isinstance(provider, str) \
                and provider in DEFAULT_BASE_URLS:
            data["base_url"] = DEFAULT_BASE_URLS[provider]
        raw = data.get("budget_sources")
        if isinstance(raw, BudgetSources):
            raw = raw.model_dump()
        sources = dict(raw) if isinstance(raw, dict) else {}
        given = {f: data[f] for f in BUDGET_FIELDS if data.get(f) is not None}
        for name in given:
            sources.setdefault(name, "manual")
        missing = [f for f in BUDGET_FIELDS if f not in data]
        if missing:
            fields = _resolve_quietly(data, given)
            for name in missing:
                data[name] = fields[name]
                if fields["budget_sources"][name] is not None:
                    sources.setdefault(name, fields["budget_sources"][name])
        if raw is None or isinstance(raw, dict):
            data["budget_sources"] = sources
        return data

    # -------------------------------------------------------------- field checks

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str, info: ValidationInfo) -> str:
        try:
            return normalize_base_url(value, info.data.get("provider", "openai_compatible"))
        except ConnectionInputError as exc:
            raise _error("base_url_invalid", exc.message) from None

    @field_validator("model_id")
    @classmethod
    def _chat_model(cls, value: str, info: ValidationInfo) -> str:
        reason = not_chat_reason(value) if _policy(info) else None
        if reason is not None:
            raise _error("model_not_chat_capable", not_chat_message(value, reason))
        return value

    @field_validator("context_window")
    @classmethod
    def _window_source(cls, value: int, info: ValidationInfo) -> int:
        sources = info.data.get("budget_sources")
        source = sources.context_window if isinstance(sources, BudgetSources) else None
        if source == "official_manifest" and _policy(info):
            entry = _entry(info)
            if entry is None:
                raise _error("source_mismatch", "context_window: the official manifest "
                             "applies only to an exact catalogue id at OpenAI's own "
                             "endpoint; mark this value manual")
            if value != entry.context_window:
                raise _error("source_mismatch", f"context_window: the official manifest "
                             f"gives {entry.context_window:,}; mark other values manual")
        if source == "platform_default" and value != DEFAULT_CONTEXT_WINDOW:
            raise _error("source_mismatch", f"context_window: the platform default is "
                         f"{DEFAULT_CONTEXT_WINDOW:,}; mark other values manual")
        return value

    @field_validator("provider_max_output_tokens")
    @classmethod
    def _limit_source(cls, value: int | None, info: ValidationInfo) -> int | None:
        sources = info.data.get("budget_sources")
        if value is not None and isinstance(sources, BudgetSources) and _policy(info) \
                and sources.provider_max_output_tokens == "official_manifest":
            entry = _entry(info)
            if entry is None or entry.max_output_tokens != value:
                raise _error("source_mismatch", "provider_max_output_tokens does not match "
                             "the official manifest for this model and endpoint")
        return value

    @field_validator("max_output_tokens")
    @classmethod
    def _max_output(cls, value: int, info: ValidationInfo) -> int:
        limits = [info.data.get("provider_max_output_tokens")]
        entry = _entry(info) if _policy(info) else None
        if entry is not None:
            limits.append(entry.max_output_tokens)
        known = [limit for limit in limits if isinstance(limit, int)]
        if known and value > min(known):
            raise _error("max_output_above_provider_max", f"max_output_tokens {value:,} is "
                         f"above the provider's maximum output of {min(known):,}")
        return value

    @field_validator("safety_margin_tokens")
    @classmethod
    def _input_budget(cls, value: int, info: ValidationInfo) -> int:
        window, output = info.data.get("context_window"), info.data.get("max_output_tokens")
        if isinstance(window, int) and isinstance(output, int) and window - output - value <= 0:
            raise _error("no_input_budget", "context_window must exceed max_output_tokens + "
                         "safety_margin_tokens: no input budget is left")
        return value

    @field_validator("api_key_ref")
    @classmethod
    def _reference(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and value.startswith(_KEY_LIKE):
            raise _error("key_in_reference", "api_key_ref must name a stored secret, "
                         "not hold the key")
        provider = info.data.get("provider")
        if value is None and provider in DEFAULT_BASE_URLS:
            raise _error("api_key_required", f"provider {provider} needs a stored key")
        return value

    # -------------------------------------------------------------- views

    def budget(self) -> ResolvedBudget:
        """The saved figures with their sources, links and warnings. The current rules
        are run again (``resolve_budget``) for the links and warnings; a saved figure the
        current catalogue would not give (a record older than ``CATALOGUE_VERSION``)
        is still the figure shown, with a note."""
        sources = self.budget_sources
        listed: dict[str, int] = {}
        if sources.context_window == "provider":
            listed["context_window"] = self.context_window
        if sources.provider_max_output_tokens == "provider" \
                and self.provider_max_output_tokens is not None:
            listed["max_output_tokens"] = self.provider_max_output_tokens
        manual = BudgetOverrides(**{
            name: getattr(self, name) for name in BUDGET_FIELDS
            if getattr(sources, name) == "manual"})
        try:
            now: ResolvedBudget | None = resolve_budget(
                self.provider, self.base_url, self.model_id, listed=listed, overrides=manual)
        except ModelNotChatCapable:  # a stored record the current rules refuse
            now = None
        figures: dict[str, Sourced | None] = {}
        for name in BUDGET_FIELDS:
            saved, source = getattr(self, name), getattr(sources, name)
            current = None if now is None else getattr(now, name)
            if saved is None or source is None:
                figures[name] = None
            elif current is not None and (current.value, current.source) == (saved, source):
                figures[name] = current
            else:
                figures[name] = Sourced(value=saved, source=source,
                                        note="saved; the current rules give another value")
        return ResolvedBudget(
            context_window=_present(figures["context_window"]),
            max_output_tokens=_present(figures["max_output_tokens"]),
            safety_margin_tokens=_present(figures["safety_margin_tokens"]),
            provider_max_output_tokens=figures["provider_max_output_tokens"],
            warnings=() if now is None else now.warnings)

    def to_snapshot_model(self, **options: Any) -> ModelConnection:
        """The runtime's ``ModelConnection`` for a published snapshot (``options``:
        ``temperature``, ``timeout_seconds``, ``estimator``)."""
        return ModelConnection(
            dialect="deepseek" if self.provider == "deepseek" else "openai",
            base_url=self.base_url, model=self.model_id, api_key_ref=self.api_key_ref,
            context_window=self.context_window, max_output_tokens=self.max_output_tokens,
            safety_margin_tokens=self.safety_margin_tokens,
            input_price_per_million=_price(self.input_price_per_million),
            output_price_per_million=_price(self.output_price_per_million), **options)


def _price(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def _present(figure: Sourced | None) -> Sourced:
    assert figure is not None  # the three budget figures always have a value and source
    return figure


def _policy(info: ValidationInfo) -> bool:
    """False when loading a stored record (``context={"stored": True}``): the checks
    that depend on the current catalogue and model families are for new saves, so a
    record saved under an older catalogue still loads."""
    return not (isinstance(info.context, dict) and info.context.get("stored"))


def _entry(info: ValidationInfo) -> Any:
    provider, base_url = info.data.get("provider"), info.data.get("base_url")
    model_id = info.data.get("model_id")
    if not (isinstance(provider, str) and isinstance(base_url, str)
            and isinstance(model_id, str)):
        return None
    return manifest_entry(provider, base_url, model_id)


_FALLBACK = ResolvedBudget(
    context_window=Sourced(value=DEFAULT_CONTEXT_WINDOW, source="platform_default"),
    max_output_tokens=Sourced(value=DEFAULT_MAX_OUTPUT_TOKENS, source="platform_default"),
    safety_margin_tokens=Sourced(value=DEFAULT_SAFETY_MARGIN_TOKENS,
                                 source="platform_default"),
    provider_max_output_tokens=None).spec_fields()


def _resolve_quietly(data: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """Spec fields for the missing figures; the platform defaults when the input is too
    broken to resolve (the field checks then report only what is wrong)."""
    provider, base_url, model_id = (data.get(k) for k in ("provider", "base_url", "model_id"))
    if not (isinstance(provider, str) and isinstance(base_url, str)
            and isinstance(model_id, str)):
        return _FALLBACK
    try:
        overrides = BudgetOverrides(**{k: v for k, v in given.items() if isinstance(v, int)})
        return resolve_budget(provider, base_url, model_id, overrides=overrides).spec_fields()
    except (ModelsError, ValueError):
        return _FALLBACK


# ------------------------------------------------------------------ key reuse


class Endpoint(Protocol):
    @property
    def provider(self) -> str: ...

    @property
    def base_url(self) -> str: ...


class StoredEndpoint(Endpoint, Protocol):
    @property
    def api_key_ref(self) -> str | None: ...


@dataclass(frozen=True)
class KeyDecision:
    """``reuse``: keep ``old.api_key_ref``; ``new``: store the key given; ``refuse``:
    ``code`` and ``message`` say why (``raise_if_refused`` raises ``KeyReuseRefused``)."""

    action: Literal["reuse", "new", "refuse"]
    code: str | None = None
    message: str | None = None

    def raise_if_refused(self) -> KeyDecision:
        if self.action == "refuse":
            raise KeyReuseRefused(self.message or "the key cannot be used", field="api_key",
                                  code=self.code)
        return self


def _usable_key(key: str) -> bool:
    return key.isascii() and key.isprintable() and " " not in key and len(key) <= 4_096


def key_for_update(old: StoredEndpoint, new: Endpoint, new_key: str | None) -> KeyDecision:
    """Which key an edited connection (or a discovery with ``resource_id``) uses.

    A key given is new. An empty key reuses the stored one only when the provider and
    the base URL (in normal form) are both unchanged — a stored key is never sent to an
    address it was not entered for."""
    if new_key is not None and new_key.strip():
        if not _usable_key(new_key):
            return KeyDecision("refuse", "api_key_invalid",
                               "api_key must be printable ASCII without spaces")
        return KeyDecision("new")
    try:
        old_provider, new_provider = check_provider(old.provider), check_provider(new.provider)
        same = old_provider == new_provider and (
            normalize_base_url(old.base_url, old_provider)
            == normalize_base_url(new.base_url, new_provider))
    except ConnectionInputError as exc:
        return KeyDecision("refuse", exc.code, exc.message)
    if not same:
        return KeyDecision("refuse", "key_reuse_refused",
                           "the provider or base URL changed, so the stored key is not "
                           "reused for the new address: enter the key again")
    if old.api_key_ref is None and new_provider != "openai_compatible":
        return KeyDecision("refuse", "api_key_required",
                           f"no key is stored for this connection; provider {new_provider} "
                           "needs one")
    return KeyDecision("reuse")
