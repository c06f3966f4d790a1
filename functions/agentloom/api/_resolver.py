"""The Powertools HTTP API resolver, safe for concurrent requests, with the gate every
request passes before routing.

Powertools keeps the current event on a class attribute (``BaseRouter.current_event``)
and the request context on the resolver: one request at a time, as in Lambda. ``serve``
handles requests on many threads (long polls wait up to 20 s), so this resolver keeps
both per thread. ``resolve`` is Powertools' own, minus that global assignment; it
relies on ``_to_proxy_event``, ``_resolve`` and ``_build_response`` (pinned: powertools
3.x).

The gate (the same in Lambda and in ``serve``), in order: a body over ``max_body``
bytes is 413; a body that is not UTF-8 is 400; then the caller is authenticated (401 for
anything but the public paths: no route, no body parsing, nothing is revealed to an
anonymous caller). The principal is in the thread's context for the routes.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from agentloom.platform.errors import BadRequest, PlatformError, TooLarge
from agentloom.platform.identity import Authenticator, Principal

MAX_BODY_BYTES = 1024 * 1024
PUBLIC_PATHS = frozenset({"/api/v1/health"})


def error_response(err: PlatformError) -> dict[str, Any]:
    return {"statusCode": err.status, "headers": {"Content-Type": "application/json"},
            "body": json.dumps(err.body()), "isBase64Encoded": False}


class ApiResolver(APIGatewayHttpResolver):
    def __init__(self, authenticator: Authenticator, *, max_body: int = MAX_BODY_BYTES,
                 **kwargs: Any) -> None:
        self._local = threading.local()
        super().__init__(**kwargs)
        self.authenticator = authenticator
        self.max_body = max_body

    # -- per-thread request state ------------------------------------------------------

    @property
    def current_event(self) -> Any:
        return self._local.event

    @current_event.setter
    def current_event(self, value: Any) -> None:
        self._local.event = value

    @property
    def lambda_context(self) -> Any:
        return getattr(self._local, "lambda_context", None)

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._local.lambda_context = value

    @property
    def context(self) -> dict[str, Any]:
        found: dict[str, Any] | None = getattr(self._local, "context", None)
        if found is None:
            found = {}
            self._local.context = found
        return found

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._local.context = value

    def principal(self) -> Principal:
        who = self.context.get("principal")
        if not isinstance(who, Principal):  # pragma: no cover (the gate sets it)
            raise RuntimeError("no principal: the request did not pass the gate")
        return who

    # -- resolving -----------------------------------------------------------------------

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        try:
            principal = self._gate(event)
        except PlatformError as err:
            return error_response(err)
        self.current_event = self._to_proxy_event(dict(event))
        self.lambda_context = context
        try:
            if principal is not None:
                self.context["principal"] = principal
            return self._build_response(self._resolve())
        finally:
            self.context.clear()

    def _gate(self, event: Mapping[str, Any]) -> Principal | None:
        body = event.get("body")
        if isinstance(body, str) and body:
            raw = _raw_body(body, bool(event.get("isBase64Encoded")))
            if len(raw) > self.max_body:
                raise TooLarge(f"the request body is larger than {self.max_body} bytes",
                               code="request_too_large")
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                raise BadRequest("the request body is not UTF-8 text",
                                 code="invalid_encoding") from None
        path = str(((event.get("requestContext") or {}).get("http") or {}).get("path")
                   or event.get("rawPath") or "")
        if path in PUBLIC_PATHS:
            return None
        headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
        return self.authenticator.authenticate(headers, event.get("requestContext") or {})


def _raw_body(body: str, encoded: bool) -> bytes:
    if not encoded:
        return body.encode("utf-8", "surrogatepass")
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest("the request body is not valid base64", code="invalid_encoding") \
            from None


Route = Callable[..., Any]
