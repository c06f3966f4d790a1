"""``serve``'s HTTP server under clients that misbehave, with real sockets on 127.0.0.1:
half-sent requests (a slow header, a short body, a byte at a time) are closed after the
read timeout while a normal request is served; past the connection limit a new
connection takes the place of a hanging one, or gets a 503 in the error envelope when
every connection is being answered; long polls and event streams outlast the read
timeout; a client that leaves a long poll is a debug line, not a traceback."""

from __future__ import annotations

import json
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agentloom.api.app import build_app
from agentloom.api.server import ApiServer
from agentloom.local.embedded import EmbeddedPlatform

from .conftest import AGENT_CONFIG, ALICE, Api, Model, wait_for

Serve = Callable[..., tuple[ApiServer, str]]


@pytest.fixture
def serve(platform: EmbeddedPlatform) -> Iterator[Serve]:
    """Starts a server on the platform with the given limits; the token is alice's."""
    started: list[ApiServer] = []
    token = platform.tokens.issue("alice")[1]

    def start(**limits: Any) -> tuple[ApiServer, str]:
        app = build_app(platform.admin, platform.sessions, platform.tokens)
        server = ApiServer(app, platform.sessions, **limits).start()
        started.append(server)
        return server, token

    yield start
    for server in started:
        server.close()


def connect(server: ApiServer) -> socket.socket:
    host, port = server.server_address[:2]
    return socket.create_connection((str(host), int(port)), timeout=10)


