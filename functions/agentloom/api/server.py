"""The API on a real HTTP server on this machine (``agentloom serve``): each request is
translated into an API Gateway HTTP API (payload 2.0) event and handed to the same
resolver the Lambda uses, so both deployments run one code path.

Beside the resolver, ``GET /api/v1/sessions/{id}/runs/{id}/events`` with
``Accept: text/event-stream`` streams the run's events as Server-Sent Events (``id``:
the event seq, ``event``: its type, ``data``: the event as JSON; a ``Last-Event-ID``
header or ``after`` resumes; an ``end`` event when the run stopped). A stream open
``stream_limit`` seconds (default 5 minutes) ends without ``end`` so no reader holds a
connection slot for a whole run: the client reconnects from its last event, as it does
after any dropped connection. API Gateway cannot
stream a Lambda response; there clients long-poll the same route with ``wait``. A POST
that accepts ``text/event-stream`` goes to the resolver with a stream
(``agentloom.api._streaming``): a route may send events before its answer (the MCP
facade's progress notifications); one that does not answers as usual.

Only loopback addresses are served (no TLS here).

Limits (``ApiServer``'s keyword arguments): a request must arrive whole, headers and
body, within ``read_timeout`` seconds of the server starting to wait for it (an idle
keep-alive connection included); past it, the connection is closed (408
``request_timeout`` if part of a request had come). At most ``max_connections``
connections are served at once, one thread each. When all are taken, a new connection
takes the place of the one that has waited longest for its request (half-sent or idle:
closed, 408); when every one is being answered (long polls, event streams), the new one
is answered 503 ``server_busy`` with ``Retry-After`` and closed. Responses are written under
``write_timeout`` per write: a long poll (up to 20 s) or an event stream runs as long as
its client reads. A method the server does not know is 501 and every other error the
HTTP layer finds (a bad request line, headers too long) is the API's JSON error envelope
too; a client that goes away mid-answer is logged at debug, never as a traceback.
"""

from __future__ import annotations

import base64
import io
import ipaddress
import json
import logging
import re
import socket
import sys
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from agentloom.api import console_assets
from agentloom.api._connections import (
    BusyAnswers,
    ReadDeadline,
    Readers,
    ReadTimeout,
    error_bytes,
)
from agentloom.api._resolver import MAX_BODY_BYTES, ApiResolver
from agentloom.api._streaming import SseReply
from agentloom.api.console_login import SESSION_PATH, ConsoleLogins
from agentloom.platform.errors import (
    BadRequest,
    Invalid,
    MethodNotAllowed,
    PlatformError,
    TooLarge,
    Unavailable,
)
from agentloom.platform.sessions import SessionService
from agentloom_runtime.errors import ConfigError

