"""The LangGraph API's shape (Agent Protocol: threads, runs, wait, stream, join) for a
published agent, enough for ``langgraph-sdk``'s client (docs/interop.md#langgraph-api);
a thin facade over sessions, runs and the event log. Base ``/api/v1/spaces/{s}/agents/
{a}/langgraph`` (the client's ``url``), member of the space, own threads only:

    POST  /threads                      a thread (the caller's session with the agent)
    GET   /threads/{t}   /threads/{t}/state
    POST  /threads/{t}/runs             ask (``input.messages``' last human message), or
                                        answer an interrupt (``command.resume``)
    POST  /threads/{t}/runs/wait        … and wait: the thread's values when it stops
    POST  /threads/{t}/runs/stream      … and stream (SSE, ``Location`` to resume)
    GET   /threads/{t}/runs   /threads/{t}/runs/{r}   /threads/{t}/runs/{r}/join
    GET   /threads/{t}/runs/{r}/stream  resume a stream (``Last-Event-ID``)
    POST  /threads/{t}/runs/{r}/cancel

A thread id is the client's (or a new UUID): one session per user, agent and thread id
(``platform.threads``). A run id is the AgentLoom run id. Stream parts: ``metadata``
first, then per ``stream_mode`` — ``values`` (the thread's messages after each model or
tool step), ``updates`` (``{"agent"|"tools": {"messages": [new]}}``), ``custom`` (each
AgentLoom event) — and ``end`` (``{run_id, status}``) or ``error``. A stopped run (blocked,
interrupted) is the thread's interrupt (``__interrupt__``: value = what is unknown and
how to answer, id = the run id), answered by a new run with ``command.resume`` (see
``api.protocols``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from agentloom.api.agui import interrupt
from agentloom.api.langgraph_messages import ThreadMessages
from agentloom.api.protocols import (
    answer_interrupt,
    events_until,
    guarded,
    last_seq,
    parse_body,
)
from agentloom.api.routing import declare
from agentloom.platform.domain import Session
from agentloom.platform.errors import Conflict, Invalid, NotFound, PlatformError
from agentloom.platform.identity import Principal
from agentloom.platform.store.tenancy import secret_hash
from agentloom.platform.threads import find_thread, thread_session
from agentloom.platform.views import EventItem, RunView

if TYPE_CHECKING:
    from agentloom.api._resolver import ApiResolver
    from agentloom.platform.admin import AdminService
    from agentloom.platform.sessions import SessionService

BASE = "/api/v1/spaces/<space_id>/agents/<agent_id>/langgraph"
WAIT_S = 15.0
QUIET_S = 0.5  # how long nothing must happen before a stream past its budget is cut
BUFFERED_S = 20.0  # through API Gateway (29 s at most): then the client reconnects
MODES = ("values", "updates", "custom")
_STATUS = {"queued": "pending", "running": "running", "completed": "success",
           "failed": "error", "cancelled": "interrupted", "blocked": "interrupted",
           "interrupted": "interrupted"}


class RunIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    assistant_id: StrictStr | None = Field(default=None, max_length=200)
    input: dict[str, Any] | None = None
    command: dict[str, Any] | None = None
    stream_mode: StrictStr | list[StrictStr] = "values"


class ThreadIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    thread_id: StrictStr | None = Field(default=None, min_length=1, max_length=200)
    if_exists: Literal["raise", "do_nothing"] = "raise"
    metadata: dict[str, Any] | None = None


def thread_out(session: Session, thread_id: str, status: str = "idle",
               values: dict[str, Any] | None = None) -> dict[str, Any]:
    at = _iso(session.created_at)
    return {"thread_id": thread_id, "created_at": at, "updated_at": at,
            "metadata": {"agentloom_session_id": session.session_id},
            "status": status, "values": values or {}, "interrupts": {}}


def run_out(view: RunView, thread_id: str, agent_id: str) -> dict[str, Any]:
    return {"run_id": view.run_id, "thread_id": thread_id, "assistant_id": agent_id,
            "created_at": _iso(view.created_at), "updated_at": _iso(view.updated_at),
            "status": _STATUS.get(view.status, "running"), "metadata": {},
            "multitask_strategy": "reject"}


@dataclass
class LangGraphThread:
    """One request's thread and run, and the stream of it."""

    svc: SessionService
    who: Principal
    session: Session
    thread_id: str
    run_id: str

    def stream(self, modes: tuple[str, ...], after: int, budget: float,
               *, first: bool) -> Iterator[bytes]:
        sid = self.session.session_id
        messages = ThreadMessages(self.svc, self.who, sid, self.run_id)
        for item in events_until(self.svc, self.who, sid, self.run_id, after):
            self._reveal(messages, item)  # the thread as of the cursor
        if first:
            yield _part("metadata", {"run_id": self.run_id, "thread_id": self.thread_id,
                                     "attempt": 1})
        cursor, deadline = after, time.monotonic() + budget
        while True:
            left = deadline - time.monotonic()
            page = self.svc.events(self.who, sid, self.run_id, after=cursor,
                                   wait=max(QUIET_S, min(WAIT_S, left)))
            for item in page.items:
                cursor = item.seq
                if "custom" in modes:
                    yield _part("custom", {"type": item.type, "data": item.data}, item.seq)
                new = self._reveal(messages, item)
                if new:
                    if "updates" in modes:  # a node's update per run of messages
                        for node, group in _by_node(new):
                            yield _part("updates", {node: {"messages": group}}, item.seq)
                    if "values" in modes:
                        yield _part("values", messages.values(), item.seq)
            if page.done:
                yield from self._end(modes)
                return
            if left <= 0 and not page.items:
                # cut at a quiet moment only: the client then asks the run's status and
                # reconnects while it runs (one that ended meanwhile sent its end here)
                return

    @staticmethod
    def _reveal(messages: ThreadMessages, item: EventItem) -> list[dict[str, Any]]:
        if item.data.get("instance", "main") != "main":
            return []
        if item.type == "model.completed" and item.data.get("purpose") == "action":
            return messages.reveal("ai")
        if item.type == "tool.completed":
            return messages.reveal("tool")
        return []

    def _end(self, modes: tuple[str, ...]) -> Iterator[bytes]:
        view = self.svc.run(self.who, self.session.session_id, self.run_id)
        if view.status == "failed":
            error = view.error or {}
            yield _part("error", {"error": error.get("code", "failed"),
                                  "message": error.get("message", "")})
            return
        if view.status in ("blocked", "interrupted"):
            stop = interrupt(view)
            chunk = {"__interrupt__": [{"value": stop, "id": view.run_id}]}
            yield _part("updates" if "updates" in modes else "values", chunk)
        yield _part("end", {"run_id": self.run_id, "status": _STATUS[view.status]})


