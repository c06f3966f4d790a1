"""The Powertools HTTP API resolver, safe for concurrent requests, with the gate every
request passes before routing.

Powertools' public request state is three attributes of the resolver: ``current_event``,
``lambda_context`` and ``context`` (``append_context`` / ``clear_context``). Its
``resolve`` assigns the event to a class attribute (one request at a time, as in
Lambda); ``serve`` handles requests on many threads (long polls wait up to 20 s). This
resolver declares the three attributes as per-thread properties, sets the event and a
fresh context before calling Powertools' own ``resolve`` and drops the context after it, so
every route, middleware and exception handler of a request reads that request's state
whichever thread it is on. Only public names are used (``resolve``, the three attributes,
``APIGatewayProxyEventV2``): the supported Powertools range is the
extras' in ``pyproject.toml`` and both of its ends are tested
(``tests/functional/test_powertools_range.py``).

The gate (the same in Lambda and in ``serve``), in order: a body over ``max_body``
bytes is 413; a body that is not UTF-8 is 400; then the caller is authenticated (401 for
anything but the public paths: no route, no body parsing, nothing is revealed to an
anonymous caller); then a body must be a JSON object within limits
(``check_body``: declared JSON (415), parseable and not too deeply nested (400), an
object whose numbers are of sane length (422) — never a route's concern). The principal
is in the request's context for the routes.

The resolver also records the methods each route's path takes (``route``, which every
``get`` / ``post`` / … calls), so a path that exists answered with another method is 405
``method_not_allowed`` with ``Allow`` (``allowed_methods``), not 404.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

from agentloom.api._streaming import ReplyStream
from agentloom.platform.errors import (
    BadRequest,
    Invalid,
    PlatformError,
    TooLarge,
    UnsupportedMediaType,
)
from agentloom.platform.identity import Authenticator, Principal

MAX_DEPTH = 64
MAX_INT_DIGITS = 100
JSON = "application/json"


class _OutOfRange:
    """A number the body holds that no field takes (found and named after parsing)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def check_body(text: str, content_type: str | None) -> None:
    """Refuse a body that is not a JSON object within the limits (see the module)."""
    media = media_type(content_type)
    if media != JSON:
        got = f"{media!r}" if media else "no Content-Type"
        raise UnsupportedMediaType(f"the request body must be JSON: send Content-Type: {JSON} "
                                   f"(got {got})")
    try:
        value = json.loads(text, parse_int=_integer, parse_float=_float,
                           parse_constant=_constant)
    except RecursionError:
        raise _too_deep() from None
    except ValueError:
        raise BadRequest("the request body is not valid JSON", code="malformed_json") from None
    if isinstance(value, dict | list):
        _walk(value)
    if not isinstance(value, dict):
        raise _invalid("body", f"a JSON object is expected, not {_kind(value)}")


def _integer(text: str) -> int | _OutOfRange:
    digits = len(text.lstrip("-"))
    return int(text) if digits <= MAX_INT_DIGITS else _OutOfRange(text)


def _float(text: str) -> float | _OutOfRange:
    value = float(text)
    return value if math.isfinite(value) else _OutOfRange(text)


