"""Discovery: the provider's ``GET {base_url}/models``, made safe to call with an
admin-supplied URL and key.

``ModelDiscovery.discover`` reads top-down:

1. check the input (provider, base URL in normal form, key usable as a header);
2. resolve the host and check every address (``_addresses``), under the deadline;
3. send one GET through ``PinnedTransport`` (connects to a checked address only), with
   ``trust_env=False`` (proxy variables, ``.netrc`` and SSL env ignored) and no redirects;
4. read at most ``max_response_bytes`` while streaming;
5. map the status, parse the list, and describe each model (selectable or not, its
   budget with sources).

The whole call has one total deadline (``timeout`` seconds: resolution, connect, send
and the whole body), so a server that trickles bytes cannot hold the request. The key
is used for that one request and never stored: it is not an attribute, not in a result,
not in an error. Errors are raised after the ``except`` block that noticed the problem,
so neither ``__cause__`` nor ``__context__`` points at an httpx error (whose request
holds the ``Authorization`` header) or a JSON error (whose ``doc`` is the body).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from ._addresses import AddressPolicy, Resolver, check_addresses, system_resolver
from ._urls import Provider, check_provider, normalize_base_url
from .budget import ResolvedBudget, provider_fields, resolve_budget
from .catalogue import not_chat_message, not_chat_reason
from .errors import (
    ConnectionInputError,
    DiscoveryError,
    ProviderAuthFailed,
    ProviderRedirected,
    ProviderResponseInvalid,
    ProviderResponseTooLarge,
    ProviderStatusError,
    ProviderUnreachable,
)

if TYPE_CHECKING:  # httpx loads with the first discovery: the API declares DiscoveredModel
    import httpx

MAX_RESPONSE_BYTES = 2 * 1024 * 1024
MAX_MODELS = 5_000
_MAX_ID_CHARS = 200
_MAX_OWNER_CHARS = 100


class DiscoveredModel(BaseModel):
    """One entry of the provider's list. ``selectable`` is False for models known not to
    serve Chat Completions (``not_selectable_reason`` says why, ``budget`` is None)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    owned_by: str | None = None
    created: int | None = None
    selectable: bool
    not_selectable_reason: str | None = None
    provider_fields: dict[str, int] = {}
    budget: ResolvedBudget | None = None


def _text(value: Any, limit: int) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= limit and value.isprintable() \
            and not any(c.isspace() for c in value):
        return value
    return None


def _describe(provider: str, base_url: str, entry: Mapping[str, Any]) -> DiscoveredModel | None:
    model_id = _text(entry.get("id"), _MAX_ID_CHARS)
    if model_id is None:
        return None
    owner = entry.get("owned_by")
    created = entry.get("created")
    common: dict[str, Any] = {
        "id": model_id,
        "owned_by": owner if isinstance(owner, str) and len(owner) <= _MAX_OWNER_CHARS
        and owner.isprintable() else None,
        "created": created if isinstance(created, int) and not isinstance(created, bool)
        else None}
    reason = not_chat_reason(model_id)
    if reason is not None:
        return DiscoveredModel(**common, selectable=False,
                               not_selectable_reason=not_chat_message(model_id, reason))
    found, _ = provider_fields(entry)
    return DiscoveredModel(**common, selectable=True, provider_fields=found,
                           budget=resolve_budget(provider, base_url, model_id, listed=entry))


def parse_model_list(provider: str, base_url: str, body: bytes) -> list[DiscoveredModel]:
    """The models of a ``{"data": [{"id": ...}, ...]}`` body, sorted by id, each once.
    Entries without a usable id are skipped; a body of another shape is refused."""
    data: Any
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        data = None
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ProviderResponseInvalid(
            "the provider's model list is not a JSON object with a data list",
            details={"reason": "shape"})
    if len(entries) > MAX_MODELS:
        raise ProviderResponseInvalid(
            f"the provider listed more than {MAX_MODELS:,} models",
            details={"reason": "too_many_models", "limit": MAX_MODELS})
    models: dict[str, DiscoveredModel] = {}
    for entry in entries:
        if isinstance(entry, dict):
            model = _describe(provider, base_url, entry)
            if model is not None:
                models.setdefault(model.id, model)
    return [models[key] for key in sorted(models)]


