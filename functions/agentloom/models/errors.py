"""Errors of model connections and discovery, under the runtime's one root.

    AgentLoomError                               (agentloom_runtime.errors)
    └── ModelsError                  models_error
        ├── ConnectionInputError     connection_invalid     misuse: fix the input (400)
        │   ├── ModelNotChatCapable  model_not_chat_capable
        │   └── KeyReuseRefused      key_reuse_refused / api_key_required / api_key_invalid
        └── DiscoveryError           discovery_failed       listing the provider's models
            ├── AddressNotAllowed        address_not_allowed    (400)
            ├── ProviderUnreachable      provider_unreachable   (502)
            ├── ProviderAuthFailed       provider_auth_failed   (400: the key is refused)
            ├── ProviderRedirected       provider_redirected    (502: never followed)
            ├── ProviderStatusError      provider_status_error  (502)
            └── ProviderResponseInvalid  provider_response_invalid (502)
                └── ProviderResponseTooLarge  provider_response_too_large

``code`` is stable and ``http_status`` is a hint for the API layer. Messages are built
from constants and the caller's own input: they never carry a provider's response body
or a key, and discovery raises them outside ``except`` blocks, so no ``__cause__`` /
``__context__`` holds the httpx request (whose headers carry the key) either.
``details`` hold only short tokens (``reason``, ``status``, ``field``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from agentloom_runtime.errors import AgentLoomError


class ModelsError(AgentLoomError):
    code = "models_error"
    http_status: ClassVar[int] = 400


class ConnectionInputError(ModelsError):
    """A connection, base URL or key that cannot be used as given."""

    code = "connection_invalid"

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None,
                 details: dict[str, Any] | None = None) -> None:
        merged = dict(details or {})
        if field is not None:
            merged["field"] = field
        if code is not None:
            merged["code"] = code  # error_from_dict restores a per-instance code from here
        super().__init__(message, details=merged)
        if code is not None:
            self.code = code
        self.field = field


class ModelNotChatCapable(ConnectionInputError):
    code = "model_not_chat_capable"

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message, field="model_id", details={"reason": reason})


class KeyReuseRefused(ConnectionInputError):
    """``key_for_update`` refused: its ``code`` says why (see ``KeyDecision``)."""

    code = "key_reuse_refused"


class DiscoveryError(ModelsError):
    code = "discovery_failed"
    http_status: ClassVar[int] = 502


class AddressNotAllowed(DiscoveryError):
    code = "address_not_allowed"
    http_status: ClassVar[int] = 400


class ProviderUnreachable(DiscoveryError):
    code = "provider_unreachable"


class ProviderAuthFailed(DiscoveryError):
    code = "provider_auth_failed"
    http_status: ClassVar[int] = 400


class ProviderRedirected(DiscoveryError):
    code = "provider_redirected"


class ProviderStatusError(DiscoveryError):
    code = "provider_status_error"


class ProviderResponseInvalid(DiscoveryError):
    code = "provider_response_invalid"


class ProviderResponseTooLarge(ProviderResponseInvalid):
    code = "provider_response_too_large"
