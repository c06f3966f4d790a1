"""The limits of ``serve``'s HTTP server on its connections: how long a request may take
to arrive, and what a connection beyond the server's capacity gets.

``ReadDeadline`` is a connection's raw reader under one deadline: the server arms it when
it starts waiting for a request (an idle keep-alive connection, the request line, the
headers, then the body all count) and disarms it once the body is read, so a request
sent a byte at a time cannot hold its thread past the deadline whatever the pace; past
it, a read raises ``ReadTimeout``. Responses (long polls, Server-Sent Events) are written
under a separate write timeout and are never cut by the read deadline. While armed, a
reader is in ``Readers``: a server with no free slot for a new connection closes the
one that has waited longest for its request (half-sent or idle) instead of refusing
the newcomer, so requests that arrive whole are served while others hang.

``BusyAnswers`` answers the connections the server has no room for (503 ``server_busy``
in the API's error envelope, with ``Retry-After``) on one thread whatever their number,
and closes each gently (so the client reads the answer instead of a reset).
"""

from __future__ import annotations

import io
import json
import queue
import selectors
import socket
import threading
import time

from agentloom.platform.errors import PlatformError
from agentloom_runtime.errors import AgentLoomError


class ReadTimeout(AgentLoomError):
    """The request did not arrive before the deadline; ``received``: bytes it had sent."""

    code = "request_timeout"

    def __init__(self, received: int) -> None:
        super().__init__(f"request not received in time ({received} bytes)")
        self.received = received


class Readers:
    """The connections waiting for a request or reading one, by when they started: those
    a full server closes, oldest first, to make room for a new connection (a request
    that is being answered is never among them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: dict[ReadDeadline, float] = {}

    def add(self, reader: ReadDeadline) -> None:
        with self._lock:
            self._since[reader] = time.monotonic()

    def remove(self, reader: ReadDeadline) -> None:
        with self._lock:
            self._since.pop(reader, None)

    def evict_oldest(self, *, waiting_at_least: float) -> bool:
        """Close the reading side of the longest-waiting connection, if it has waited
        ``waiting_at_least`` seconds; True if one was."""
        with self._lock:
            if not self._since:
                return False
            oldest = min(self._since, key=self._since.__getitem__)
            if time.monotonic() - self._since[oldest] < waiting_at_least:
                return False
            del self._since[oldest]
        oldest.evict()
        return True


class ReadDeadline(io.RawIOBase):
    def __init__(self, sock: socket.socket, write_timeout: float, readers: Readers) -> None:
        super().__init__()
        self.sock = sock
        self.write_timeout = write_timeout
        self.readers = readers
        self.deadline: float | None = None
        self.received = 0
        self.evicted = False

    def readable(self) -> bool:
        return True

    def arm(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.received = 0
        self.readers.add(self)

    def disarm(self) -> None:
        """The request is read: what follows is the response, under the write timeout."""
        if self.deadline is not None:
            self.deadline = None
            self.readers.remove(self)
            self.sock.settimeout(self.write_timeout)

    def evict(self) -> None:
        """Make room: the pending read ends (as a timeout) and the connection closes."""
        self.evicted = True
        try:
            self.sock.shutdown(socket.SHUT_RD)
        except OSError:
            pass

    def close(self) -> None:
        self.readers.remove(self)
        super().close()

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self.deadline is not None:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0 or self.evicted:
                raise ReadTimeout(self.received)
            self.sock.settimeout(remaining)
        try:
            count = self.sock.recv_into(buffer)
        except TimeoutError:
            if self.deadline is None:
                raise
            raise ReadTimeout(self.received) from None
        if not count and self.evicted and self.deadline is not None:
            raise ReadTimeout(self.received)
        self.received += count
        return count


def error_bytes(status: int, reason: str, err: PlatformError,
                headers: dict[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 response carrying ``err`` in the API's error envelope, closing."""
    body = json.dumps(err.body()).encode()
    lines = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json",
             f"Content-Length: {len(body)}", "Connection: close",
             *(f"{k}: {v}" for k, v in (headers or {}).items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class BusyAnswers:
    """Answers the connections a server has no room for, all on one thread: each gets
    ``response`` at once (a small write that does not block), then its reading side is
    drained until the client closes or ``linger`` seconds pass, so the client reads the
    answer instead of a reset. At most ``max_pending`` linger at once; more are closed."""

    def __init__(self, response: bytes, *, linger: float = 1.0,
                 max_pending: int = 512) -> None:
        self.response = response
        self.linger = linger
        self.max_pending = max_pending
        self._queue: queue.SimpleQueue[socket.socket] = queue.SimpleQueue()
        self._selector = selectors.DefaultSelector()
        self._until: dict[socket.socket, float] = {}
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agentloom-api-busy",
                                        daemon=True)
        self._thread.start()

    def answer(self, sock: socket.socket) -> None:
        try:
            sock.setblocking(False)
            sock.send(self.response)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            sock.close()
            return
        self._queue.put(sock)

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._closed.is_set():
            self._take_new()
            for key, _ in self._selector.select(timeout=0.05):
                self._drain(key.fileobj)  # type: ignore[arg-type]
            now = time.monotonic()
            for sock in [s for s, until in self._until.items() if until <= now]:
                self._drop(sock)
        for sock in list(self._until):
            self._drop(sock)
        self._selector.close()

    def _take_new(self) -> None:
        while True:
            try:
                sock = self._queue.get_nowait()
            except queue.Empty:
                return
            if len(self._until) >= self.max_pending:
                sock.close()
                continue
            self._until[sock] = time.monotonic() + self.linger
            self._selector.register(sock, selectors.EVENT_READ)

    def _drain(self, sock: socket.socket) -> None:
        try:
            if sock.recv(65536):
                return
        except BlockingIOError:
            return
        except OSError:
            pass
        self._drop(sock)  # the client closed (or failed): done

    def _drop(self, sock: socket.socket) -> None:
        self._until.pop(sock, None)
        self._selector.unregister(sock)
        sock.close()
