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
