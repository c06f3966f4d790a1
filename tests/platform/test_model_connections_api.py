"""Model connections as a space resource through the HTTP API (a real server on
127.0.0.1): create / list / get / update, the key sealed and never returned, an empty key
on update reused only for the same provider and base URL, discovery through the guarded
client without saving the key, and who may do it (admins and owners; a member is 403,
a non-member and another space 404, no token 401).

Discovery talks to a fake provider on 127.0.0.1, which only a platform opened with
``allow_loopback_discovery=True`` (test mode) may reach."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentloom.local.embedded import CodecSecrets, EmbeddedPlatform
from agentloom.models import AddressNotAllowed, ModelDiscovery
from agentloom_runtime.errors import PersistenceError

from .conftest import ALICE, Api, Model

KEY = "sk-test-THE-SECRET-PROVIDER-KEY-4242"
NEW_KEY = "sk-test-ANOTHER-SECRET-KEY-9191"
DISCOVERY_KEY = "sk-test-ONLY-FOR-DISCOVERY-5555"
SECRETS = (KEY, NEW_KEY, DISCOVERY_KEY)


class FakeProvider:
    """``GET /v1/models`` on 127.0.0.1; records the Authorization headers it saw."""

    def __init__(self) -> None:
        seen: list[str] = []
        self.seen = seen

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.headers.get("Authorization", ""))
                body = json.dumps({"data": [{"id": "llama-3-70b", "owned_by": "me"},
                                            {"id": "text-embedding-3-small"}]}).encode()
                self.send_response(200 if self.path == "/v1/models" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider()
    yield fake
    fake.close()


@pytest.fixture
def platform(tmp_path: Path, model: Model) -> Iterator[EmbeddedPlatform]:
    """The conftest's platform, in test mode: discovery may reach 127.0.0.1."""
    opened = EmbeddedPlatform.open(tmp_path / "home", model_factory=model.factory,
                                   allow_loopback_discovery=True)
    yield opened
    model.open()
    opened.close()


class Http:
    """Raw HTTP as one user, keeping every response body (to look for the key)."""

    def __init__(self, api: Api, user: str | None, bodies: list[str]) -> None:
        headers = {"Authorization": f"Bearer {api.tokens[user]}"} if user else {}
        self.http = httpx.Client(base_url=api.url + "/api/v1", headers=headers,
                                 trust_env=False, timeout=30)
        self.bodies = bodies

    def __call__(self, method: str, path: str, body: Any = None) -> httpx.Response:
        response = self.http.request(method, path, json=body)
        self.bodies.append(response.text)
        return response


@pytest.fixture
def bodies() -> list[str]:
    return []


@pytest.fixture
def as_(api: Api, bodies: list[str]) -> Iterator[Any]:
    made: list[Http] = []

    def client(user: str | None) -> Http:
        made.append(Http(api, user, bodies))
        return made[-1]

    yield client
    for http in made:
        http.http.close()


def raw_store(api: Api) -> bytes:
    home = api.platform.home
    return b"".join(p.read_bytes() for p in sorted(home.glob("agentloom.sqlite3*")))


def compatible(provider: FakeProvider, **extra: Any) -> dict[str, Any]:
    return {"provider": "openai_compatible", "base_url": provider.base_url,
            "model_id": "llama-3-70b", **extra}


def test_create_list_get_never_return_or_store_the_key(api: Api, as_: Any,
                                                       bodies: list[str],
                                                       provider: FakeProvider) -> None:
    alice = as_("alice")
    base = f"/spaces/{api.space_id}/models/connections"
    made = alice("POST", base, {"name": "Local llama", "spec": compatible(provider),
                                "api_key": KEY})
    assert made.status_code == 201, made.text
    out = made.json()
    cid = out["connection_id"]
    assert out["has_key"] is True and out["spec"]["api_key_ref"] == cid
    assert out["spec"]["base_url"] == provider.base_url
    assert out["budget"]["context_window"]["source"] == "platform_default"
    assert "sealed_key" not in out and "api_key" not in out
    openai = alice("POST", base, {"name": "OpenAI", "api_key": NEW_KEY, "spec": {
        "provider": "openai", "model_id": "gpt-4o"}})
    assert openai.status_code == 201, openai.text
    assert openai.json()["budget"]["context_window"]["source"] == "official_manifest"
    listed = alice("GET", base).json()["items"]
    assert {c["connection_id"] for c in listed} == {cid, openai.json()["connection_id"]}
    got = alice("GET", f"{base}/{cid}")
    assert got.status_code == 200 and got.json()["has_key"] is True
    # the admin carol sees and edits connections too
    assert as_("carol")("GET", f"{base}/{cid}").status_code == 200
    # the key is stored (sealed) and opens for the code that calls the provider
    assert api.platform.admin.connection_key(api.space_id, cid) == KEY
    for body in bodies:
        assert KEY not in body and NEW_KEY not in body
    stored = raw_store(api)
    for secret in (KEY, NEW_KEY, "THE-SECRET-PROVIDER-KEY"):
        assert secret.encode() not in stored, secret


