"""Window metadata by source: where each budget figure of a connection comes from.

Sources, strongest first:

==================  =======================================================================
``manual``          an admin's override (advanced settings); shown as such
``provider``        a field of the provider's own ``GET /models`` entry for this model
``official_manifest`` the dated catalogue of exact OpenAI ids (``catalogue.py``), only at
                    OpenAI's own endpoint
``platform_default`` 32,768-token window, 4,096 output, 1,024 margin — a fallback, not any
                    model's official limit; a window from here always carries a warning
==================  =======================================================================

``max_output_tokens`` is the platform's setting (the input budget's reserve and the real
request's output limit), apart from the provider's maximum output
(``provider_max_output_tokens``): it starts at 4,096 and is never above a known maximum.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .catalogue import OPENAI_MANIFEST, manifest_entry, not_chat_message, not_chat_reason
from .errors import ModelNotChatCapable

Source = Literal["provider", "official_manifest", "platform_default", "manual"]
DEFAULT_CONTEXT_WINDOW = 32_768
DEFAULT_MAX_OUTPUT_TOKENS = 4_096
DEFAULT_SAFETY_MARGIN_TOKENS = 1_024
CONTEXT_RANGE = (1_024, 10_000_000)
OUTPUT_RANGE = (16, 1_000_000)
SAFETY_RANGE = (0, 1_000_000)
# Fields read from a provider's model entry, in order of preference. DeepSeek's and
# OpenAI's documented entries are {id, object, owned_by(, created)}; these names are
# those used by servers that do publish windows (vLLM: max_model_len; OpenRouter and
# others: context_length).
PROVIDER_WINDOW_FIELDS = ("context_window", "context_length", "max_context_length",
                          "max_model_len")
PROVIDER_OUTPUT_FIELDS = ("max_output_tokens", "max_completion_tokens")
PROVIDER_REFERENCE = "GET /models"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Sourced(_Frozen):
    """One figure and where it came from (``reference``: a page for the manifest, the
    list call for the provider; ``checked``: the manifest's date)."""

    value: int
    source: Source
    reference: str | None = None
    checked: str | None = None
    note: str | None = None


class BudgetWarning(_Frozen):
    code: str
    field: str
    message: str


class BudgetOverrides(_Frozen):
    """An admin's manual figures; unset ones are resolved from the other sources."""

    context_window: int | None = Field(default=None, ge=CONTEXT_RANGE[0], le=CONTEXT_RANGE[1])
    max_output_tokens: int | None = Field(default=None, ge=OUTPUT_RANGE[0], le=OUTPUT_RANGE[1])
    safety_margin_tokens: int | None = Field(default=None, ge=SAFETY_RANGE[0],
                                             le=SAFETY_RANGE[1])
    provider_max_output_tokens: int | None = Field(default=None, ge=OUTPUT_RANGE[0],
                                                   le=OUTPUT_RANGE[1])


class ResolvedBudget(_Frozen):
    context_window: Sourced
    max_output_tokens: Sourced
    safety_margin_tokens: Sourced
    provider_max_output_tokens: Sourced | None
    warnings: tuple[BudgetWarning, ...] = ()

    @property
    def effective_input_budget(self) -> int:
        """Window minus output and safety margin (docs/contract.md#thresholds)."""
        return (self.context_window.value - self.max_output_tokens.value
                - self.safety_margin_tokens.value)

    def spec_fields(self) -> dict[str, Any]:
        """The fields of a ``ModelConnectionSpec`` that record this resolution."""
        limit = self.provider_max_output_tokens
        return {
            "context_window": self.context_window.value,
            "max_output_tokens": self.max_output_tokens.value,
            "safety_margin_tokens": self.safety_margin_tokens.value,
            "provider_max_output_tokens": None if limit is None else limit.value,
            "budget_sources": {
                "context_window": self.context_window.source,
                "max_output_tokens": self.max_output_tokens.source,
                "safety_margin_tokens": self.safety_margin_tokens.source,
                "provider_max_output_tokens": None if limit is None else limit.source,
            },
        }


def _int_in(value: Any, bounds: tuple[int, int]) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) \
            and bounds[0] <= value <= bounds[1]:
        return value
    return None


def provider_fields(entry: Mapping[str, Any] | None
                    ) -> tuple[dict[str, int], list[BudgetWarning]]:
    """``{"context_window", "max_output_tokens"}`` from a provider's model entry, plus
    a warning per present field that is not a usable integer (its value is not echoed)."""
    found: dict[str, int] = {}
    warnings: list[BudgetWarning] = []
    if not entry:
        return found, warnings
    for target, names, bounds in (("context_window", PROVIDER_WINDOW_FIELDS, CONTEXT_RANGE),
                                  ("max_output_tokens", PROVIDER_OUTPUT_FIELDS, OUTPUT_RANGE)):
        for name in names:
            if name not in entry or entry[name] is None:
                continue
            value = _int_in(entry[name], bounds)
            if value is None:
                warnings.append(BudgetWarning(
                    code="provider_field_invalid", field=target,
                    message=f"the provider's {name!r} is not an integer in "
                            f"{bounds[0]:,}–{bounds[1]:,}; it is ignored"))
                continue
            found[target] = value
            break
    return found, warnings


