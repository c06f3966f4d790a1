"""A response that may turn into Server-Sent Events: what ``agentloom serve`` hands the
resolver with a POST whose ``Accept`` takes ``text/event-stream``, so a route can send
messages before its answer (the MCP facade's progress notifications) through the one
code path every request takes (the gate, authentication, routing).

A route that never calls ``send`` answers as usual (the resolver's response, JSON). The
first ``send`` commits the response: ``200`` with ``Content-Type: text/event-stream``,
one ``event: message`` per message; the route's own answer then goes out as the last
event (``finish``) and the connection closes. A client that goes away makes ``send``
return False (``gone``): the route stops early, nothing is logged as an error. Lambda
has no such stream (API Gateway cannot stream a Lambda response): there ``stream`` is
None and routes answer JSON only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from io import BufferedIOBase
from typing import Any, Protocol

log = logging.getLogger(__name__)
_GONE = (ConnectionError, TimeoutError)


class ReplyStream(Protocol):
    """What a route sees of a streamable response (``ApiResolver.reply_stream()``)."""

    def send(self, message: Mapping[str, Any]) -> bool:
        """Send ``message`` as one event; False when the client went away."""
        ...


class StreamHandler(Protocol):
    """What ``SseReply`` needs of ``serve``'s request handler (``server._Handler``)."""

    wfile: BufferedIOBase

    def event_stream_headers(self) -> None: ...


class SseReply:
    """The server side of ``ReplyStream`` over one HTTP/1.1 connection."""

    def __init__(self, handler: StreamHandler) -> None:
        self._handler = handler
        self.started = False
        self.gone = False

    def send(self, message: Mapping[str, Any]) -> bool:
        if self.gone:
            return False
        try:
            if not self.started:
                self._start()
            self._write(json.dumps(message, ensure_ascii=False, separators=(",", ":")))
        except _GONE as err:
            log.debug("the client left an event stream: %r", err)
            self.gone = True
        return not self.gone

    def finish(self, body: bytes) -> None:
        """The route's answer (a JSON document) as the last event."""
        if self.gone:
            return
        try:
            self._write(body.decode("utf-8"))
        except _GONE as err:
            log.debug("the client left before the last event: %r", err)
            self.gone = True

    def _start(self) -> None:
        self._handler.event_stream_headers()
        self.started = True

    def _write(self, data: str) -> None:
        lines = "".join(f"data: {line}\n" for line in data.splitlines() or [""])
        self._handler.wfile.write(f"event: message\n{lines}\n".encode())
        self._handler.wfile.flush()
