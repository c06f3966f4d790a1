"""Discovery over real sockets: the local OpenAI-compatible server, and a small scripted
HTTP server for what a hostile or broken provider can send (redirects, huge or slow
bodies, bodies that echo the key)."""

from __future__ import annotations

import datetime
import json
import ssl
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentloom.models import (
    AddressNotAllowed,
    DiscoveryError,
    ModelDiscovery,
    ProviderAuthFailed,
    ProviderRedirected,
    ProviderResponseTooLarge,
    ProviderStatusError,
    ProviderUnreachable,
    discover,
)
from agentloom_runtime.testing import OpenAICompatibleServer

KEY = "sk-local-discovery-key-0123456789"
LOCAL = ModelDiscovery(allow_loopback=True, timeout=5.0)


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    length: bool = True  # send Content-Length (else the body ends when the socket closes)
    trickle: float = 0.0  # seconds between bytes


class ScriptedHTTP:
    """path -> Reply; records (path, headers) of every request."""

    def __init__(self, routes: dict[str, Reply], *, tls: ssl.SSLContext | None = None) -> None:
        self.routes = routes
        self.received: list[tuple[str, dict[str, str]]] = []
        self.stopping = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                owner.received.append((self.path, {k.lower(): v for k, v in
                                                   self.headers.items()}))
                reply = owner.routes.get(self.path, Reply(404, b'{"error": {}}'))
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.length:
                    self.send_header("Content-Length", str(len(reply.body)))
                else:
                    self.close_connection = True
                self.end_headers()
                if not reply.trickle:
                    self.wfile.write(reply.body)
                    return
                for i in range(len(reply.body)):
                    self.wfile.write(reply.body[i:i + 1])
                    self.wfile.flush()
                    if owner.stopping.wait(reply.trickle):
                        return

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> ScriptedHTTP:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def listing(*ids: str, **fields: Any) -> bytes:
    return json.dumps({"object": "list", "data": [
        {"id": i, "object": "model", "owned_by": "local", **fields} for i in ids]}).encode()


def everything_about(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc)) + repr(exc)
    if isinstance(exc, DiscoveryError):
        text += json.dumps(exc.to_dict())
    return text


@pytest.fixture
def dead_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    proxy = "http://127.0.0.1:9"  # the discard port: nothing listens there
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy",
                 "all_proxy"):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    yield proxy


async def test_lists_the_local_servers_models():
    with OpenAICompatibleServer(model="local-chat") as srv:
        (model,) = await LOCAL.discover("openai_compatible", srv.base_url, KEY)
    assert (model.id, model.owned_by, model.selectable) == ("local-chat", "agentloom-testing",
                                                            True)
    assert model.budget is not None
    assert model.budget.context_window.source == "platform_default"
    assert "platform_default_window" in [w.code for w in model.budget.warnings]


async def test_a_catalogued_id_behind_a_local_server_never_gets_the_manifest():
    with OpenAICompatibleServer(model="gpt-4o-mini") as srv:
        (model,) = await LOCAL.discover("openai_compatible", srv.base_url, KEY)
    assert model.budget is not None
    assert model.budget.context_window.source == "platform_default"
    assert model.budget.context_window.value == 32_768


async def test_proxy_environment_is_ignored(dead_proxy):
    with OpenAICompatibleServer(model="local-chat") as srv:
        models = await LOCAL.discover("openai_compatible", srv.base_url, KEY)
    assert [m.id for m in models] == ["local-chat"]


async def test_loopback_is_refused_unless_allowed():
    with OpenAICompatibleServer(model="local-chat") as srv:
        with pytest.raises(AddressNotAllowed) as caught:
            await discover("openai_compatible", srv.base_url, KEY)
        assert caught.value.details == {"reason": "loopback"}
        with pytest.raises(AddressNotAllowed):  # a name that resolves to loopback
            await discover("openai_compatible", f"http://localhost:{srv.port}/v1", KEY)
        with pytest.raises(AddressNotAllowed):
            await ModelDiscovery(allow_private=True).discover(
                "openai_compatible", srv.base_url, KEY)


