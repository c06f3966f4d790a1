"""The A2A routes (``register``, one line of ``app.ROUTE_MODULES``), each behind the
API's gate (bearer token or JWT; 401 without) and its membership rules:

- ``GET /api/v1/spaces/{space}/agents/{agent}/a2a/.well-known/agent-card.json``: the
  agent card (members of the space; 404 to anyone else, as the agent's own route);
- ``POST /api/v1/spaces/{space}/agents/{agent}/a2a``: JSON-RPC 2.0 — ``SendMessage``,
  ``SendStreamingMessage``, ``GetTask``, ``CancelTask``, ``SubscribeToTask`` (A2A 1.0).
  A non-member gets the API's 404 (the endpoint does not exist for them); everything
  past that is a JSON-RPC answer (HTTP 200), errors included. The streaming methods answer
  ``text/event-stream``: on ``agentloom serve`` as the run goes; behind API Gateway (no
  streamed responses) the events of up to ``WAIT_S`` seconds in one answer, after which
  the client resubscribes (``SubscribeToTask``) or polls ``GetTask``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response, content_types
from pydantic import ValidationError

from agentloom.api.a2a.card import agent_card
from agentloom.api.a2a.states import task_of
from agentloom.api.a2a.tasks import WAIT_S, A2ATasks
from agentloom.api.a2a.wire import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PROTOCOL_VERSION,
    TASK_NOT_FOUND,
    UNSUPPORTED_OPERATION,
    VERSION_NOT_SUPPORTED,
    AgentCard,
    RpcError,
    RpcRequest,
    RpcResponse,
    SendMessageRequest,
    StreamResponse,
    TaskIdRequest,
    wire,
)
from agentloom.api.routing import declare
from agentloom.platform.errors import NotFound, PlatformError

if TYPE_CHECKING:
    from agentloom.api._resolver import ApiResolver
    from agentloom.platform.admin import AdminService
    from agentloom.platform.sessions import SessionService

log = logging.getLogger(__name__)
BASE = "/api/v1/spaces/<space_id>/agents/<agent_id>/a2a"
CARD = f"{BASE}/.well-known/agent-card.json"
SSE = "text/event-stream"
STREAMING = frozenset({"SendStreamingMessage", "SubscribeToTask"})
METHODS = frozenset({"SendMessage", "GetTask", "CancelTask", *STREAMING})
LEGACY = {"message/send": "SendMessage", "message/stream": "SendStreamingMessage",
          "tasks/get": "GetTask", "tasks/cancel": "CancelTask",
          "tasks/resubscribe": "SubscribeToTask"}


def _rpc_responses() -> dict[int, Any]:
    out = declare(404, body=True)
    out[200] = {"description": "A JSON-RPC 2.0 response (errors too); the streaming "
                               "methods answer Server-Sent Events, each a JSON-RPC response",
                "content": {"application/json": {"model": RpcResponse},
                            SSE: {"schema": {"type": "string"}}}}
    return out


def register(app: ApiResolver, admin: AdminService, sessions: SessionService) -> None:
    tasks = A2ATasks(admin, sessions)

    @app.get(CARD, tags=["a2a"], responses=declare(404))
    def a2a_agent_card(space_id: str, agent_id: str) -> AgentCard:
        agent = tasks.admin.agent(app.principal(), space_id, agent_id)
        version = tasks.admin.version(app.principal(), space_id, agent_id,
                                      agent.latest_version) if agent.latest_version else None
        if version is None:
            raise NotFound(f"agent {agent_id} has no published version: it has no card",
                           code="agent_not_published")
        return agent_card(agent, version, _rpc_url(app, space_id, agent_id),
                          app.authenticator)

    @app.post(BASE, tags=["a2a"], responses=_rpc_responses())
    def a2a_rpc(space_id: str, agent_id: str, body: RpcRequest) -> Response[Any]:
        who = app.principal()
        tasks.admin.agent(who, space_id, agent_id)  # a non-member: the API's 404
        try:
            _check_version(app)
            method = _method(body.method)
            if method in STREAMING:
                events = _open_stream(tasks, who, space_id, agent_id, method, body.params)
                return _stream(app, body.id, events)
            result = _call(tasks, who, space_id, agent_id, method, body.params)
            return _json(RpcResponse(id=body.id, result=result))
        except RpcError as err:
            return _json(RpcResponse(id=body.id, error=err.body()))
        except PlatformError as err:
            return _json(RpcResponse(id=body.id, error=rpc_error(err).body()))


def _rpc_url(app: ApiResolver, space_id: str, agent_id: str) -> str:
    event = app.current_event
    headers = {k.lower(): v for k, v in (event.headers or {}).items()}
    context = event.raw_event.get("requestContext") or {}
    host = headers.get("host") or str(context.get("domainName") or "localhost")
    local = context.get("apiId") == "agentloom-serve"
    scheme = headers.get("x-forwarded-proto") or ("http" if local else "https")
    return f"{scheme}://{host}/api/v1/spaces/{space_id}/agents/{agent_id}/a2a"


def _check_version(app: ApiResolver) -> None:
    asked = next((v for k, v in (app.current_event.headers or {}).items()
                  if k.lower() == "a2a-version"), "")
    if asked and asked.strip() not in (PROTOCOL_VERSION, f"{PROTOCOL_VERSION}.0"):
        raise RpcError(VERSION_NOT_SUPPORTED, f"A2A-Version {asked[:20]!r}: this endpoint "
                       f"speaks A2A {PROTOCOL_VERSION}", "version_not_supported")


def _method(name: str) -> str:
    if name in METHODS:
        return name
    if name in LEGACY:
        raise RpcError(METHOD_NOT_FOUND, f"{name} is A2A 0.3; this endpoint speaks A2A "
                       f"{PROTOCOL_VERSION}: call {LEGACY[name]}", "method_not_found")
    raise RpcError(METHOD_NOT_FOUND, f"no method {name[:100]!r} (this endpoint takes "
                   f"{', '.join(sorted(METHODS))})", "method_not_found")


def _params(model: type[Any], params: dict[str, Any]) -> Any:
    try:
        return model.model_validate(params)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "params"
        raise RpcError(INVALID_PARAMS, f"params.{where}: {first.get('msg', 'invalid')}",
                       "invalid_field") from None


def _call(tasks: A2ATasks, who: Any, space_id: str, agent_id: str, method: str,
          params: dict[str, Any]) -> dict[str, Any]:
    if method == "SendMessage":
        request: SendMessageRequest = _params(SendMessageRequest, params)
        _no_push(request)
        view = tasks.send(who, space_id, agent_id, request)
        if not request.configuration.returnImmediately:
            view = tasks.settle(who, view, WAIT_S)
        return {"task": wire(task_of(view))}
    asked: TaskIdRequest = _params(TaskIdRequest, params)
    if method == "GetTask":
        return wire(tasks.get(who, space_id, agent_id, asked.id))
    return wire(tasks.cancel(who, space_id, agent_id, asked.id))


def _no_push(request: SendMessageRequest) -> None:
    if request.configuration.taskPushNotificationConfig:
        raise RpcError(-32003, "push notifications are not supported: stream "
                       "(SendStreamingMessage) or poll (GetTask)", "push_not_supported")


def _open_stream(tasks: A2ATasks, who: Any, space_id: str, agent_id: str, method: str,
                 params: dict[str, Any]) -> Callable[[float | None],
                                                     Iterator[StreamResponse | None]]:
    """The events of a stream, from the first (checked now: an error is a plain JSON-RPC
    answer) to the last; called with the time budget (None: as long as it takes)."""
    if method == "SendStreamingMessage":
        request: SendMessageRequest = _params(SendMessageRequest, params)
        _no_push(request)
        view = tasks.send(who, space_id, agent_id, request)
    else:
        asked: TaskIdRequest = _params(TaskIdRequest, params)
        view = tasks.subscribe(who, space_id, agent_id, asked.id)
    return lambda budget: tasks.follow(who, view, budget)


def _stream(app: ApiResolver, rpc_id: Any,
            events: Callable[[float | None], Iterator[StreamResponse | None]]) -> Response[Any]:
    headers = {"Cache-Control": "no-cache"}
    if app.can_stream():
        app.stream(_sse(rpc_id, events(None)))
        return Response(status_code=200, content_type=SSE, body="", headers=headers)
    text = b"".join(_sse(rpc_id, events(WAIT_S))).decode()
    return Response(status_code=200, content_type=SSE, body=text, headers=headers)


def _sse(rpc_id: Any, events: Iterator[StreamResponse | None]) -> Iterator[bytes]:
    try:
        for event in events:
            if event is None:
                yield b": keep-alive\n\n"
                continue
            answer = RpcResponse(id=rpc_id, result=wire(event))
            yield _event(answer)
    except (RpcError, PlatformError) as err:
        body = err.body() if isinstance(err, RpcError) else rpc_error(err).body()
        yield _event(RpcResponse(id=rpc_id, error=body))


def _event(answer: RpcResponse) -> bytes:
    data = json.dumps(answer.model_dump(mode="json", exclude_none=True), ensure_ascii=False)
    return f"data: {data}\n\n".encode()


def _json(answer: RpcResponse) -> Response[Any]:
    body = answer.model_dump(mode="json", exclude_none=True)
    if "result" not in body and "error" not in body:
        body["result"] = None
    return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=body)


def rpc_error(err: PlatformError) -> RpcError:
    """A platform error as the A2A error a client expects."""
    if err.status == 404:
        return RpcError(TASK_NOT_FOUND, err.message, err.code)
    if err.status in (400, 413, 422):
        return RpcError(INVALID_PARAMS, err.message, err.code)
    if err.status == 409:
        return RpcError(UNSUPPORTED_OPERATION, err.message, err.code)
    if err.status in (401, 403):
        return RpcError(INVALID_REQUEST, err.message, err.code)
    log.warning("a2a: %s (%s)", err.code, err.status)
    return RpcError(INTERNAL_ERROR, err.message, err.code)
