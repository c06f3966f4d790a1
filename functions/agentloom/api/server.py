"""The API on a real HTTP server on this machine (``agentloom serve``): each request is
translated into an API Gateway HTTP API (payload 2.0) event and handed to the same
resolver the Lambda uses, so both deployments run one code path.

Beside the resolver, ``GET /api/v1/sessions/{id}/runs/{id}/events`` with
``Accept: text/event-stream`` streams the run's events as Server-Sent Events (``id``:
the event seq, ``event``: its type, ``data``: the event as JSON; a ``Last-Event-ID``
header or ``after`` resumes; an ``end`` event when the run stopped). API Gateway cannot
stream a Lambda response; there clients long-poll the same route with ``wait``.

Only loopback addresses are served (no TLS here).
"""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from agentloom.api._resolver import MAX_BODY_BYTES, ApiResolver
from agentloom.platform.errors import Invalid, PlatformError, TooLarge
from agentloom.platform.sessions import SessionService
from agentloom_runtime.errors import ConfigError

log = logging.getLogger(__name__)
SSE_PATH = re.compile(r"/api/v1/sessions/([^/]+)/runs/([^/]+)/events")
SSE_WAIT_S = 15.0


def check_loopback(host: str) -> str:
    if host == "localhost":
        return host
    try:
        if ipaddress.ip_address(host).is_loopback:
            return host
    except ValueError:
        pass
    raise ConfigError(f"serve listens on loopback addresses only (127.0.0.1, ::1), not "
                      f"{host!r}: it has no TLS; deploy the CDK app to serve a network")


def http_event(method: str, target: str, headers: dict[str, str], body: bytes,
               client: str) -> dict[str, Any]:
    """An API Gateway HTTP API payload 2.0 event for one request."""
    parts = urlsplit(target)
    query: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        query[key] = f"{query[key]},{value}" if key in query else value
    try:
        text, encoded = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode(), True
    path = unquote(parts.path)
    return {
        "version": "2.0", "routeKey": "$default", "rawPath": parts.path,
        "rawQueryString": parts.query, "headers": headers,
        "queryStringParameters": query or None,
        "requestContext": {
            "accountId": "local", "apiId": "agentloom-serve", "domainName": "localhost",
            "domainPrefix": "localhost",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                     "sourceIp": client, "userAgent": headers.get("user-agent", "")},
            "requestId": uuid.uuid4().hex, "routeKey": "$default", "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime()),
            "timeEpoch": int(time.time() * 1000)},
        "body": text or None, "isBase64Encoded": encoded}


class ApiServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, app: ApiResolver, sessions: SessionService, *,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self.sessions = sessions
        super().__init__((check_loopback(host), port), _Handler)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), int(self.server_address[1])
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    def start(self) -> ApiServer:
        self._thread = threading.Thread(target=self.serve_forever, name="agentloom-api",
                                        daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(10)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ApiServer
    server_version = "agentloom-serve"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def _headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in self.headers.items():
            name = key.lower()
            out[name] = f"{out[name]},{value}" if name in out else value
        return out

    def _handle(self, method: str) -> None:
        headers = self._headers()
        try:
            length = int(headers.get("content-length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True
            err = TooLarge(f"the request body is larger than {MAX_BODY_BYTES} bytes",
                           code="request_too_large")
            self._send(err.status, {"Content-Type": "application/json"},
                       json.dumps(err.body()).encode())
            return
        body = self.rfile.read(length) if length else b""
        path = urlsplit(self.path).path
        if method == "GET" and SSE_PATH.fullmatch(path) and \
                "text/event-stream" in headers.get("accept", ""):
            self._sse(headers)
            return
        event = http_event(method, self.path, headers, body, self.client_address[0])
        response = self.server.app.resolve(event, None)
        data = response.get("body") or ""
        raw = base64.b64decode(data) if response.get("isBase64Encoded") else str(data).encode()
        out = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
        for key, values in (response.get("multiValueHeaders") or {}).items():
            out[str(key)] = ",".join(str(v) for v in values)
        self._send(int(response.get("statusCode", 500)), out, raw)

    def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() not in ("content-length", "connection"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if status != 204:
            self.wfile.write(body)

    # -- Server-Sent Events ----------------------------------------------------------------

    def _sse(self, headers: dict[str, str]) -> None:
        match = SSE_PATH.fullmatch(urlsplit(self.path).path)
        assert match is not None
        session_id, run_id = unquote(match.group(1)), unquote(match.group(2))
        query = dict(parse_qsl(urlsplit(self.path).query))
        try:
            who = self.server.app.authenticator.authenticate(headers, {})
            after = int(headers.get("last-event-id") or query.get("after") or 0)
            page = self.server.sessions.events(who, session_id, run_id, after=after)
        except (PlatformError, ValueError) as exc:
            err = exc if isinstance(exc, PlatformError) else Invalid(
                "after / Last-Event-ID must be an integer", code="invalid_field")
            self.close_connection = True
            self._send(err.status, {"Content-Type": "application/json"},
                       json.dumps(err.body()).encode())
            return
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            self._stream(who, session_id, run_id, page)
        except (BrokenPipeError, ConnectionResetError):
            return  # the client went away

    def _stream(self, who: Any, session_id: str, run_id: str, page: Any) -> None:
        while True:
            for item in page.items:
                data = json.dumps(item.model_dump(mode="json"), ensure_ascii=False)
                self.wfile.write(f"id: {item.seq}\nevent: {item.type}\ndata: {data}\n\n"
                                 .encode())
            if page.done:
                end = json.dumps({"status": page.status, "next_after": page.next_after})
                self.wfile.write(f"event: end\ndata: {end}\n\n".encode())
                self.wfile.flush()
                return
            if not page.items:
                self.wfile.write(b": keep-alive\n\n")
            self.wfile.flush()
            page = self.server.sessions.events(who, session_id, run_id,
                                               after=page.next_after, wait=SSE_WAIT_S)
