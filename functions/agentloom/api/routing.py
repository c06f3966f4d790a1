"""What every route module shares: the seam by which it registers its routes, the
OpenAPI declaration of its responses, and JSON responses.

A route module is a function ``register(app, admin, sessions)`` that adds routes to the
resolver (``@app.get(...)``, ``@app.post(...)``), calling services only inside its
handlers: ``openapi.py`` builds the document with no services at all. ``build_app``
calls every function of ``app.ROUTE_MODULES`` and of its ``extra_routes`` argument; a
new kind of resource (Skills, MCP servers, knowledge bases) is one module
``agentloom/api/routes_<kind>.py`` plus one line in ``ROUTE_MODULES``. Import from here,
not from ``app.py`` (which imports the route modules).

``declare(...)`` declares a route's success response(s) and its errors, all with the
``ErrorOut`` body: 401, 422 and 503 on every route (the gate, field validation, a busy
store), 400, 413 and 415 on every route with a body (malformed or too deeply nested JSON,
not UTF-8, too large, not declared JSON), and the codes the route names. A success
without ``model`` is documented with the handler's return annotation; a handler that
returns ``Response[...]`` names its model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from aws_lambda_powertools.event_handler import Response, content_types
from pydantic import BaseModel

from agentloom.api.models import ErrorOut
from agentloom.platform.errors import PlatformError

if TYPE_CHECKING:
    from agentloom.api._resolver import ApiResolver
    from agentloom.platform.admin import AdminService
    from agentloom.platform.sessions import SessionService

ERROR_NAMES = {400: "Bad input: malformed or too deeply nested JSON, not UTF-8, a bad header",
               401: "No or invalid identity", 403: "Role too low",
               404: "Not found or not visible to you", 409: "Conflict",
               413: "Too large", 415: "The body is not declared JSON (Content-Type: "
               "application/json)", 422: "Invalid fields (each named)",
               502: "The provider failed or refused the request",
               503: "A store or capability is unavailable; try again"}
ALWAYS = (401, 422, 503)
WITH_BODY = (400, 413, 415)


class RouteModule(Protocol):
    def __call__(self, app: ApiResolver, admin: AdminService,
                 sessions: SessionService) -> None: ...


def declare(*errors: int, ok: Mapping[int, str] | None = None,
              model: type[BaseModel] | None = None, body: bool = False,
              public: bool = False) -> dict[int, Any]:
    """The OpenAPI ``responses`` of a route: ``ok`` maps each success status to its
    description (200 by default; 204 has no body), ``body`` adds the errors of a request
    body, ``public`` drops 401 (a route the gate lets through)."""
    out: dict[int, Any] = {}
    for status, description in (ok or {200: "OK"}).items():
        entry: dict[str, Any] = {"description": description}
        if status == 204:
            entry["content"] = {}
        elif model is not None:
            entry["content"] = {"application/json": {"model": model}}
        out[status] = entry
    codes = {*ALWAYS, *(WITH_BODY if body else ()), *errors} - ({401} if public else set())
    for code in sorted(codes):
        out[code] = {"description": ERROR_NAMES[code],
                     "content": {"application/json": {"model": ErrorOut}}}
    return out


def json_response(status: int, value: BaseModel) -> Response[Any]:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON,
                    body=value.model_dump(mode="json"))


def error_response(err: PlatformError) -> Response[Any]:
    return Response(status_code=err.status, content_type=content_types.APPLICATION_JSON,
                    body=err.body())


Handler = Callable[[Any], Response[Any]]