def test_update_reuses_an_empty_key_only_for_the_same_endpoint(
        api: Api, as_: Any, bodies: list[str], provider: FakeProvider) -> None:
    alice = as_("alice")
    base = f"/spaces/{api.space_id}/models/connections"
    cid = alice("POST", base, {"name": "L", "spec": compatible(provider),
                               "api_key": KEY}).json()["connection_id"]
    url = f"{base}/{cid}"
    # same provider and base URL, no key: the stored key stays
    kept = alice("PUT", url, {"spec": compatible(provider, max_output_tokens=2048),
                              "revision": 1})
    assert kept.status_code == 200, kept.text
    assert kept.json()["revision"] == 2 and kept.json()["has_key"] is True
    assert kept.json()["spec"]["max_output_tokens"] == 2048
    assert api.platform.admin.connection_key(api.space_id, cid) == KEY
    # "" is empty too
    assert alice("PUT", url, {"spec": compatible(provider), "api_key": ""}).status_code == 200
    # another base URL without a key: the stored key is not sent elsewhere
    moved = alice("PUT", url, {"spec": compatible(provider, base_url="http://127.0.0.2:1/v1")})
    assert moved.status_code == 422
    assert moved.json()["error"]["code"] == "key_reuse_refused"
    assert moved.json()["error"]["details"]["fields"][0]["field"] == "api_key"
    # a stale revision
    stale = alice("PUT", url, {"spec": compatible(provider), "revision": 1})
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "connection_changed"
    # a new key replaces the stored one
    assert alice("PUT", url, {"spec": compatible(provider, base_url="http://127.0.0.2:1/v1"),
                              "api_key": NEW_KEY, "name": "Moved"}).status_code == 200
    assert api.platform.admin.connection_key(api.space_id, cid) == NEW_KEY
    assert alice("GET", url).json()["name"] == "Moved"
    for body in bodies:
        assert KEY not in body and NEW_KEY not in body
    assert KEY.encode() not in raw_store(api) and NEW_KEY.encode() not in raw_store(api)


def test_invalid_input_names_the_field(api: Api, as_: Any, provider: FakeProvider) -> None:
    alice = as_("alice")
    base = f"/spaces/{api.space_id}/models/connections"

    def error(body: dict[str, Any]) -> tuple[str, str]:
        response = alice("POST", base, body)
        assert response.status_code == 422, response.text
        err = response.json()["error"]
        return err["code"], err["details"]["fields"][0]["field"]

    assert error({"name": "x", "spec": {"provider": "openai", "model_id": "gpt-4o"}}) \
        == ("api_key_required", "api_key")
    assert error({"name": "x", "spec": compatible(provider, api_key_ref="mine")}) \
        == ("invalid_field", "spec.api_key_ref")
    assert error({"name": "x", "api_key": KEY, "spec": {
        "provider": "openai", "model_id": "text-embedding-3-small"}}) \
        == ("invalid_field", "spec.model_id")
    assert error({"name": "x", "api_key": "has a space", "spec": compatible(provider)}) \
        == ("api_key_invalid", "api_key")
    # keyless openai_compatible is allowed
    keyless = alice("POST", base, {"name": "keyless", "spec": compatible(provider)})
    assert keyless.status_code == 201 and keyless.json()["has_key"] is False


def test_discover_lists_models_without_saving_the_key(
        api: Api, as_: Any, bodies: list[str], provider: FakeProvider) -> None:
    alice = as_("alice")
    path = f"/spaces/{api.space_id}/models/discover"
    found = alice("POST", path, {"provider": "openai_compatible",
                                 "base_url": provider.base_url, "api_key": DISCOVERY_KEY})
    assert found.status_code == 200, found.text
    items = {m["id"]: m for m in found.json()["items"]}
    assert items["llama-3-70b"]["selectable"] is True
    assert items["text-embedding-3-small"]["selectable"] is False
    assert provider.seen == [f"Bearer {DISCOVERY_KEY}"]
    assert DISCOVERY_KEY.encode() not in raw_store(api)
    assert alice("GET", f"/spaces/{api.space_id}/models/connections").json()["items"] == []
    # with resource_id and no key: the saved connection's key, for its own endpoint
    cid = alice("POST", f"/spaces/{api.space_id}/models/connections", {
        "name": "L", "spec": compatible(provider), "api_key": KEY}).json()["connection_id"]
    again = alice("POST", path, {"provider": "openai_compatible",
                                 "base_url": provider.base_url, "resource_id": cid})
    assert again.status_code == 200 and provider.seen[-1] == f"Bearer {KEY}"
    elsewhere = alice("POST", path, {"provider": "openai_compatible",
                                     "base_url": "http://127.0.0.2:9/v1", "resource_id": cid})
    assert elsewhere.status_code == 422
    assert elsewhere.json()["error"]["code"] == "key_reuse_refused"
    assert len(provider.seen) == 2
    unknown = alice("POST", path, {"provider": "openai_compatible",
                                   "base_url": provider.base_url,
                                   "resource_id": "mdl_000000000000deadbeef"})
    assert unknown.status_code == 404
    # a provider error is mapped, its body never echoed
    missing = alice("POST", path, {"provider": "openai_compatible",
                                   "base_url": provider.base_url + "/nothing-here",
                                   "api_key": DISCOVERY_KEY})
    assert missing.status_code == 502
    assert missing.json()["error"]["code"] == "provider_status_error"
    metadata = alice("POST", path, {"provider": "openai_compatible",
                                    "base_url": "http://169.254.169.254/v1"})
    assert metadata.status_code == 400
    assert metadata.json()["error"]["code"] == "address_not_allowed"
    for body in bodies:
        assert all(secret not in body for secret in SECRETS)