def _by_node(messages: list[dict[str, Any]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Consecutive messages by the node that made them: tool results ``tools``, the
    rest (the question, the model's replies) ``agent``."""
    node, group = "", list[dict[str, Any]]()
    for message in messages:
        made_by = "tools" if message["type"] == "tool" else "agent"
        if group and made_by != node:
            yield node, group
            group = []
        node = made_by
        group.append(message)
    if group:
        yield node, group


def stream_error(err: PlatformError) -> bytes:
    return _part("error", {"error": err.code, "message": err.message})


def _part(event: str, data: Any, seq: int | None = None) -> bytes:
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1000):03d}Z"


def _modes(value: str | list[str]) -> tuple[str, ...]:
    modes = tuple([value] if isinstance(value, str) else value)
    wrong = [m for m in modes if m not in MODES]
    if wrong:
        raise Invalid(f"stream_mode: {', '.join(wrong)} is not supported (only "
                      f"{', '.join(MODES)})", code="invalid_field", details={"fields": [
                          {"field": "stream_mode", "message": "values, updates or custom"}]})
    return modes


def _question(body: RunIn) -> str:
    messages = (body.input or {}).get("messages")
    if isinstance(messages, dict):
        messages = [messages]
    humans = [m for m in messages or [] if isinstance(m, dict) and
              (m.get("type") == "human" or m.get("role") in ("user", "human"))]
    content = humans[-1].get("content") if humans else None
    if isinstance(content, list):
        content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    if not isinstance(content, str) or not content.strip():
        raise Invalid("input.messages: a human message with text is needed",
                      code="invalid_field", details={"fields": [
                          {"field": "input.messages", "message": "a human message"}]})
    return content


def start_run(svc: SessionService, who: Principal, space_id: str, agent_id: str,
              thread_id: str, body: RunIn, idempotency_key: str | None) -> LangGraphThread:
    """Ask in the thread — or answer its interrupt (``command.resume``)."""
    if body.assistant_id not in (None, agent_id):
        raise NotFound(f"assistant {body.assistant_id} not found (this URL serves "
                       f"{agent_id})", code="assistant_not_found")
    session = find_thread(svc, who, space_id, agent_id, thread_id)
    sid = session.session_id
    if body.command is not None and "resume" in body.command:
        runs = list(reversed(svc.runs(who, sid)))  # newest first
        stopped = [r for r in runs if r.status in ("blocked", "interrupted")] or \
            [r for r in runs if r.status in ("queued", "running")]
        if not stopped:
            raise Conflict("the thread has no interrupt to resume", code="nothing_to_resume")
        answer_interrupt(svc, who, sid, stopped[0].run_id, body.command["resume"],
                         field="command.resume")
        return LangGraphThread(svc, who, session, thread_id, stopped[0].run_id)
    key = None if idempotency_key is None else \
        "langgraph:" + secret_hash(f"{sid}\n{idempotency_key}")[:40]
    run, _ = svc.ask(who, sid, _question(body), key)
    return LangGraphThread(svc, who, session, thread_id, run.run_id)


def stream_request(svc: SessionService, who: Principal, groups: tuple[str | None, ...],
                   method: str, headers: Mapping[str, str], query: Mapping[str, list[str]],
                   body: bytes, budget: float) -> tuple[dict[str, str], Iterator[bytes]]:
    """The streaming routes (``RUN_STREAM``): POST runs/stream, GET runs/{r}/stream,
    POST runs/wait, GET runs/{r}/join — their headers and body, as they come."""
    space_id, agent_id, thread_id, run_id, what = (
        None if g is None else unquote(g) for g in groups)
    assert space_id and agent_id and thread_id and what
    # relative to the facade's base URL (the client's ``url``), as LangGraph's server does
    base = f"/threads/{thread_id}/runs"
    if method == "POST" and run_id is None and what in ("stream", "wait"):
        request = parse_body(RunIn, body)
        follow = start_run(svc, who, space_id, agent_id, thread_id, request,
                           headers.get("idempotency-key"))
        modes, after, first = _modes(request.stream_mode), 0, True
        if request.command is not None:
            after = last_seq(svc, who, follow.session.session_id, follow.run_id)
    elif method == "GET" and run_id is not None and what in ("stream", "join"):
        session = find_thread(svc, who, space_id, agent_id, thread_id)
        svc.run(who, session.session_id, run_id)  # 404 when not this thread's
        follow = LangGraphThread(svc, who, session, thread_id, run_id)
        modes, first = _modes(query.get("stream_mode") or ["values"]), False
        last = headers.get("last-event-id", "0").strip()
        after = int(last) if last.isdigit() else 0
    else:
        raise NotFound("no such route", code="route_not_found")
    # a reconnect sends no stream_mode of its own: the Location carries the request's
    location = f"{base}/{follow.run_id}/stream?" + "&".join(f"stream_mode={m}" for m in modes)
    if what in ("wait", "join"):
        return {"Content-Type": "application/json", "Content-Location": location}, \
            _waited(follow, budget)
    return {"Content-Type": "text/event-stream", "Cache-Control": "no-store",
            "Location": location, "Content-Location": location}, \
        follow.stream(modes, after, budget, first=first)


def _waited(follow: LangGraphThread, budget: float) -> Iterator[bytes]:
    """``wait`` / ``join``: the thread's values once the run stopped (its interrupt
    included), or as they are when ``budget`` ran out."""
    for _ in follow.stream(("values",), 0, budget, first=False):
        pass
    values = ThreadMessages(follow.svc, follow.who, follow.session.session_id).values()
    view = follow.svc.run(follow.who, follow.session.session_id, follow.run_id)
    if view.status in ("blocked", "interrupted"):
        values["__interrupt__"] = [{"value": interrupt(view), "id": view.run_id}]
    yield json.dumps(values, ensure_ascii=False).encode()


TAGS = ["interop"]


def register(app: ApiResolver, admin: AdminService, sessions: SessionService) -> None:
    _thread_routes(app, sessions)
    _run_routes(app, sessions)


def _thread_routes(app: ApiResolver, sessions: SessionService) -> None:
    tags, who = TAGS, app.principal

    @app.post(f"{BASE}/threads", tags=tags, responses=declare(404, 409, body=True))
    def langgraph_create_thread(space_id: str, agent_id: str,
                                body: ThreadIn) -> dict[str, Any]:
        thread_id = body.thread_id or str(uuid.uuid4())
        try:
            existing = find_thread(sessions, who(), space_id, agent_id, thread_id)
        except NotFound:
            existing = None
        if existing is not None and body.if_exists == "raise":
            raise Conflict(f"thread {thread_id} exists", code="thread_exists")
        session = existing or thread_session(sessions, who(), space_id, agent_id, thread_id)
        return thread_out(session, thread_id)

    @app.get(f"{BASE}/threads/<thread_id>", tags=tags, responses=declare(404))
    def langgraph_get_thread(space_id: str, agent_id: str, thread_id: str) -> dict[str, Any]:
        return _thread(sessions, who(), space_id, agent_id, thread_id)

    @app.get(f"{BASE}/threads/<thread_id>/state", tags=tags, responses=declare(404))
    def langgraph_thread_state(space_id: str, agent_id: str,
                               thread_id: str) -> dict[str, Any]:
        thread = _thread(sessions, who(), space_id, agent_id, thread_id)
        interrupts = thread["interrupts"].get(thread_id, [])
        return {"values": thread["values"], "next": [], "tasks": [
            {"id": i["id"], "name": "agent", "interrupts": [i]} for i in interrupts],
            "interrupts": interrupts, "metadata": thread["metadata"],
            "created_at": thread["updated_at"], "checkpoint": {
                "thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": None},
            "parent_checkpoint": None}



def _run_routes(app: ApiResolver, sessions: SessionService) -> None:
    tags, who = TAGS, app.principal

    @app.post(f"{BASE}/threads/<thread_id>/runs", tags=tags,
              responses=declare(404, 409, body=True))
    def langgraph_create_run(space_id: str, agent_id: str, thread_id: str,
                             body: RunIn) -> dict[str, Any]:
        _modes(body.stream_mode)
        follow = start_run(sessions, who(), space_id, agent_id, thread_id, body,
                           (app.current_event.headers or {}).get("idempotency-key"))
        view = sessions.run(who(), follow.session.session_id, follow.run_id)
        return run_out(view, thread_id, agent_id)

    @app.get(f"{BASE}/threads/<thread_id>/runs", tags=tags, responses=declare(404))
    def langgraph_list_runs(space_id: str, agent_id: str,
                            thread_id: str) -> list[dict[str, Any]]:
        session = find_thread(sessions, who(), space_id, agent_id, thread_id)
        return [run_out(sessions.run(who(), session.session_id, r.run_id), thread_id,
                        agent_id) for r in reversed(sessions.runs(who(), session.session_id))]

    @app.get(f"{BASE}/threads/<thread_id>/runs/<run_id>", tags=tags, responses=declare(404))
    def langgraph_get_run(space_id: str, agent_id: str, thread_id: str,
                          run_id: str) -> dict[str, Any]:
        session = find_thread(sessions, who(), space_id, agent_id, thread_id)
        return run_out(sessions.run(who(), session.session_id, run_id), thread_id, agent_id)

    @app.post(f"{BASE}/threads/<thread_id>/runs/<run_id>/cancel", tags=tags,
              status_code=204, responses=declare(404, 409, ok={204: "Cancelled"}))
    def langgraph_cancel_run(space_id: str, agent_id: str, thread_id: str,
                             run_id: str) -> Response[str]:
        session = find_thread(sessions, who(), space_id, agent_id, thread_id)
        sessions.cancel(who(), session.session_id, run_id, "cancelled from a LangGraph client")
        return Response(status_code=204, body="")

    def streamed(space_id: str, agent_id: str, thread_id: str, run_id: str | None,
                 what: str) -> Response[str]:
        event = app.current_event
        headers = {k.lower(): v for k, v in (event.headers or {}).items()}
        query = {k: v.split(",") for k, v in (event.query_string_parameters or {}).items()}
        streams = app.can_stream()  # serve: written as they happen (ApiResolver.stream)
        out, body = stream_request(sessions, who(), (space_id, agent_id, thread_id, run_id,
                                                     what), event.http_method, headers, query,
                                   (event.decoded_body or "").encode(),
                                   app.stream_budget() if streams else BUFFERED_S)
        content_type = out.pop("Content-Type")
        if streams:
            app.stream(guarded(body, stream_error))
        return Response(status_code=200, content_type=content_type,
                        body="" if streams else b"".join(body).decode(), headers=out)

    sse = declare(404, 409, body=True)
    sse[200] = {"description": "Stream parts (Server-Sent Events)",
                "content": {"text/event-stream": {"schema": {"type": "string"}}}}

    @app.post(f"{BASE}/threads/<thread_id>/runs/stream", tags=tags, responses=sse)
    def langgraph_stream_run(space_id: str, agent_id: str, thread_id: str,
                             body: RunIn) -> Response[str]:
        return streamed(space_id, agent_id, thread_id, None, "stream")

    @app.post(f"{BASE}/threads/<thread_id>/runs/wait", tags=tags,
              responses=declare(404, 409, body=True))
    def langgraph_wait_run(space_id: str, agent_id: str, thread_id: str,
                           body: RunIn) -> Response[str]:
        return streamed(space_id, agent_id, thread_id, None, "wait")

    @app.get(f"{BASE}/threads/<thread_id>/runs/<run_id>/stream", tags=tags,
             responses={k: v for k, v in sse.items() if k not in (400, 413)})
    def langgraph_join_stream(space_id: str, agent_id: str, thread_id: str,
                              run_id: str) -> Response[str]:
        return streamed(space_id, agent_id, thread_id, run_id, "stream")

    @app.get(f"{BASE}/threads/<thread_id>/runs/<run_id>/join", tags=tags,
             responses=declare(404))
    def langgraph_join_run(space_id: str, agent_id: str, thread_id: str,
                           run_id: str) -> Response[str]:
        return streamed(space_id, agent_id, thread_id, run_id, "join")


def _thread(svc: SessionService, who: Principal, space_id: str, agent_id: str,
            thread_id: str) -> dict[str, Any]:
    session = find_thread(svc, who, space_id, agent_id, thread_id)
    messages = ThreadMessages(svc, who, session.session_id)
    runs = svc.runs(who, session.session_id)
    status, interrupts = "idle", {}
    if runs:
        view = svc.run(who, session.session_id, runs[-1].run_id)
        if view.status in ("queued", "running"):
            status = "busy"
        elif view.status in ("blocked", "interrupted"):
            status = "interrupted"
            interrupts = {thread_id: [{"value": interrupt(view), "id": view.run_id}]}
        elif view.status == "failed":
            status = "error"
    out = thread_out(session, thread_id, status, messages.values())
    out["interrupts"] = interrupts
    return out