log = logging.getLogger(__name__)
SSE_PATH = re.compile(r"/api/v1/sessions/([^/]+)/runs/([^/]+)/events")
SSE_WAIT_S = 15.0
STREAM_LIMIT_S = 300.0
READ_TIMEOUT_S = 10.0
WRITE_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 64
_EVICTABLE_AFTER_S = 0.2  # a connection waiting this long for its request may make room
_GONE = (ConnectionError, TimeoutError)  # the client went away or stopped reading
# the HTTP layer's own errors (before the resolver), as the API's error codes
_HTTP_CODES = {400: "bad_request", 408: "request_timeout", 413: "request_too_large",
               414: "uri_too_long", 431: "headers_too_large",
               501: "method_not_implemented", 505: "http_version_not_supported"}


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
                 host: str = "127.0.0.1", port: int = 0,
                 read_timeout: float = READ_TIMEOUT_S, write_timeout: float = WRITE_TIMEOUT_S,
                 max_connections: int = MAX_CONNECTIONS,
                 stream_limit: float = STREAM_LIMIT_S,
                 logins: ConsoleLogins | None = None,
                 console_config: dict[str, Any] | None = None) -> None:
        self.app = app
        self.logins = logins  # the console's login-link exchange (None: no such route)
        self.console_config = console_config  # what the console's /config.json says
        self.sessions = sessions
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.max_connections = max_connections
        self.stream_limit = stream_limit  # an event stream's longest life, seconds
        self._slots = threading.BoundedSemaphore(max_connections)
        self.readers = Readers()
        self._busy: BusyAnswers | None = None  # started by the first connection refused
        super().__init__((check_loopback(host), port), _Handler)
        self._thread: threading.Thread | None = None

    # -- one thread per connection, at most max_connections ------------------------------

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False) and not self._make_room():
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _make_room(self) -> bool:
        """A slot for a new connection: the one waiting longest for its request is closed
        (408), if any has waited a moment; False when every slot is answering."""
        if not self.readers.evict_oldest(waiting_at_least=_EVICTABLE_AFTER_S):
            return False
        return self._slots.acquire(timeout=1.0)

    def _refuse(self, request: socket.socket) -> None:
        if self._busy is None:
            busy = Unavailable(f"the server is serving {self.max_connections} connections, "
                               f"its limit; try again in a moment", code="server_busy")
            self._busy = BusyAnswers(error_bytes(503, "Service Unavailable", busy,
                                                 {"Retry-After": "1"}))
        self._busy.answer(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        err = sys.exc_info()[1]
        if isinstance(err, _GONE):
            log.debug("client %s went away: %r", client_address[0], err)
            return
        log.error("error serving %s", client_address[0], exc_info=True)

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
        if self._busy is not None:
            self._busy.close()
        if self._thread is not None:
            self._thread.join(10)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    default_request_version = "HTTP/1.1"  # no HTTP/0.9: every answer has a status line
    server: ApiServer
    server_version = "agentloom-serve"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)

    # -- every request is read under the server's read deadline --------------------------

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the stdlib's reader; reads go through the deadline instead
        self._reads = ReadDeadline(self.connection, self.server.write_timeout,
                                   self.server.readers)
        self.rfile = io.BufferedReader(self._reads)

    def handle_one_request(self) -> None:
        self._reads.arm(self.server.read_timeout)
        try:
            super().handle_one_request()
        except ReadTimeout as timeout:
            self.close_connection = True
            log.debug("%s: %s", self.address_string(), timeout)
            if timeout.received:  # an idle connection is closed without a word
                for name in ("requestline", "request_version", "command"):
                    if not hasattr(self, name):  # the request line did not come whole
                        setattr(self, name, "")
                self.send_error(408)

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """The HTTP layer's errors (a bad request line, an unknown method, a timeout), in
        the API's error envelope."""
        self._reads.disarm()
        self.log_error("code %d, message %s", code, message or "")
        err = PlatformError(message or HTTPStatus(code).phrase,
                            code=_HTTP_CODES.get(code, "http_error"))
        self.close_connection = True
        self._send(code, {"Content-Type": "application/json"}, json.dumps(err.body()).encode())

    # -- every method goes to the resolver (405 with Allow for one a path does not take) --

    def do_GET(self) -> None:
        self._handle("GET")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_OPTIONS(self) -> None:
        self._handle("OPTIONS")

    def do_TRACE(self) -> None:
        self._handle("TRACE")

    def do_CONNECT(self) -> None:
        self._handle("CONNECT")

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
            self._reads.disarm()
            self.close_connection = True
            err = TooLarge(f"the request body is larger than {MAX_BODY_BYTES} bytes",
                           code="request_too_large")
            self._send(err.status, {"Content-Type": "application/json"},
                       json.dumps(err.body()).encode())
            return
        body = self.rfile.read(length) if length else b""
        self._reads.disarm()
        if len(body) < length:  # the client closed before its body was whole
            self.close_connection = True
            return
        path = urlsplit(self.path).path
        if path == SESSION_PATH and self.server.logins is not None:
            self._console_session(method, headers, body)
            return
        if method in ("GET", "HEAD") and console_assets.is_console_path(path):
            self._send(*console_assets.answer(path, self.server.console_config))
            return
        if method == "GET" and SSE_PATH.fullmatch(path) and \
                "text/event-stream" in headers.get("accept", ""):
            self._sse(headers)
            return
        event = http_event(method, self.path, headers, body, self.client_address[0])
        # a route may stream its answer, this long at most (ApiResolver.stream)
        event["requestContext"]["agentloomStreams"] = self.server.stream_limit
        stream = SseReply(self) if method == "POST" and \
            "text/event-stream" in headers.get("accept", "") else None
        response = self.server.app.resolve(event, None, stream=stream)
        chunks = self.server.app.take_stream()
        if chunks is not None:
            self._send_stream(response, chunks)
            return
        data = response.get("body") or ""
        raw = base64.b64decode(data) if response.get("isBase64Encoded") else str(data).encode()
        if stream is not None and stream.started:  # the route sent events: its answer last
            stream.finish(raw)
            return
        out = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
        for key, values in (response.get("multiValueHeaders") or {}).items():
            out[str(key)] = ",".join(str(v) for v in values)
        self._send(int(response.get("statusCode", 500)), out, raw)

    def _console_session(self, method: str, headers: dict[str, str], body: bytes) -> None:
        """``POST /console/session`` trades a login link's code for a console token;
        ``DELETE`` revokes the console token the request carries (console_login)."""
        logins = self.server.logins
        assert logins is not None
        json_headers = {"Content-Type": "application/json", "Cache-Control": "no-store"}
        try:
            if method == "POST":
                try:
                    parsed = json.loads(body or b"{}")
                except ValueError:
                    raise BadRequest("the request body is not valid JSON",
                                     code="malformed_json") from None
                if not isinstance(parsed, dict):
                    raise BadRequest('the body must be a JSON object: {"code": "agl_..."}',
                                     code="malformed_json")
                self._send(200, json_headers, json.dumps(logins.exchange(parsed)).encode())
            elif method == "DELETE":
                logins.sign_out(headers)
                self._send(204, json_headers, b"")
            else:
                raise MethodNotAllowed(f"{method} is not allowed here (POST or DELETE)",
                                       code="method_not_allowed")
        except PlatformError as err:
            allow = {"Allow": "POST, DELETE"} if err.status == 405 else {}
            self._send(err.status, {**json_headers, **allow}, json.dumps(err.body()).encode())

    def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() not in ("content-length", "connection"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if status != 204 and self.command != "HEAD":
            self.wfile.write(body)

    def _send_stream(self, response: dict[str, Any], chunks: Any) -> None:
        """A route's streamed answer (``ApiResolver.stream``): its status and headers, then
        each chunk as it comes, until the route's stream ends or the client leaves."""
        self.close_connection = True
        self.send_response(int(response.get("statusCode", 200)))
        for key, value in (response.get("headers") or {}).items():
            if str(key).lower() not in ("content-length", "connection"):
                self.send_header(str(key), str(value))
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
        except _GONE as err:
            log.debug("%s left a streamed answer: %r", self.address_string(), err)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    # -- Server-Sent Events ----------------------------------------------------------------

    def _sse(self, headers: dict[str, str]) -> None:
        match = SSE_PATH.fullmatch(urlsplit(self.path).path)
        assert match is not None
        session_id, run_id = unquote(match.group(1)), unquote(match.group(2))
        query = dict(parse_qsl(urlsplit(self.path).query))
        try:
            who = self.server.app.authenticator.authenticate(headers, {})
            after = _cursor(headers, query)
            page = self.server.sessions.events(who, session_id, run_id, after=after)
        except PlatformError as err:
            self.close_connection = True
            self._send(err.status, {"Content-Type": "application/json"},
                       json.dumps(err.body()).encode())
            return
        self.close_connection = True
        self.event_stream_headers()
        try:
            self._stream(who, session_id, run_id, page)
        except _GONE as err:
            log.debug("%s left the event stream of %s: %r", self.address_string(), run_id,
                      err)

    def event_stream_headers(self) -> None:
        """The 200 of every event stream served here (the run's events, a route's
        ``ReplyStream``); the connection closes when the stream ends."""
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache, no-transform")
        self.send_header("Connection", "close")
        self.end_headers()

    def _stream(self, who: Any, session_id: str, run_id: str, page: Any) -> None:
        ends = time.monotonic() + self.server.stream_limit
        while True:
            for item in page.items:
                data = json.dumps(item.model_dump(mode="json"), ensure_ascii=False)
                self.wfile.write(f"id: {item.seq}\nevent: {item.type}\ndata: {data}\n\n"
                                 .encode())
            if page.done:
                end = json.dumps({"status": page.status, "next_after": page.next_after,
                                  "way_out": page.way_out})
                self.wfile.write(f"event: end\ndata: {end}\n\n".encode())
                self.wfile.flush()
                return
            if not page.items:
                self.wfile.write(b": keep-alive\n\n")
            self.wfile.flush()
            left = ends - time.monotonic()
            if left <= 0:  # its time is up: the client reconnects from its last event
                return
            page = self.server.sessions.events(who, session_id, run_id,
                                               after=page.next_after,
                                               wait=min(SSE_WAIT_S, left))


def _cursor(headers: dict[str, str], query: dict[str, str]) -> int:
    """Where an event stream resumes: ``Last-Event-ID`` (a reconnecting browser's) or
    ``after``; a 422 names the one that is not an event's seq."""
    if "last-event-id" in headers:
        field, value = "header.last-event-id", headers["last-event-id"]
    else:
        field, value = "query.after", query.get("after", "0")
    try:
        after = int(value.strip()) if value.strip().isdigit() else -1
    except ValueError:
        after = -1
    if after < 0:
        message = "an event's seq (an integer >= 0)"
        raise Invalid(f"{field}: {message}", code="invalid_field",
                      details={"fields": [{"field": field, "message": message}]})
    return after
