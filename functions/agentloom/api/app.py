"""The HTTP API: one Powertools resolver with every route (prefix ``/api/v1``), used by
the Lambda handler and by ``agentloom serve`` alike.

Errors are ``{"error": {"code", "message", "details"?}}`` with stable codes: 400 bad
input (malformed JSON, not UTF-8, a bad header), 401 no or invalid identity, 403 a role
too low, 404 absent or not visible to the caller, 405 a method the path does not take
(with ``Allow``), 409 conflicts (an active run, a stale revision, an ended run), 413 too
large (the body, a question), 415 a body not declared JSON, 422 invalid fields (each
named), 503 a missing capability. ``GET /openapi.json`` (and ``/api/v1/openapi.json``)
serves the OpenAPI document to anyone (it holds no data). Every route checks the
caller's membership and role in the services (``agentloom.platform.access``); session
content is creator-only.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Header, Query

from agentloom.api import (
    a2a,
    agui,
    langgraph,
    routes_knowledge,
    routes_mcp,
    routes_mcp_server,
    routes_replay,
    routes_skills,
)
from agentloom.api._resolver import OPENAPI_PATHS, ApiResolver
from agentloom.api.models import (
    AgentIn,
    AgentOut,
    AgentsOut,
    AskIn,
    AskOut,
    BudgetRaiseIn,
    CancelIn,
    DiscoverIn,
    DiscoverOut,
    DraftIn,
    Health,
    InputIn,
    InputOut,
    Me,
    MemberIn,
    MembersOut,
    ModelConnectionIn,
    ModelConnectionOut,
    ModelConnectionsOut,
    ModelConnectionUpdate,
    OperatorResumeIn,
    PublishIn,
    PublishOut,
    ResolveIn,
    ResumeIn,
    RunIndexOut,
    RunsOut,
    SessionIn,
    SessionOut,
    SessionsOut,
    SpaceIn,
    SpaceOut,
    SpacesOut,
    VersionsOut,
)
from agentloom.api.routing import (
    Handler,
    RouteModule,
    declare,
    error_response,
    json_response,
)
from agentloom.models import ConnectionInputError, DiscoveryError
from agentloom.platform.access import INSTANCE_PATTERN
from agentloom.platform.admin import AdminService
from agentloom.platform.domain import AgentVersion, Draft, Member, RunState
from agentloom.platform.errors import (
    BadRequest,
    Conflict,
    Invalid,
    MethodNotAllowed,
    NotFound,
    PlatformError,
    Unavailable,
    field_errors,
)
from agentloom.platform.identity import Authenticator
from agentloom.platform.sessions import SessionService
from agentloom.platform.views import EventPage, MessagePage, RunView
from agentloom_runtime.errors import AgentLoomError, ConfigError, PersistenceError, SnapshotError

log = logging.getLogger(__name__)
P = "/api/v1"
TITLE = "AgentLoom API"
VERSION = "1.0.0"


def _handles(app: ApiResolver, exc: type[BaseException]) -> Callable[[Handler], Handler]:
    """``app.exception_handler(exc)``, typed (Powertools' decorator is not)."""
    register: Any = app.exception_handler
    decorator: Callable[[Handler], Handler] = register(exc)
    return decorator


def _core_routes(app: ApiResolver, admin: AdminService, sessions: SessionService) -> None:
    _document_routes(app)
    _admin_routes(app, admin)
    _model_routes(app, admin)
    _session_routes(app, sessions)
    _run_routes(app, sessions)


# Every route module (see agentloom.api.routing): one line per kind of resource.
ROUTE_MODULES: tuple[RouteModule, ...] = (
    _core_routes,
    routes_knowledge.register,
    routes_skills.register,
    routes_mcp.register,
    agui.register,
    langgraph.register,
    a2a.register,
    routes_mcp_server.register,
    routes_replay.register,
)


def build_app(admin: AdminService, sessions: SessionService, authenticator: Authenticator,
              extra_routes: Sequence[RouteModule] = ()) -> ApiResolver:
    app = ApiResolver(authenticator, enable_validation=True)
    _error_handlers(app)
    for register in (*ROUTE_MODULES, *extra_routes):
        register(app, admin, sessions)
    return app


def _error_handlers(app: ApiResolver) -> None:
    @_handles(app, PlatformError)
    def platformerror_response(err: PlatformError) -> Response[Any]:
        return error_response(err)

    @_handles(app, RequestValidationError)
    def validationerror_response(err: RequestValidationError) -> Response[Any]:
        errors = [dict(e) for e in err.errors()]
        if any(e.get("type") in ("json_invalid", "json_type") for e in errors):
            return error_response(BadRequest("the request body is not valid JSON",
                                     code="malformed_json"))
        return error_response(field_errors(errors))

    @_handles(app, SnapshotError)
    def snapshoterror_response(err: SnapshotError) -> Response[Any]:
        return error_response(Invalid(err.message, code=err.code))

    @_handles(app, ConfigError)
    def configerror_response(err: ConfigError) -> Response[Any]:
        return error_response(Conflict(err.message, code=str(err.details.get("code") or err.code)))

    @_handles(app, PersistenceError)
    def persistenceerror_response(err: PersistenceError) -> Response[Any]:
        log.warning("storage: %s", err.message)
        return error_response(Unavailable("the store is busy or unavailable; try again",
                                  code="storage_unavailable"))

    @_handles(app, ConnectionInputError)
    def connectionerror_response(err: ConnectionInputError) -> Response[Any]:
        field = err.field or "(body)"
        return error_response(Invalid(f"{field}: {err.message}", code=err.code,
                              details={"fields": [{"field": field,
                                                   "message": err.message}]}))

    @_handles(app, DiscoveryError)
    def discoveryerror_response(err: DiscoveryError) -> Response[Any]:
        # messages and details are built from constants: no provider body, no key
        body: dict[str, Any] = {"code": err.code, "message": err.message}
        if err.details:
            body["details"] = err.details
        return Response(status_code=err.http_status,
                        content_type=content_types.APPLICATION_JSON, body={"error": body})

    @_handles(app, AgentLoomError)
    def othererror_response(err: AgentLoomError) -> Response[Any]:
        return error_response(Conflict(err.message, code=err.code))

    @app.not_found
    def not_found(err: NotFoundError) -> Response[Any]:
        event = app.current_event
        allowed = app.allowed_methods(event.path)
        if not allowed:
            return error_response(NotFound("no such route", code="route_not_found"))
        refused = MethodNotAllowed(f"this path takes {', '.join(allowed)} only",
                                   details={"allow": allowed})
        return Response(status_code=refused.status, content_type=content_types.APPLICATION_JSON,
                        body=refused.body(), headers={"Allow": ", ".join(allowed)})

    @_handles(app, Exception)
    def internal(err: Exception) -> Response[Any]:
        log.exception("unhandled error")
        return Response(status_code=500, content_type=content_types.APPLICATION_JSON,
                        body={"error": {"code": "internal_error",
                                        "message": "internal error; see the server log"}})


@functools.cache
def _openapi_text() -> str:
    from agentloom.api.openapi import render  # it builds an app of its own from this module

    return render()


def _document_routes(app: ApiResolver) -> None:
    def openapi_json() -> Response[str]:
        return Response(status_code=200, content_type=content_types.APPLICATION_JSON,
                        body=_openapi_text())

    for path in OPENAPI_PATHS:  # the gate lets them through: the document holds no data
        app.get(path, include_in_schema=False)(openapi_json)


def _admin_routes(app: ApiResolver, admin: AdminService) -> None:  # noqa: C901
    @app.get(f"{P}/health", tags=["meta"], security=[], responses=declare(public=True))
    def health() -> Health:
        return Health()

    @app.get(f"{P}/me", tags=["meta"], responses=declare())
    def me() -> Me:
        who = app.principal()
        return Me(user_id=who.user_id, spaces=[SpaceOut(space=s, role=r)  # type: ignore[arg-type]
                                               for s, r in admin.spaces(who)])

    @app.post(f"{P}/spaces", tags=["spaces"], status_code=201,
              responses=declare(ok={201: "The new space; you are its owner"}, body=True))
    def create_space(body: SpaceIn) -> SpaceOut:
        return SpaceOut(space=admin.create_space(app.principal(), body.name), role="owner")

    @app.get(f"{P}/spaces", tags=["spaces"], responses=declare())
    def list_spaces() -> SpacesOut:
        return SpacesOut(items=[SpaceOut(space=s, role=r)  # type: ignore[arg-type]
                                for s, r in admin.spaces(app.principal())])

    @app.get(f"{P}/spaces/<space_id>", tags=["spaces"], responses=declare(404))
    def get_space(space_id: str) -> SpaceOut:
        space, member = admin.space(app.principal(), space_id)
        return SpaceOut(space=space, role=member.role)

    @app.get(f"{P}/spaces/<space_id>/members", tags=["members"], responses=declare(404))
    def list_members(space_id: str) -> MembersOut:
        return MembersOut(items=admin.members(app.principal(), space_id))

    @app.put(f"{P}/spaces/<space_id>/members/<user_id>", tags=["members"],
             responses=declare(403, 404, 409, body=True))
    def set_member(space_id: str, user_id: str, body: MemberIn) -> Member:
        return admin.set_member(app.principal(), space_id, user_id, body.role)

    @app.delete(f"{P}/spaces/<space_id>/members/<user_id>", tags=["members"],
                status_code=204, responses=declare(403, 404, 409, ok={204: "Removed"}))
    def remove_member(space_id: str, user_id: str) -> Response[str]:
        admin.remove_member(app.principal(), space_id, user_id)
        return Response(status_code=204, body="")

    @app.post(f"{P}/spaces/<space_id>/agents", tags=["agents"], status_code=201,
              responses=declare(403, 404, ok={201: "The new agent and its draft"}, body=True))
    def create_agent(space_id: str, body: AgentIn) -> AgentOut:
        agent, draft = admin.create_agent(app.principal(), space_id, body.name, body.config)
        return AgentOut(agent=agent, draft=draft)

    @app.get(f"{P}/spaces/<space_id>/agents", tags=["agents"], responses=declare(404))
    def list_agents(space_id: str) -> AgentsOut:
        return AgentsOut(items=admin.agents(app.principal(), space_id))

    @app.get(f"{P}/spaces/<space_id>/agents/<agent_id>", tags=["agents"],
             responses=declare(404))
    def get_agent(space_id: str, agent_id: str) -> AgentOut:
        return AgentOut(agent=admin.agent(app.principal(), space_id, agent_id))

    @app.get(f"{P}/spaces/<space_id>/agents/<agent_id>/draft", tags=["agents"],
             responses=declare(403, 404))
    def get_draft(space_id: str, agent_id: str) -> Draft:
        return admin.draft(app.principal(), space_id, agent_id)

    @app.put(f"{P}/spaces/<space_id>/agents/<agent_id>/draft", tags=["agents"],
             responses=declare(403, 404, 409, body=True))
    def save_draft(space_id: str, agent_id: str, body: DraftIn) -> Draft:
        return admin.save_draft(app.principal(), space_id, agent_id, body.config,
                                body.revision)

    @app.post(f"{P}/spaces/<space_id>/agents/<agent_id>/publish", tags=["agents"],
              responses=declare(403, 404, 409, model=PublishOut, body=True,
                                ok={201: "A new version", 200: "The draft is unchanged: "
                                    "the latest version"}))
    def publish(space_id: str, agent_id: str, body: PublishIn) -> Response[PublishOut]:
        version, created = admin.publish(app.principal(), space_id, agent_id, body.revision)
        return json_response(201 if created else 200, PublishOut(version=version, created=created))

    @app.get(f"{P}/spaces/<space_id>/agents/<agent_id>/versions", tags=["agents"],
             responses=declare(404))
    def list_versions(space_id: str, agent_id: str) -> VersionsOut:
        return VersionsOut(items=admin.versions(app.principal(), space_id, agent_id))

    @app.get(f"{P}/spaces/<space_id>/agents/<agent_id>/versions/<version>", tags=["agents"],
             responses=declare(404))
    def get_version(space_id: str, agent_id: str, version: int) -> AgentVersion:
        return admin.version(app.principal(), space_id, agent_id, version)


def _model_routes(app: ApiResolver, admin: AdminService) -> None:
    base = f"{P}/spaces/<space_id>/models"

    @app.post(f"{base}/connections", tags=["models"], status_code=201,
              responses=declare(403, 404, body=True,
                                ok={201: "The new connection (its key is never returned)"}))
    def create_connection(space_id: str, body: ModelConnectionIn) -> ModelConnectionOut:
        return ModelConnectionOut.of(admin.create_model_connection(
            app.principal(), space_id, body.name, body.spec, body.api_key))

    @app.get(f"{base}/connections", tags=["models"], responses=declare(403, 404))
    def list_connections(space_id: str) -> ModelConnectionsOut:
        return ModelConnectionsOut(items=[ModelConnectionOut.of(r) for r in
                                          admin.model_connections(app.principal(), space_id)])

    @app.get(f"{base}/connections/<connection_id>", tags=["models"],
             responses=declare(403, 404))
    def get_connection(space_id: str, connection_id: str) -> ModelConnectionOut:
        return ModelConnectionOut.of(admin.model_connection(app.principal(), space_id,
                                                            connection_id))

    @app.put(f"{base}/connections/<connection_id>", tags=["models"],
             responses=declare(403, 404, 409, body=True))
    def update_connection(space_id: str, connection_id: str,
                          body: ModelConnectionUpdate) -> ModelConnectionOut:
        return ModelConnectionOut.of(admin.update_model_connection(
            app.principal(), space_id, connection_id, body.spec, name=body.name,
            api_key=body.api_key, revision=body.revision))

    @app.post(f"{base}/discover", tags=["models"], responses=declare(400, 403, 404, 502, body=True))
    def discover_models(space_id: str, body: DiscoverIn) -> DiscoverOut:
        return DiscoverOut(items=admin.discover_models(
            app.principal(), space_id, body.provider, body.base_url, body.api_key,
            body.resource_id))


def _session_routes(app: ApiResolver, svc: SessionService) -> None:
    @app.post(f"{P}/spaces/<space_id>/sessions", tags=["sessions"], status_code=201,
              responses=declare(404, 409, ok={201: "The new session"}, body=True))
    def create_session(space_id: str, body: SessionIn) -> SessionOut:
        return SessionOut.of(svc.create_session(app.principal(), space_id, body.agent_id,
                                                body.version, body.title))

    @app.get(f"{P}/spaces/<space_id>/sessions", tags=["sessions"], responses=declare(404))
    def list_sessions(space_id: str) -> SessionsOut:
        return SessionsOut(items=[SessionOut.of(s)
                                  for s in svc.sessions(app.principal(), space_id)])

    @app.get(f"{P}/spaces/<space_id>/runs", tags=["operators"], responses=declare(403, 404))
    def space_runs(space_id: str, status: Annotated[RunState | None, Query()] = None,
                   limit: Annotated[int, Query(ge=1, le=500)] = 200) -> RunIndexOut:
        return RunIndexOut(items=svc.space_runs(app.principal(), space_id, status, limit))

    @app.post(f"{P}/spaces/<space_id>/runs/<run_id>/cancel", tags=["operators"],
              responses=declare(403, 404, 409, body=True))
    def operator_cancel(space_id: str, run_id: str, body: CancelIn) -> RunView:
        return svc.operator_cancel(app.principal(), space_id, run_id, body.reason)

    @app.post(f"{P}/spaces/<space_id>/runs/<run_id>/resume", tags=["operators"],
              responses=declare(403, 404, 409, body=True))
    def operator_resume(space_id: str, run_id: str, body: OperatorResumeIn) -> RunView:
        raised = body.raise_budget or BudgetRaiseIn()
        return svc.operator_resume(app.principal(), space_id, run_id,
                                   max_tokens=raised.max_tokens, max_cost=raised.max_cost,
                                   note=raised.note)

    @app.get(f"{P}/sessions/<session_id>", tags=["sessions"], responses=declare(404))
    def get_session(session_id: str) -> SessionOut:
        return SessionOut.of(svc.session(app.principal(), session_id))

    @app.delete(f"{P}/sessions/<session_id>", tags=["sessions"], status_code=204,
                responses=declare(404, 409, ok={204: "Deleted (also when a retry finished "
                                                     "an interrupted delete)"}))
    def delete_session(session_id: str) -> Response[str]:
        svc.teardown.delete(app.principal(), session_id)
        return Response(status_code=204, body="")

    @app.get(f"{P}/sessions/<session_id>/messages", tags=["sessions"], responses=declare(404))
    def messages(session_id: str, after: Annotated[int, Query(ge=0)] = 0,
                 limit: Annotated[int, Query(ge=1, le=200)] = 100,
                 instance: Annotated[str | None, Query(pattern=INSTANCE_PATTERN,
                                                       max_length=64)] = None
                 ) -> MessagePage:
        return svc.messages(app.principal(), session_id, after=after, limit=limit,
                            instance=instance)


def _run_routes(app: ApiResolver, svc: SessionService) -> None:
    @app.post(f"{P}/sessions/<session_id>/runs", tags=["runs"],
              responses=declare(404, 409, model=AskOut, body=True,
                                ok={201: "A new run, started", 200: "The run this "
                                    "Idempotency-Key already started"}))
    def ask(session_id: str, body: AskIn,
            idempotency_key: Annotated[str | None, Header(
                alias="idempotency-key",
                description="1-200 printable ASCII characters (else 400 "
                            "invalid_idempotency_key). A retried ask with the same key "
                            "returns the same run (24 hours).")] = None) -> Response[AskOut]:
        run, created = svc.ask(app.principal(), session_id, body.question, idempotency_key)
        return json_response(201 if created else 200, AskOut(run=run, created=created))

    @app.get(f"{P}/sessions/<session_id>/runs", tags=["runs"], responses=declare(404))
    def list_runs(session_id: str) -> RunsOut:
        return RunsOut(items=svc.runs(app.principal(), session_id))

    @app.get(f"{P}/sessions/<session_id>/runs/<run_id>", tags=["runs"],
             responses=declare(404))
    def get_run(session_id: str, run_id: str) -> RunView:
        return svc.run(app.principal(), session_id, run_id)

    @app.post(f"{P}/sessions/<session_id>/runs/<run_id>/resume", tags=["runs"],
              responses=declare(403, 404, 409, body=True))
    def resume(session_id: str, run_id: str, body: ResumeIn) -> RunView:
        raised = body.raise_budget or BudgetRaiseIn()
        return svc.resume(app.principal(), session_id, run_id,
                          retry_unknown_models=body.retry_unknown_models,
                          confirm_hooks=body.confirm_hooks, max_tokens=raised.max_tokens,
                          max_cost=raised.max_cost, note=raised.note)

    @app.post(f"{P}/sessions/<session_id>/runs/<run_id>/resolve", tags=["runs"],
              responses=declare(404, 409, body=True))
    def resolve(session_id: str, run_id: str, body: ResolveIn) -> RunView:
        return svc.resolve(app.principal(), session_id, run_id, body.verdict, note=body.note,
                           output=body.output, exit_code=body.exit_code,
                           drive_on=body.drive_on)

    @app.post(f"{P}/sessions/<session_id>/runs/<run_id>/inputs", tags=["runs"],
              status_code=202,
              responses=declare(404, 409, ok={202: "Queued for the run"}, body=True))
    def supplement(session_id: str, run_id: str, body: InputIn) -> InputOut:
        return InputOut(queued=svc.supplement(app.principal(), session_id, run_id, body.text))

    @app.post(f"{P}/sessions/<session_id>/runs/<run_id>/cancel", tags=["runs"],
              responses=declare(404, 409, body=True))
    def cancel(session_id: str, run_id: str, body: CancelIn) -> RunView:
        return svc.cancel(app.principal(), session_id, run_id, body.reason)

    @app.get(f"{P}/sessions/<session_id>/runs/<run_id>/events", tags=["runs"],
             responses=declare(404))
    def events(session_id: str, run_id: str, after: Annotated[int, Query(ge=0)] = 0,
               wait: Annotated[float, Query(ge=0, le=20)] = 0,
               limit: Annotated[int, Query(ge=1, le=500)] = 200) -> EventPage:
        return svc.events(app.principal(), session_id, run_id, after=after, wait=wait,
                          limit=limit)
