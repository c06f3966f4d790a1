"""Model connections: what an admin saves, where each budget figure comes from, and the
provider's model list (issue 10, docs/contract.md#window-sources). See ``docs/models.md``.

- ``ModelConnectionSpec`` — provider, base URL, exact model id, budget figures with
  their sources, optional prices, the key as a reference (``api_key_ref``).
- ``resolve_budget`` — figures by source (``manual`` > ``provider`` >
  ``official_manifest`` > ``platform_default``) with warnings.
- ``discover`` / ``ModelDiscovery`` — ``GET {base_url}/models`` behind an SSRF guard.
- ``key_for_update`` — an empty key reuses the stored one only when provider and base URL
  are unchanged.

Errors: ``errors.py`` draws the tree; every one has a stable ``code``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloom_runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from ._addresses import METADATA_ADDRESSES, AddressPolicy, classify
    from ._urls import DEFAULT_BASE_URLS, PROVIDERS, Provider, normalize_base_url
    from .budget import (
        DEFAULT_CONTEXT_WINDOW,
        DEFAULT_MAX_OUTPUT_TOKENS,
        DEFAULT_SAFETY_MARGIN_TOKENS,
        BudgetOverrides,
        BudgetWarning,
        ResolvedBudget,
        Source,
        Sourced,
        check_chat_model,
        resolve_budget,
    )
    from .catalogue import (
        CATALOGUE_CHECKED,
        CATALOGUE_VERSION,
        OPENAI_MANIFEST,
        ManifestEntry,
        is_official_openai,
        manifest_entry,
        not_chat_reason,
    )
    from .connections import (
        BudgetSources,
        EmbeddingSettings,
        Endpoint,
        KeyDecision,
        ModelConnectionSpec,
        StoredEndpoint,
        key_for_update,
    )
    from .discovery import (
        MAX_RESPONSE_BYTES,
        DiscoveredModel,
        ModelDiscovery,
        discover,
        parse_model_list,
    )
    from .errors import (
        AddressNotAllowed,
        ConnectionInputError,
        DiscoveryError,
        KeyReuseRefused,
        ModelNotChatCapable,
        ModelsError,
        ProviderAuthFailed,
        ProviderRedirected,
        ProviderResponseInvalid,
        ProviderResponseTooLarge,
        ProviderStatusError,
        ProviderUnreachable,
    )

__all__ = [
    "CATALOGUE_CHECKED",
    "CATALOGUE_VERSION",
    "DEFAULT_BASE_URLS",
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "DEFAULT_SAFETY_MARGIN_TOKENS",
    "MAX_RESPONSE_BYTES",
    "METADATA_ADDRESSES",
    "OPENAI_MANIFEST",
    "PROVIDERS",
    "AddressNotAllowed",
    "AddressPolicy",
    "BudgetOverrides",
    "BudgetSources",
    "BudgetWarning",
    "ConnectionInputError",
    "DiscoveredModel",
    "DiscoveryError",
    "EmbeddingSettings",
    "Endpoint",
    "KeyDecision",
    "KeyReuseRefused",
    "ManifestEntry",
    "ModelConnectionSpec",
    "ModelDiscovery",
    "ModelNotChatCapable",
    "ModelsError",
    "Provider",
    "ProviderAuthFailed",
    "ProviderRedirected",
    "ProviderResponseInvalid",
    "ProviderResponseTooLarge",
    "ProviderStatusError",
    "ProviderUnreachable",
    "ResolvedBudget",
    "Source",
    "Sourced",
    "StoredEndpoint",
    "check_chat_model",
    "classify",
    "discover",
    "is_official_openai",
    "key_for_update",
    "manifest_entry",
    "normalize_base_url",
    "not_chat_reason",
    "parse_model_list",
    "resolve_budget",
]

# Each name loads its module on first use (PEP 562): importing one light module of the
# package (the step reads connection records, the API declares its routes) does not
# import httpx, the discovery client or the indexing code.
_HOMES = {
    "AddressNotAllowed": ".errors",
    "AddressPolicy": "._addresses",
    "BudgetOverrides": ".budget",
    "BudgetSources": ".connections",
    "BudgetWarning": ".budget",
    "CATALOGUE_CHECKED": ".catalogue",
    "CATALOGUE_VERSION": ".catalogue",
    "ConnectionInputError": ".errors",
    "DEFAULT_BASE_URLS": "._urls",
    "DEFAULT_CONTEXT_WINDOW": ".budget",
    "DEFAULT_MAX_OUTPUT_TOKENS": ".budget",
    "DEFAULT_SAFETY_MARGIN_TOKENS": ".budget",
    "DiscoveredModel": ".discovery",
    "DiscoveryError": ".errors",
    "EmbeddingSettings": ".connections",
    "Endpoint": ".connections",
    "KeyDecision": ".connections",
    "KeyReuseRefused": ".errors",
    "MAX_RESPONSE_BYTES": ".discovery",
    "METADATA_ADDRESSES": "._addresses",
    "ManifestEntry": ".catalogue",
    "ModelConnectionSpec": ".connections",
    "ModelDiscovery": ".discovery",
    "ModelNotChatCapable": ".errors",
    "ModelsError": ".errors",
    "OPENAI_MANIFEST": ".catalogue",
    "PROVIDERS": "._urls",
    "Provider": "._urls",
    "ProviderAuthFailed": ".errors",
    "ProviderRedirected": ".errors",
    "ProviderResponseInvalid": ".errors",
    "ProviderResponseTooLarge": ".errors",
    "ProviderStatusError": ".errors",
    "ProviderUnreachable": ".errors",
    "ResolvedBudget": ".budget",
    "Source": ".budget",
    "Sourced": ".budget",
    "StoredEndpoint": ".connections",
    "check_chat_model": ".budget",
    "classify": "._addresses",
    "discover": ".discovery",
    "is_official_openai": ".catalogue",
    "key_for_update": ".connections",
    "manifest_entry": ".catalogue",
    "normalize_base_url": "._urls",
    "not_chat_reason": ".catalogue",
    "parse_model_list": ".discovery",
    "resolve_budget": ".budget",
}
__getattr__ = lazy_exports(__name__, _HOMES)
