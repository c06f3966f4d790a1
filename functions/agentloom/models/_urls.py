"""Base URLs: one normal form, used for saving, comparing (key reuse) and discovery."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from .catalogue import DEEPSEEK_BASE_URL, OPENAI_BASE_URL
from .errors import ConnectionInputError

Provider = Literal["openai", "deepseek", "openai_compatible"]
PROVIDERS: tuple[Provider, ...] = ("openai", "deepseek", "openai_compatible")
DEFAULT_BASE_URLS: dict[str, str] = {"openai": OPENAI_BASE_URL, "deepseek": DEEPSEEK_BASE_URL}
MAX_URL_CHARS = 2_048
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


def _bad(message: str) -> ConnectionInputError:
    return ConnectionInputError(message, field="base_url", code="base_url_invalid")


def check_provider(provider: object) -> Provider:
    for known in PROVIDERS:
        if provider == known:
            return known
    raise ConnectionInputError(f"provider must be one of {', '.join(PROVIDERS)}",
                               field="provider", code="provider_invalid")


def _host_ok(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        labels = host.rstrip(".").split(".")
        return len(host) <= 253 and all(_LABEL.fullmatch(label) for label in labels)
    return True


def normalize_base_url(base_url: object, provider: str) -> str:
    """``scheme://host[:port][/path]`` without a trailing slash, a default port, user
    info, a query or a fragment. ``openai`` and ``deepseek`` need https (a key is sent);
    ``openai_compatible`` may use http (a server on the same host or network)."""
    if base_url in (None, ""):
        raise _bad(f"base_url is required for provider {provider}")
    if not isinstance(base_url, str) or len(base_url) > MAX_URL_CHARS:
        raise _bad(f"base_url must be a URL of at most {MAX_URL_CHARS} characters")
    if not base_url.isprintable() or any(c.isspace() for c in base_url):
        raise _bad("base_url must not contain spaces or control characters")
    import httpx  # its URL parser, on first use: the api and trigger never load httpx

    try:
        url = httpx.URL(base_url)
    except (TypeError, httpx.InvalidURL):
        raise _bad("base_url is not a valid URL") from None
    if url.scheme not in ("http", "https"):
        raise _bad("base_url must be an absolute http(s) URL")
    host = url.raw_host.decode("ascii", "replace").lower()
    if not host or not _host_ok(host):
        raise _bad("base_url must name a host")
    if url.userinfo or url.query or url.fragment or "?" in base_url or "#" in base_url:
        raise _bad("base_url must not carry credentials, a query or a fragment")
    if provider in DEFAULT_BASE_URLS and url.scheme != "https":
        raise _bad(f"provider {provider} needs an https base_url")
    return str(url).rstrip("/")