@pytest.mark.parametrize(("base_url", "reason"), [
    ("http://169.254.169.254/latest", "metadata"),
    ("http://[fd00:ec2::254]/latest", "metadata"),
    ("http://[::ffff:169.254.169.254]/v1", "metadata"),
    ("http://169.254.10.20:8080/v1", "link_local"),
    ("http://[fe80::1]:8080/v1", "link_local"),
    ("http://0.0.0.0:8080/v1", "unspecified"),
])
async def test_link_local_and_metadata_are_refused_even_when_everything_else_is_allowed(
        base_url, reason):
    permissive = ModelDiscovery(allow_loopback=True, allow_private=True, timeout=2.0)
    started = time.monotonic()
    with pytest.raises(AddressNotAllowed) as caught:
        await permissive.discover("openai_compatible", base_url, KEY)
    assert caught.value.code == "address_not_allowed"
    assert caught.value.details == {"reason": reason}
    assert time.monotonic() - started < 1.0  # refused before any connection attempt


@pytest.mark.parametrize("base_url", ["http://10.0.0.1/v1", "http://192.168.1.20:8000/v1",
                                      "http://[fd12:3456::1]/v1", "http://100.64.1.1/v1"])
async def test_private_addresses_are_refused_outside_tests(base_url):
    with pytest.raises(AddressNotAllowed) as caught:
        await LOCAL.discover("openai_compatible", base_url, KEY)
    assert caught.value.details == {"reason": "private"}


async def test_the_connection_is_pinned_to_the_checked_address():
    calls: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"] if len(calls) == 1 else ["169.254.169.254"]

    with ScriptedHTTP({"/v1/models": Reply(body=listing("pinned"))}) as srv:
        port = srv.server.server_address[1]
        discovery = ModelDiscovery(allow_loopback=True, resolver=resolver)
        (model,) = await discovery.discover("openai_compatible",
                                            f"http://models.test:{port}/v1", KEY)
        assert model.id == "pinned"
        assert calls == ["models.test"]
        ((path, headers),) = srv.received
        assert path == "/v1/models"
        assert headers["host"] == f"models.test:{port}"
        assert headers["authorization"] == f"Bearer {KEY}"


async def test_a_redirect_is_not_followed():
    with ScriptedHTTP({
            "/v1/models": Reply(302, b"", {"Location": "/elsewhere/models"}),
            "/elsewhere/models": Reply(body=listing("should-not-be-read"))}) as srv:
        with pytest.raises(ProviderRedirected) as caught:
            await LOCAL.discover("openai_compatible", f"{srv.url}/v1", KEY)
        assert [path for path, _ in srv.received] == ["/v1/models"]
    assert caught.value.details == {"status": 302}


async def test_a_redirect_to_the_metadata_address_is_not_followed():
    target = "http://169.254.169.254/latest/meta-data/"
    with ScriptedHTTP({"/v1/models": Reply(307, b"", {"Location": target})}) as srv:
        with pytest.raises(ProviderRedirected):
            await LOCAL.discover("openai_compatible", f"{srv.url}/v1", KEY)


@pytest.mark.parametrize("length", [True, False])
async def test_the_response_size_is_capped(length):
    body = listing(*(f"model-{i:05d}" for i in range(5_000)))
    discovery = ModelDiscovery(allow_loopback=True, max_response_bytes=64 * 1024)
    with ScriptedHTTP({"/v1/models": Reply(body=body, length=length)}) as srv:
        with pytest.raises(ProviderResponseTooLarge) as caught:
            await discovery.discover("openai_compatible", f"{srv.url}/v1", KEY)
    assert caught.value.details == {"reason": "too_large", "limit": 64 * 1024}