def read_all(sock: socket.socket, within: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when it closed."""
    sock.settimeout(within)
    received = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return received, time.monotonic()
        received += chunk


def me(server: ApiServer, token: str) -> httpx.Response:
    return httpx.get(f"{server.url}/api/v1/me", headers={"Authorization": f"Bearer {token}"},
                     timeout=10)


def test_half_sent_requests_are_closed_after_the_read_timeout_while_one_is_served(
        serve: Serve) -> None:
    server, token = serve(read_timeout=1.0, max_connections=32)
    before = threading.active_count()
    head = (f"POST /api/v1/spaces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\n").encode()
    half_sent = {
        "silent": b"",
        "request line": b"GET /api/v1/me HTTP/1.1\r\n",
        "headers": head,
        "body": head + b"Content-Length: 100\r\n\r\n{\"name\": ",
    }
    sockets = {name: connect(server) for name in half_sent}
    started = time.monotonic()
    for name, data in half_sent.items():
        if data:
            sockets[name].sendall(data)
    trickled = connect(server)
    stop = threading.Event()

    def trickle() -> None:  # one byte every 0.2 s: each read is quick, the request is not
        for byte in b"GET /api/v1/me HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 200:
            if stop.wait(0.2):
                return
            try:
                trickled.send(bytes([byte]))
            except OSError:
                return

    dripping = threading.Thread(target=trickle, daemon=True)
    dripping.start()
    time.sleep(0.3)
    assert threading.active_count() > before  # they hold their threads while they hang
    response = me(server, token)
    assert response.status_code == 200 and response.json()["user_id"] == "alice"
    assert time.monotonic() - started < 1.0  # served while they hang
    for name, sock in (*sockets.items(), ("trickled", trickled)):
        answer, closed = read_all(sock, within=5)
        took = closed - started
        assert 0.9 < took < 2.5, (name, took)
        if name == "silent":
            assert answer == b"", answer  # an idle connection is closed without a word
        else:
            status_line, _, rest = answer.partition(b"\r\n")
            assert status_line == b"HTTP/1.1 408 Request Timeout", (name, answer[:200])
            body = json.loads(rest.partition(b"\r\n\r\n")[2])
            assert body["error"]["code"] == "request_timeout", name
        sock.close()
    stop.set()
    dripping.join(5)
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before  # every connection's thread is gone
    assert me(server, token).status_code == 200


def test_past_the_limit_a_hanging_request_makes_room_and_busy_answers_get_503(
        serve: Serve, platform: EmbeddedPlatform) -> None:
    server, token = serve(read_timeout=3.0, max_connections=4)
    hanging = [connect(server) for _ in range(4)]
    for sock in hanging:
        sock.sendall(b"GET /api/v1/me HTTP/1.1\r\n")
    time.sleep(0.5)
    started = time.monotonic()
    for _ in range(3):  # each takes the place of the longest-waiting half-sent request
        assert me(server, token).status_code == 200
    assert time.monotonic() - started < 2.0
    closed = 0
    for sock in hanging:
        answer, when = read_all(sock, within=10)
        if when - started < 2.0:  # made room: closed at once, not at the read timeout
            assert answer.startswith(b"HTTP/1.1 408 "), answer[:100]
            closed += 1
        sock.close()
    assert closed >= 1
    # every slot answering (long polls): a new connection is refused, in the envelope
    space = platform.admin.create_space(ALICE, "Team")
    agent, _ = platform.admin.create_agent(ALICE, space.space_id, "Helper", AGENT_CONFIG)
    platform.admin.publish(ALICE, space.space_id, agent.agent_id)
    session = platform.sessions.create_session(ALICE, space.space_id, agent.agent_id)
    run, _ = platform.sessions.ask(ALICE, session.session_id, "Q slow busy")
    polls = [threading.Thread(target=httpx.get, kwargs={
        "url": f"{server.url}/api/v1/sessions/{session.session_id}/runs/{run.run_id}/events"
               "?after=1000&wait=2", "headers": {"Authorization": f"Bearer {token}"},
        "timeout": 10}) for _ in range(4)]
    for poll in polls:
        poll.start()
    time.sleep(0.6)
    response = me(server, token)
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    assert response.json()["error"]["code"] == "server_busy"
    for poll in polls:
        poll.join()
    assert me(server, token).status_code == 200


def test_long_polls_and_event_streams_outlast_the_read_timeout(
        serve: Serve, platform: EmbeddedPlatform, model: Model) -> None:
    server, token = serve(read_timeout=0.5)
    space = platform.admin.create_space(ALICE, "Team")
    agent, _ = platform.admin.create_agent(ALICE, space.space_id, "Helper", AGENT_CONFIG)
    platform.admin.publish(ALICE, space.space_id, agent.agent_id)
    session = platform.sessions.create_session(ALICE, space.space_id, agent.agent_id)
    run, _ = platform.sessions.ask(ALICE, session.session_id, "Q slow poll")
    auth = {"Authorization": f"Bearer {token}"}
    events = f"{server.url}/api/v1/sessions/{session.session_id}/runs/{run.run_id}/events"

    def started_model() -> Any:  # then nothing follows until the model answers
        page = httpx.get(f"{events}?after=0", headers=auth, timeout=10).json()
        return page["next_after"] if any(i["type"] == "model.started"
                                         for i in page["items"]) else None

    first = wait_for(started_model, what="the model call to start")
    started = time.monotonic()
    page = httpx.get(f"{events}?after={first}&wait=1.5", headers=auth, timeout=10)
    assert page.status_code == 200 and time.monotonic() - started >= 1.4
    lines: list[str] = []
    with httpx.stream("GET", events, headers={**auth, "Accept": "text/event-stream"},
                      timeout=10) as stream:
        assert stream.status_code == 200
        opener = threading.Timer(1.5, model.open)  # three read timeouts into the stream
        opener.start()
        lines.extend(stream.iter_lines())
        opener.join()
    assert "event: run.finished" in lines and "event: end" in lines


def test_a_client_that_leaves_a_long_poll_is_a_debug_line_not_a_traceback(
        api: Api, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="agentloom.api.server")
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    run = alice.ask(session.session_id, "Q slow and left")
    after = alice.events(session.session_id, run.run_id).next_after
    host, port = api.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(f"GET /api/v1/sessions/{session.session_id}/runs/{run.run_id}/events"
                 f"?after={after}&wait=1 HTTP/1.1\r\nHost: x\r\n"
                 f"Authorization: Bearer {api.tokens['alice']}\r\n\r\n".encode())
    time.sleep(0.2)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # a reset: the answer written in a second has nowhere to go
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(
            "went away" in r.getMessage() for r in caplog.records):
        time.sleep(0.05)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Reset" not in err, err
    gone = [r for r in caplog.records if "went away" in r.getMessage()]
    assert gone and all(r.levelno == logging.DEBUG for r in gone)
    assert alice.run(session.session_id, run.run_id).status in ("queued", "running")