def _check_key(provider: Provider, api_key: object) -> str:
    if not isinstance(api_key, str) or not api_key.isascii() or not api_key.isprintable() \
            or api_key != api_key.strip() or " " in api_key or len(api_key) > 4_096:
        raise ConnectionInputError("api_key must be printable ASCII without spaces",
                                   field="api_key", code="api_key_invalid")
    if not api_key and provider != "openai_compatible":
        raise ConnectionInputError(f"provider {provider} needs an api_key",
                                   field="api_key", code="api_key_required")
    return api_key


def _status_error(status: int) -> DiscoveryError:
    details = {"status": status}
    if status in (401, 403):
        return ProviderAuthFailed(f"the provider refused the key (HTTP {status})",
                                  details=details)
    if 300 <= status < 400:
        return ProviderRedirected(f"the provider answered HTTP {status}, a redirect; "
                                  "redirects are not followed: check the base URL",
                                  details=details)
    return ProviderStatusError(f"the provider answered HTTP {status}", details=details)


class ModelDiscovery:
    """Lists a provider's models. Loopback and private addresses are refused unless a
    flag allows them (tests, a local ``agentloom serve``); link-local and metadata
    addresses always are. ``resolver`` and ``transport`` are for tests: the address
    checks and pinning apply to an injected transport too (it sees the checked IP in
    the URL and the original ``Host`` header)."""

    def __init__(self, *, allow_loopback: bool = False, allow_private: bool = False,
                 timeout: float = 15.0, max_response_bytes: int = MAX_RESPONSE_BYTES,
                 resolver: Resolver | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        if not timeout > 0 or max_response_bytes < 1:
            raise ConnectionInputError("timeout and max_response_bytes must be positive")
        self.policy = AddressPolicy(allow_loopback=allow_loopback, allow_private=allow_private)
        self.timeout = float(timeout)
        self.max_response_bytes = int(max_response_bytes)
        self._resolver: Resolver = resolver or system_resolver
        self._transport = transport

    def __repr__(self) -> str:
        return f"ModelDiscovery(policy={self.policy!r}, timeout={self.timeout:g})"

    async def discover(self, provider: str, base_url: str,
                       api_key: str) -> list[DiscoveredModel]:
        checked = check_provider(provider)
        url = normalize_base_url(base_url, checked)
        key = _check_key(checked, api_key)
        outcome: list[DiscoveredModel] | DiscoveryError
        try:
            async with asyncio.timeout(self.timeout):
                outcome = await self._list(checked, url, key)
        except TimeoutError:
            outcome = ProviderUnreachable(
                f"the provider did not answer within {self.timeout:g} s",
                details={"reason": "deadline"})
        if isinstance(outcome, DiscoveryError):
            raise outcome
        return outcome

    async def _list(self, provider: Provider, base_url: str,
                    key: str) -> list[DiscoveredModel] | DiscoveryError:
        import httpx

        target = httpx.URL(f"{base_url}/models")
        port = target.port or (443 if target.scheme == "https" else 80)
        addresses = check_addresses(await self._resolver(target.host, port), self.policy)
        fetched = await self._fetch(target, addresses, key)
        if isinstance(fetched, DiscoveryError):
            return fetched
        return parse_model_list(provider, base_url, fetched)

    async def _fetch(self, target: httpx.URL, addresses: list[str],
                     key: str) -> bytes | DiscoveryError:
        from ._transport import fetch_pinned

        headers = {"Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        got = await fetch_pinned("GET", target, addresses, headers=headers,
                                 limit=self.max_response_bytes, io_timeout=self.timeout,
                                 inner=self._transport)
        if got.status_code is not None:
            return _status_error(got.status_code)
        if got.failure == "too_large":
            return ProviderResponseTooLarge(
                f"the provider's model list exceeds {self.max_response_bytes:,} bytes",
                details={"reason": "too_large", "limit": self.max_response_bytes})
        if got.failure:
            return ProviderUnreachable(f"could not get the model list from the provider "
                                       f"({got.failure})", details={"reason": got.failure})
        return got.body


async def discover(provider: str, base_url: str, api_key: str, *,
                   transport: httpx.AsyncBaseTransport | None = None
                   ) -> list[DiscoveredModel]:
    """``ModelDiscovery().discover(...)`` with the production policy: loopback and
    private addresses refused. The key is used for this one request and not kept."""
    return await ModelDiscovery(transport=transport).discover(provider, base_url, api_key)
