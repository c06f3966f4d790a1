"""The console's AWS sign-in, authorization code + PKCE, against a scripted
authorization server on 127.0.0.1 that checks what Cognito's hosted UI checks: the
client id, the redirect URI, S256 and — at the token endpoint — that the verifier hashes
to the challenge, each code once. Its access token is a bearer token of the local API,
so the console then calls the API exactly as it would with a Cognito JWT. Also: an
answer whose ``state`` is not this tab's is refused; sign-out goes to ``/logout``."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from playwright.sync_api import expect

from .conftest import Console, shot

CLIENT_ID = "console-client"


@dataclass
class Provider:
    """The scripted authorization server: what it saw, and the codes it issued."""

    access_token: str
    redirect_uri: str = ""
    console_origin: str = ""
    codes: dict[str, str] = field(default_factory=dict)  # code -> challenge
    token_requests: list[dict[str, str]] = field(default_factory=list)
    logouts: int = 0


def _handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: dict[str, Any] | None = None,
                    location: str | None = None) -> None:
            self.send_response(status)
            if location:
                self.send_header("Location", location)
            self.send_header("Access-Control-Allow-Origin", provider.console_origin)
            data = json.dumps(body or {}).encode()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            q = {k: v[0] for k, v in parse_qs(parts.query).items()}
            if parts.path == "/oauth2/authorize":
                ok = (q.get("response_type") == "code" and q.get("client_id") == CLIENT_ID
                      and q.get("redirect_uri") == provider.redirect_uri
                      and q.get("code_challenge_method") == "S256"
                      and "openid" in q.get("scope", "").split())
                if not ok:
                    self._answer(400, {"error": "invalid_request"})
                    return
                code = f"code-{len(provider.codes) + 1}"
                provider.codes[code] = q["code_challenge"]
                self._answer(302, location=f"{provider.redirect_uri}?"
                             f"{urlencode({'code': code, 'state': q['state']})}")
            elif parts.path == "/logout":
                provider.logouts += 1
                self._answer(302, location=q.get("logout_uri", "/"))
            else:
                self._answer(404)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            provider.token_requests.append(form)
            challenge = provider.codes.pop(form.get("code", ""), None)  # each code once
            verifier = form.get("code_verifier", "").encode()
            hashed = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=")
            if urlsplit(self.path).path != "/oauth2/token" or challenge is None or \
                    hashed.decode() != challenge or form.get("client_id") != CLIENT_ID or \
                    form.get("redirect_uri") != provider.redirect_uri or \
                    form.get("grant_type") != "authorization_code":
                self._answer(400, {"error": "invalid_grant"})
                return
            claims = base64.urlsafe_b64encode(json.dumps(
                {"sub": "alice", "cognito:username": "alice"}).encode()).rstrip(b"=").decode()
            self._answer(200, {"access_token": provider.access_token,
                               "id_token": f"e30.{claims}.sig", "expires_in": 3600,
                               "token_type": "Bearer"})

    return Handler


@pytest.fixture
def provider(console: Console) -> Iterator[Provider]:
    made = Provider(access_token=console.tokens["alice"], redirect_uri=console.url + "/",
                    console_origin=console.url)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(made))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    console.server.console_config = {
        "api": "", "auth": {"kind": "cognito", "client_id": CLIENT_ID,
                            "domain": f"http://127.0.0.1:{server.server_address[1]}",
                            "scopes": ["openid", "email", "profile"],
                            "redirect_uri": made.redirect_uri}}
    try:
        yield made
    finally:
        server.shutdown()
        server.server_close()


def test_hosted_ui_sign_in_with_pkce(console: Console, provider: Provider, page: Any) -> None:
    page.goto(console.url + "/")
    expect(page.get_by_role("heading", name="Sign in to AgentLoom")).to_be_visible()
    shot(page, "sign-in-cognito")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("Signed in as alice")).to_be_visible()
    assert "code=" not in page.url and "state=" not in page.url
    expect(page.get_by_role("link", name="Team")).to_be_visible()
    (request,) = provider.token_requests
    assert len(request["code_verifier"]) >= 43  # RFC 7636: 43–128 characters
    assert page.evaluate("() => sessionStorage.getItem('agentloom.console.pkce')") is None
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in to AgentLoom")).to_be_visible()
    assert provider.logouts == 1
    assert page.evaluate("() => sessionStorage.getItem('agentloom.console.auth')") is None


def test_an_answer_for_another_tab_is_refused(console: Console, provider: Provider,
                                              page: Any) -> None:
    page.goto(console.url + "/?code=code-9&state=not-this-tabs")
    expect(page.get_by_role("status")).to_contain_text("does not match this tab's request")
    expect(page.get_by_role("heading", name="Sign in to AgentLoom")).to_be_visible()
    assert provider.token_requests == []  # the code was never sent anywhere
    assert "code=" not in page.url