def test_a_member_is_403_another_space_and_a_stranger_404(
        api: Api, as_: Any, provider: FakeProvider) -> None:
    alice = as_("alice")
    base = f"/spaces/{api.space_id}/models"
    cid = alice("POST", f"{base}/connections", {
        "name": "L", "spec": compatible(provider), "api_key": KEY}).json()["connection_id"]
    calls: list[tuple[str, str, Any]] = [
        ("POST", f"{base}/connections", {"name": "x", "spec": compatible(provider)}),
        ("GET", f"{base}/connections", None),
        ("GET", f"{base}/connections/{cid}", None),
        ("PUT", f"{base}/connections/{cid}", {"spec": compatible(provider)}),
        ("POST", f"{base}/discover", {"provider": "openai_compatible",
                                      "base_url": provider.base_url, "resource_id": cid})]
    for user, status in (("bob", 403), ("eve", 404), (None, 401)):
        who = as_(user)
        for method, path, body in calls:
            response = who(method, path, body)
            assert response.status_code == status, (user, method, path, response.text)
            assert KEY not in response.text and "llama" not in response.text
    # another space of alice's: the connection is not there
    other = api.platform.admin.create_space(ALICE, "Other").space_id
    assert alice("GET", f"/spaces/{other}/models/connections/{cid}").status_code == 404
    assert alice("PUT", f"/spaces/{other}/models/connections/{cid}",
                 {"spec": compatible(provider)}).status_code == 404
    assert alice("POST", f"/spaces/{other}/models/discover", {
        "provider": "openai_compatible", "base_url": provider.base_url,
        "resource_id": cid}).status_code == 404
    assert provider.seen == []  # nobody reached the provider with the key


def test_a_sealed_key_is_bound_to_its_space_and_connection(
        api: Api, as_: Any, provider: FakeProvider) -> None:
    alice = as_("alice")
    base = f"/spaces/{api.space_id}/models/connections"
    first = alice("POST", base, {"name": "A", "spec": compatible(provider),
                                 "api_key": KEY}).json()["connection_id"]
    second = alice("POST", base, {"name": "B", "spec": compatible(provider),
                                  "api_key": NEW_KEY}).json()["connection_id"]
    secrets = api.platform.admin.secrets
    assert isinstance(secrets, CodecSecrets)
    record = api.platform.admin.model_connection(ALICE, api.space_id, first)
    assert record.sealed_key is not None
    assert secrets.open(api.space_id, first, record.sealed_key) == KEY
    with pytest.raises(PersistenceError, match="failed authentication"):
        secrets.open(api.space_id, second, record.sealed_key)
    other = api.platform.admin.create_space(ALICE, "Other").space_id
    with pytest.raises(PersistenceError):
        secrets.open(other, first, record.sealed_key)


def test_outside_test_mode_discovery_refuses_loopback(tmp_path: Path,
                                                      provider: FakeProvider) -> None:
    production = EmbeddedPlatform.open(tmp_path / "prod")
    try:
        space = production.admin.create_space(ALICE, "Team").space_id
        with pytest.raises(AddressNotAllowed, match="loopback"):
            production.admin.discover_models(ALICE, space, "openai_compatible",
                                             provider.base_url)
    finally:
        production.close()
    assert provider.seen == []


def test_discovery_with_no_base_url_asks_the_providers_own(platform: EmbeddedPlatform) -> None:
    """An empty base_url is the provider's own (DiscoverIn's promise); no network: the
    resolver gives a public address and the transport answers."""
    seen: list[tuple[str, str]] = []

    async def resolve(host: str, port: int) -> list[str]:
        return ["93.184.215.14"]

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((request.headers["host"], request.url.path))
        return httpx.Response(200, json={"data": [{"id": "deepseek-chat"}]})

    platform.admin.discovery = ModelDiscovery(resolver=resolve,
                                              transport=httpx.MockTransport(answer))
    space = platform.admin.create_space(ALICE, "Team").space_id
    found = platform.admin.discover_models(ALICE, space, "deepseek", "", "sk-test")
    assert [m.id for m in found] == ["deepseek-chat"]
    assert seen == [("api.deepseek.com", "/models")]
