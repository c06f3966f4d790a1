"""The web console's static files (``agentloom/console/``), as ``agentloom serve``
answers them at ``/``: the folder is read once into a table of paths, so a request can
name only a file that is there (no path is ever joined onto the folder). Every answer
carries the console's security headers: a CSP of this origin only (no inline scripts or
styles, no third-party origins, no framing), nosniff, no referrer.

``/config.json`` tells the console where the API is and how to sign in; on ``serve`` it
is ``{"api": "", "auth": {"kind": "token"}}`` (the same origin, bearer tokens), on AWS
the CDK app writes the CloudFront copy (Cognito hosted UI, ``infra/agentloom_infra/
console.py``).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

CONSOLE_DIR = Path(__file__).resolve().parents[1] / "console"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
         ".json": "application/json", ".ico": "image/x-icon", ".txt": "text/plain"}
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()"}
TOKEN_CONFIG: dict[str, Any] = {"api": "", "auth": {"kind": "token"}}


def csp(config: dict[str, Any]) -> str:
    """This origin only, plus the API's and the sign-in service's origins when the
    config names other ones (connect-src: the token exchange is a fetch)."""
    others = [origin(config.get("api") or "")]
    auth = config.get("auth") or {}
    others.append(origin(str(auth.get("domain") or "")))
    connect = " ".join(["'self'", *sorted({o for o in others if o})])
    return (f"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            f"connect-src {connect}; font-src 'self'; object-src 'none'; base-uri 'none'; "
            f"frame-ancestors 'none'; form-action 'self'")


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") and \
        parts.netloc else ""


@cache
def files(root: Path = CONSOLE_DIR) -> dict[str, Path]:
    """URL path → file, for every file of the console folder with a known type."""
    table = {"/" + p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*"))
             if p.is_file() and p.suffix in TYPES}
    if "/index.html" in table:
        table["/"] = table["/index.html"]
    return table


def is_console_path(path: str) -> bool:
    return not (path.startswith("/api/") or path == "/openapi.json")


def answer(path: str, config: dict[str, Any] | None = None
           ) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body for a GET of ``path`` (a 404 page for any other)."""
    config = config or TOKEN_CONFIG
    headers = {"Content-Security-Policy": csp(config), **SECURITY_HEADERS}
    headers["Cache-Control"] = "no-cache"  # revalidated each load: an upgrade shows at once
    if path == "/config.json":
        headers["Content-Type"] = TYPES[".json"]
        return 200, headers, json.dumps(config).encode()
    found = files().get(path)
    if found is None:
        headers["Content-Type"] = TYPES[".txt"]
        return 404, headers, b"not found: the console lives at / (open it there)\n"
    headers["Content-Type"] = TYPES[found.suffix]
    return 200, headers, found.read_bytes()