def _constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def _walk(body: dict[str, Any] | list[Any]) -> None:
    """Depth first over the containers: the first level past ``MAX_DEPTH`` or the first
    number out of range is refused, naming where it is."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(body, ("body",))]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise _too_deep()
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(item, _OutOfRange):
                shown = item.text if len(item.text) <= 20 else f"{item.text[:12]}… " \
                    f"({len(item.text)} characters)"
                raise _invalid(".".join((*path, str(key))),
                               f"the number {shown} is out of range (integers of at most "
                               f"{MAX_INT_DIGITS} digits, finite numbers)")
            if isinstance(item, dict | list):
                stack.append((item, (*path, str(key))))


def _too_deep() -> BadRequest:
    return BadRequest(f"the request body nests more than {MAX_DEPTH} levels deep",
                      code="json_too_deep")


def _invalid(field: str, message: str) -> Invalid:
    return Invalid(f"{field}: {message}", code="invalid_field",
                   details={"fields": [{"field": field, "message": message}]})


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"

MAX_BODY_BYTES = 1024 * 1024
OPENAPI_PATHS = ("/openapi.json", "/api/v1/openapi.json")
PUBLIC_PATHS = frozenset({"/api/v1/health", *OPENAPI_PATHS})
_PARAMETER = re.compile(r"<\w+>")


def error_response(err: PlatformError) -> dict[str, Any]:
    return {"statusCode": err.status, "headers": {"Content-Type": "application/json"},
            "body": json.dumps(err.body()), "isBase64Encoded": False}


class ApiResolver(APIGatewayHttpResolver):
    def __init__(self, authenticator: Authenticator, *, max_body: int = MAX_BODY_BYTES,
                 **kwargs: Any) -> None:
        self._local = threading.local()
        self._methods: dict[str, tuple[re.Pattern[str], set[str]]] = {}
        self._first_calls = threading.Lock()  # see ``_first_call``
        self._warm: set[tuple[str, tuple[str, ...]]] = set()
        super().__init__(**kwargs)
        self.use([self._stack_built])
        self.authenticator = authenticator
        self.max_body = max_body

    # -- per-thread request state (Powertools' public attributes) --------------------------

    @property  # type: ignore[override]
    def current_event(self) -> APIGatewayProxyEventV2:
        event: APIGatewayProxyEventV2 = self._local.event
        return event

    @current_event.setter
    def current_event(self, value: APIGatewayProxyEventV2) -> None:
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

    # -- streamed answers (``agentloom serve`` only) ----------------------------------------
    # A route may answer with a stream where the server can write one (``can_stream``: the
    # event says so; API Gateway's never does): it hands the chunks over (``stream``) and
    # returns the response's status and headers; the server takes them (``take_stream``)
    # after ``resolve`` on the same thread and writes each chunk as it comes.

    def can_stream(self) -> bool:
        context = self.current_event.raw_event.get("requestContext") or {}
        return bool(context.get("agentloomStreams"))

    def stream_budget(self) -> float:
        """How long a streamed answer may last, seconds (``ApiServer.stream_limit``)."""
        context = self.current_event.raw_event.get("requestContext") or {}
        return float(context.get("agentloomStreams") or 0)

    def stream(self, chunks: Iterator[bytes]) -> None:
        self._local.stream = chunks

    def take_stream(self) -> Iterator[bytes] | None:
        chunks: Iterator[bytes] | None = getattr(self._local, "stream", None)
        self._local.stream = None
        return chunks

    def principal(self) -> Principal:
        who = self.context.get("principal")
        if not isinstance(who, Principal):  # pragma: no cover (the gate sets it)
            raise RuntimeError("no principal: the request did not pass the gate")
        return who

    def reply_stream(self) -> ReplyStream | None:
        """The request's event stream (``agentloom.api._streaming``): ``serve`` offers one
        with a POST that accepts ``text/event-stream``; None in Lambda."""
        found: ReplyStream | None = self.context.get("stream")
        return found

    # -- the methods of each path -------------------------------------------------------

    def route(self, rule: str, method: Any, *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
        methods = [method] if isinstance(method, str) else list(method)
        pattern = "[^/]+".join(re.escape(part) for part in _PARAMETER.split(rule))
        entry = self._methods.setdefault(rule, (re.compile(pattern), set()))
        entry[1].update(str(m).upper() for m in methods)
        decorator: Callable[[Any], Any] = super().route(rule, method, *args, **kwargs)
        return decorator

    def allowed_methods(self, path: str) -> list[str]:
        """The methods the routes of ``path`` take (empty: no route has that path)."""
        found: set[str] = set()
        for pattern, methods in self._methods.values():
            if pattern.fullmatch(path):
                found |= methods
        return sorted(found)

    # -- resolving -----------------------------------------------------------------------

    def resolve(self, event: Mapping[str, Any], context: Any, *,
                stream: ReplyStream | None = None) -> dict[str, Any]:
        try:
            principal = self._gate(event)
        except PlatformError as err:
            return error_response(err)
        raw = dict(event)
        if event.get("body"):  # declared JSON (the gate): in the one form Powertools reads
            raw["headers"] = {**{k: v for k, v in (event.get("headers") or {}).items()
                                 if str(k).lower() != "content-type"}, "content-type": JSON}
        self._local.stream = None
        self.context = {} if principal is None else {"principal": principal}
        if stream is not None:
            self.context["stream"] = stream
        self.current_event = APIGatewayProxyEventV2(raw)
        self.lambda_context = context
        self._first_call(raw)
        try:
            return super().resolve(raw, context)
        finally:
            self._stack_left(warm=False)
            self.context = {}

    # -- a route's first call ------------------------------------------------------------
    # Powertools builds a route's middleware stack on the route's first call, unguarded
    # (Lambda serves one request at a time); two first calls at once on ``serve``'s threads
    # wrap one stack twice and the request fails (TypeError). So a request for a route not
    # yet called holds a lock until the stack's first frame runs (``_stack_built``, the
    # resolver's own middleware); once a route has run, its requests take no lock.

    def _first_call(self, event: Mapping[str, Any]) -> None:
        http = (event.get("requestContext") or {}).get("http") or {}
        method, path = str(http.get("method") or "").upper(), str(http.get("path") or "")
        rules = tuple(rule for rule, (pattern, methods) in self._methods.items()
                      if method in methods and pattern.fullmatch(path))
        if rules and (method, rules) not in self._warm:
            self._first_calls.acquire()
            self._local.building = (method, rules)

    def _stack_built(self, app: Any, next_middleware: Callable[[Any], Any]) -> Any:
        self._stack_left(warm=True)
        return next_middleware(app)

    def _stack_left(self, *, warm: bool) -> None:
        key = getattr(self._local, "building", None)
        if key is not None:
            self._local.building = None
            if warm:
                self._warm.add(key)
            self._first_calls.release()

    def _gate(self, event: Mapping[str, Any]) -> Principal | None:
        body = event.get("body")
        text = None
        if isinstance(body, str) and body:
            raw = _raw_body(body, bool(event.get("isBase64Encoded")))
            if len(raw) > self.max_body:
                raise TooLarge(f"the request body is larger than {self.max_body} bytes",
                               code="request_too_large")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise BadRequest("the request body is not UTF-8 text",
                                 code="invalid_encoding") from None
        path = str(((event.get("requestContext") or {}).get("http") or {}).get("path")
                   or event.get("rawPath") or "")
        headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
        principal = None if path in PUBLIC_PATHS else self.authenticator.authenticate(
            headers, event.get("requestContext") or {})
        if text is not None:
            check_body(text, headers.get("content-type"))
        return principal


def _raw_body(body: str, encoded: bool) -> bytes:
    if not encoded:
        return body.encode("utf-8", "surrogatepass")
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest("the request body is not valid base64", code="invalid_encoding") \
            from None