async def test_a_trickling_server_hits_the_total_deadline():
    discovery = ModelDiscovery(allow_loopback=True, timeout=0.6)
    started = time.monotonic()
    with ScriptedHTTP({"/v1/models": Reply(body=listing("slow"), trickle=0.05)}) as srv:
        with pytest.raises(ProviderUnreachable) as caught:
            await discovery.discover("openai_compatible", f"{srv.url}/v1", KEY)
    assert caught.value.details == {"reason": "deadline"}
    assert time.monotonic() - started < 3.0


async def test_nothing_listening_is_unreachable():
    with ScriptedHTTP({}) as srv:
        url = srv.url
    with pytest.raises(ProviderUnreachable) as caught:
        await LOCAL.discover("openai_compatible", f"{url}/v1", KEY)
    assert caught.value.details == {"reason": "connect"}


@pytest.mark.parametrize(("status", "error"), [(401, ProviderAuthFailed),
                                               (500, ProviderStatusError)])
async def test_a_provider_body_holding_the_key_never_reaches_the_error(status, error):
    echo = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}",
                                 "type": "invalid_request_error", "code": KEY}}).encode()
    with ScriptedHTTP({"/v1/models": Reply(status, echo,
                                           {"Content-Type": "application/json"})}) as srv:
        with pytest.raises(error) as caught:
            await LOCAL.discover("openai_compatible", f"{srv.url}/v1", KEY)
    text = everything_about(caught.value)
    assert KEY not in text and "Incorrect API key" not in text
    assert caught.value.details == {"status": status}


async def test_an_invalid_body_holding_the_key_never_reaches_the_error():
    with ScriptedHTTP({"/v1/models": Reply(body=b"<html>" + KEY.encode())}) as srv:
        with pytest.raises(DiscoveryError) as caught:
            await LOCAL.discover("openai_compatible", f"{srv.url}/v1", KEY)
    assert caught.value.code == "provider_response_invalid"
    assert KEY not in everything_about(caught.value)


async def test_provider_list_fields_are_used_with_their_source():
    body = listing("local-70b", context_length=65_536, max_completion_tokens=2_048)
    with ScriptedHTTP({"/v1/models": Reply(body=body)}) as srv:
        (model,) = await LOCAL.discover("openai_compatible", f"{srv.url}/v1", KEY)
    assert model.budget is not None
    assert (model.budget.context_window.value, model.budget.context_window.source) == \
        (65_536, "provider")
    assert model.budget.max_output_tokens.value == 2_048


def _self_signed(tmp_path: Path, name: str) -> tuple[str, str]:
    """A certificate for ``name`` only (no IP address in it) and its key, as PEM files."""
    pytest.importorskip("cryptography")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


async def test_https_pinning_keeps_the_name_for_sni_and_certificate_checks(tmp_path):
    cert, key = _self_signed(tmp_path, "models.test")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    client_context = ssl.create_default_context(cafile=cert)
    names: list[str | None] = []

    def sni(sock: ssl.SSLObject, name: str | None, context: ssl.SSLContext) -> None:
        names.append(name)

    server_context.sni_callback = sni

    async def resolver(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    with ScriptedHTTP({"/v1/models": Reply(body=listing("tls-model"))},
                      tls=server_context) as srv:
        port = srv.server.server_address[1]
        discovery = ModelDiscovery(allow_loopback=True, resolver=resolver,
                                   transport=httpx.AsyncHTTPTransport(verify=client_context))
        (model,) = await discovery.discover("openai_compatible",
                                            f"https://models.test:{port}/v1", KEY)
        assert model.id == "tls-model"
        assert names == ["models.test"]
        assert srv.received[0][1]["host"] == f"models.test:{port}"
        # the same server under another name fails the certificate check: no bypass
        with pytest.raises(ProviderUnreachable):
            await discovery.discover("openai_compatible", f"https://other.test:{port}/v1", KEY)