def check_chat_model(model_id: str) -> None:
    reason = not_chat_reason(model_id)
    if reason is not None:
        raise ModelNotChatCapable(not_chat_message(model_id, reason), reason=reason)


def _context_window(model_id: str, manual: int | None, listed: int | None,
                    official: Sourced | None, catalogued: bool,
                    warnings: list[BudgetWarning]) -> Sourced:
    known = listed if listed is not None else (official.value if official else None)
    if manual is not None:
        if known is not None and manual > known:
            warnings.append(BudgetWarning(
                code="manual_above_known", field="context_window",
                message=f"the manual context window {manual:,} is above the known "
                        f"{known:,}; requests may be refused"))
        return Sourced(value=manual, source="manual")
    if listed is not None:
        return Sourced(value=listed, source="provider", reference=PROVIDER_REFERENCE)
    if official is not None:
        return official
    if catalogued:
        warnings.append(BudgetWarning(
            code="official_manifest_not_applied", field="context_window",
            message=f"{model_id!r} is in the official OpenAI catalogue, but this provider "
                    "or base URL is not OpenAI's own endpoint and may serve a different "
                    "model: the catalogue's figures are not applied"))
    warnings.append(BudgetWarning(
        code="platform_default_window", field="context_window",
        message=f"no context window is known for {model_id!r} here: the platform "
                f"fallback of {DEFAULT_CONTEXT_WINDOW:,} tokens is used. It is not the "
                "model's official limit; check it and override it in advanced settings"))
    return Sourced(value=DEFAULT_CONTEXT_WINDOW, source="platform_default")


def _max_output(manual: int | None, limit: Sourced | None, window: int, margin: int,
                warnings: list[BudgetWarning]) -> Sourced:
    maximum = None if limit is None else limit.value
    if manual is not None:
        if maximum is not None and manual > maximum:
            warnings.append(BudgetWarning(
                code="max_output_clamped", field="max_output_tokens",
                message=f"max_output_tokens {manual:,} is above the provider's maximum "
                        f"{maximum:,} ({limit.source if limit else ''}); "
                        f"{maximum:,} is used"))
            return Sourced(value=maximum, source="manual",
                           note="clamped to the provider's maximum output")
        return Sourced(value=manual, source="manual")
    value, note = DEFAULT_MAX_OUTPUT_TOKENS, None
    if maximum is not None and maximum < value:
        value, note = maximum, "the provider's maximum output"
    if window - value - margin <= 0:
        value = max(OUTPUT_RANGE[0], (window - margin) // 2)
        note = "reduced to leave half of the window for input"
    if maximum is None:
        warnings.append(BudgetWarning(
            code="provider_max_output_unknown", field="max_output_tokens",
            message=f"the provider's maximum output is not known; check that it accepts "
                    f"{value:,} output tokens"))
    return Sourced(value=value, source="platform_default", note=note)


def resolve_budget(provider: str, base_url: str, model_id: str, *,
                   listed: Mapping[str, Any] | None = None,
                   overrides: BudgetOverrides | None = None) -> ResolvedBudget:
    """The budget figures for a model with their sources and warnings.

    ``base_url`` is compared in its normal form (see ``normalize_base_url``); ``listed``
    is the model's entry from the provider's list (only ``PROVIDER_WINDOW_FIELDS`` /
    ``PROVIDER_OUTPUT_FIELDS`` are read). Raises ``ModelNotChatCapable`` for a model known
    not to serve Chat Completions."""
    check_chat_model(model_id)
    manual = overrides or BudgetOverrides()
    found, warnings = provider_fields(listed)
    entry = manifest_entry(provider, base_url, model_id)
    official_window = official_limit = None
    if entry is not None:
        official_window = Sourced(value=entry.context_window, source="official_manifest",
                                  reference=entry.source_url, checked=entry.checked)
        official_limit = official_window.model_copy(update={"value": entry.max_output_tokens})
    window = _context_window(model_id, manual.context_window, found.get("context_window"),
                             official_window, model_id in OPENAI_MANIFEST, warnings)
    limit: Sourced | None
    if manual.provider_max_output_tokens is not None:
        limit = Sourced(value=manual.provider_max_output_tokens, source="manual")
    elif "max_output_tokens" in found:
        limit = Sourced(value=found["max_output_tokens"], source="provider",
                        reference=PROVIDER_REFERENCE)
    else:
        limit = official_limit
    margin = Sourced(value=manual.safety_margin_tokens, source="manual") \
        if manual.safety_margin_tokens is not None \
        else Sourced(value=DEFAULT_SAFETY_MARGIN_TOKENS, source="platform_default")
    output = _max_output(manual.max_output_tokens, limit, window.value, margin.value, warnings)
    budget = ResolvedBudget(context_window=window, max_output_tokens=output,
                            safety_margin_tokens=margin, provider_max_output_tokens=limit,
                            warnings=tuple(warnings))
    if budget.effective_input_budget <= 0:
        return budget.model_copy(update={"warnings": (*budget.warnings, BudgetWarning(
            code="no_input_budget", field="max_output_tokens",
            message="context_window must exceed max_output_tokens + safety_margin_tokens: "
                    "no input budget is left"))})
    return budget
