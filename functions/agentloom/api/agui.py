"""AG-UI (docs/interop.md#ag-ui): a published agent behind the AG-UI protocol, a thin
facade over sessions, runs and the run's event log — no second execution path.

    POST /api/v1/spaces/{s}/agents/{a}/ag-ui      member (RunAgentInput → AG-UI events)

The client's ``threadId`` is the caller's session with the agent (``platform.threads``);
its ``runId`` names one ask (the idempotency key of ``POST /sessions/{e}/runs``, so a
retried request follows the run it started instead of starting another). The answer is
Server-Sent Events (``data:`` one AG-UI event as JSON; ``id:`` the AgentLoom event seq it
came from): a stream that ends before RUN_FINISHED / RUN_ERROR is resumed by the same
request with ``forwardedProps.agentloom.after`` (or ``Last-Event-ID``) set to the last
seq seen — it opens with RUN_STARTED again (and STEP_STARTED for a model call still in
flight), then goes on with the next event: none lost, none repeated. On ``serve`` the
events stream as they happen (until ``ApiServer.stream_limit``); through API Gateway,
which cannot stream a Lambda's answer, the route answers the events of up to
``BUFFERED_S`` seconds at once and the client resumes the same way.

A blocked or interrupted run ends with RUN_FINISHED ``outcome: interrupt`` (one interrupt,
id = the AgentLoom run id, its reason the block's code, ``metadata`` the way out and the
API calls that move it on); the next request answers it in ``resume``: ``status:
cancelled`` cancels the run, ``resolved`` with ``payload`` ``{"verdict": …, "note": …}``
records a verdict on the unknown outcome, ``{"resume": true}`` resumes it. A cancelled run
ends with ``outcome: cancelled``, a failed one with RUN_ERROR (its code and message).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from aws_lambda_powertools.event_handler import Response
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from agentloom.api.protocols import (
    answer_interrupt,
    events_until,
    guarded,
    last_seq,
    parse_body,
)
from agentloom.api.routing import declare
from agentloom.platform.errors import Invalid, PlatformError
from agentloom.platform.identity import Principal
from agentloom.platform.store.tenancy import secret_hash
from agentloom.platform.threads import thread_session
from agentloom.platform.views import EventItem, RunView

if TYPE_CHECKING:
    from agentloom.api._resolver import ApiResolver
    from agentloom.platform.admin import AdminService
    from agentloom.platform.sessions import SessionService

P = "/api/v1"
WAIT_S = 15.0  # one long poll of the event log
BUFFERED_S = 20.0  # API Gateway's answer: the events of this long (its limit is 29 s)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Message(_Open):
    id: StrictStr = Field(max_length=200)
    role: StrictStr
    content: Any = None


class ResumeEntry(_Open):
    interruptId: StrictStr = Field(max_length=200)
    status: Literal["resolved", "cancelled"]
    payload: Any = None


class RunAgentInput(_Open):
    """AG-UI's request; ``state``, ``tools`` (frontend tools) and ``context`` are not
    used (docs/interop.md#ag-ui says why)."""

    threadId: StrictStr = Field(min_length=1, max_length=200)
    runId: StrictStr = Field(min_length=1, max_length=200)
    messages: list[Message] = Field(default_factory=list, max_length=10_000)
    resume: list[ResumeEntry] | None = Field(default=None, max_length=1)
    forwardedProps: Any = None


def parse_input(body: bytes | str | None) -> RunAgentInput:
    return parse_body(RunAgentInput, body)


def cursor_of(request: RunAgentInput, headers: Mapping[str, str]) -> int | None:
    """Where a resumed stream goes on: ``forwardedProps.agentloom.after`` or the
    ``Last-Event-ID`` header (None: a new request)."""
    props = request.forwardedProps if isinstance(request.forwardedProps, dict) else {}
    own = props.get("agentloom")
    value: Any = (own if isinstance(own, dict) else {}).get(
        "after", headers.get("last-event-id"))
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise Invalid("forwardedProps.agentloom.after: an event's seq (an integer >= 0)",
                      code="invalid_field", details={"fields": [
                          {"field": "forwardedProps.agentloom.after",
                           "message": "an integer >= 0"}]})
    return value


class RunMessages:
    """The run's messages, read as the events need them: events carry no content (ids
    and sizes only: ``RunTracker``), so text, tool arguments and results come from the
    session's messages — the n-th action of an instance is its n-th assistant message,
    a tool event's ``request_id`` ends with the instance's call number, results are by
    ``tool_call_id`` (as the console joins them)."""

    def __init__(self, svc: SessionService, who: Principal, session_id: str,
                 run_id: str) -> None:
        self._svc, self._who, self._session = svc, who, session_id
        self.run_id, self.after = run_id, 0
        self.replies: dict[str, list[dict[str, Any]]] = {}
        self.calls: dict[str, list[dict[str, Any]]] = {}
        self.results: dict[str, Any] = {}

    def reply(self, instance: str, n: int) -> dict[str, Any] | None:
        return self._nth(self.replies, instance, n)

    def call(self, instance: str, n: int) -> dict[str, Any] | None:
        return self._nth(self.calls, instance, n)

    def result(self, call_id: str) -> Any:
        if call_id not in self.results:
            self._more()
        return self.results.get(call_id)

    def _nth(self, table: dict[str, list[dict[str, Any]]], instance: str,
             n: int) -> dict[str, Any] | None:
        if len(table.get(instance, ())) < n:
            self._more()
        found = table.get(instance, [])
        return found[n - 1] if 0 < n <= len(found) else None

    def _more(self) -> None:
        while True:
            page = self._svc.messages(self._who, self._session, after=self.after, limit=200)
            for item in page.items:
                if item.run_id != self.run_id:
                    continue
                message = item.message
                if message.get("role") == "assistant" and item.kind != "tool_result":
                    self.replies.setdefault(item.instance, []).append(message)
                    self.calls.setdefault(item.instance, []).extend(
                        c for c in message.get("tool_calls") or [] if isinstance(c, dict))
                if item.kind == "tool_result" and message.get("tool_call_id"):
                    self.results[str(message["tool_call_id"])] = message.get("content")
            self.after = page.next_after
            if len(page.items) < 200:
                return


@dataclass
class Translation:
    """AgentLoom events → AG-UI events, with what is open between two of them (model
    calls in flight: AG-UI steps) so a stream resumed mid-run re-opens them."""

    thread_id: str
    run_id: str
    ours: dict[str, str]  # the AgentLoom session and run (RUN_STARTED's metadata)
    messages: RunMessages
    steps: dict[str, str] = field(default_factory=dict)  # op id → step name
    actions: dict[str, int] = field(default_factory=dict)  # instance → actions so far
    calls: dict[str, str] = field(default_factory=dict)  # request id → tool_call id
    message: str | None = None  # the last action's op id: its tool calls' parent

    def opening(self) -> list[dict[str, Any]]:
        started = {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id,
                   "metadata": {"agentloom": self.ours}}
        return [started, *({"type": "STEP_STARTED", "stepName": s}
                           for s in self.steps.values())]

    def event(self, item: EventItem) -> list[dict[str, Any]]:
        data, kind = item.data, item.type
        if kind == "model.started":
            op = str(data.get("op_id"))
            if op in self.steps:
                return []
            self.steps[op] = f"{data.get('purpose', 'model')} {op}"
            return [{"type": "STEP_STARTED", "stepName": self.steps[op]}]
        if kind == "model.completed":
            return self._completed(data)
        if kind == "tool.started":
            return self._tool_started(data)
        if kind == "tool.completed":
            return self._tool_completed(data)
        if kind in ("run.stopped", "run.finished", "run.cancelled"):
            return self._close_steps()
        if kind in ("run.started", "run.status"):
            return []  # the stream's RUN_STARTED; its end says the status
        return [{"type": "CUSTOM", "name": f"agentloom.{kind}", "value": data}]

    def ending(self, view: RunView) -> list[dict[str, Any]]:
        closing = self._close_steps()
        ids = {"threadId": self.thread_id, "runId": self.run_id}
        if view.status == "failed":
            error = view.error or {}
            return [*closing, {"type": "RUN_ERROR", "code": error.get("code", "failed"),
                               "message": error.get("message") or view.reason or "failed"}]
        usage = [{"inputTokens": view.usage.input_tokens,
                  "outputTokens": view.usage.output_tokens,
                  "totalTokens": view.usage.total_tokens}]
        if view.status == "completed":
            outcome: dict[str, Any] = {"type": "success"}
            return [*closing, {"type": "RUN_FINISHED", **ids, "outcome": outcome,
                               "result": view.answer, "usage": usage}]
        if view.status == "cancelled":
            return [*closing, {"type": "RUN_FINISHED", **ids, "outcome": {"type": "cancelled"},
                               "usage": usage}]
        return [*closing, {"type": "RUN_FINISHED", **ids, "usage": usage,
                           "outcome": {"type": "interrupt", "interrupts": [interrupt(view)]}}]

    def _completed(self, data: Mapping[str, Any]) -> list[dict[str, Any]]:
        op, instance = str(data.get("op_id")), str(data.get("instance") or "main")
        out: list[dict[str, Any]] = []
        if data.get("purpose") == "action":
            self.message = op
            n = self.actions[instance] = self.actions.get(instance, 0) + 1
            reply = self.messages.reply(instance, n) or {}
            content = reply.get("content")
            if isinstance(content, str) and content:
                out += [{"type": "TEXT_MESSAGE_START", "messageId": op, "role": "assistant"},
                        {"type": "TEXT_MESSAGE_CONTENT", "messageId": op, "delta": content},
                        {"type": "TEXT_MESSAGE_END", "messageId": op}]
        if op in self.steps:
            out.append({"type": "STEP_FINISHED", "stepName": self.steps.pop(op)})
        return out

    def _tool_started(self, data: Mapping[str, Any]) -> list[dict[str, Any]]:
        request, name = str(data.get("request_id")), str(data.get("name"))
        number = request.rsplit(".", 1)[-1]
        found = self.messages.call(str(data.get("instance") or "main"),
                                   int(number) if number.isdigit() else 0) or {}
        call = str(found.get("id") or request)
        self.calls[request] = call
        arguments = (found.get("function") or {}).get("arguments") or "{}"
        start: dict[str, Any] = {"type": "TOOL_CALL_START", "toolCallId": call,
                                 "toolCallName": name}
        if self.message:
            start["parentMessageId"] = self.message
        return [start, {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": arguments},
                {"type": "TOOL_CALL_END", "toolCallId": call}]

    def _tool_completed(self, data: Mapping[str, Any]) -> list[dict[str, Any]]:
        request = str(data.get("request_id"))
        call = self.calls.get(request, request)
        result = self.messages.result(call)
        out: list[dict[str, Any]] = [{
            "type": "TOOL_CALL_RESULT", "messageId": f"{call}.result", "toolCallId": call,
            "role": "tool", "content": result if isinstance(result, str) else
            json.dumps(result)}]
        if data.get("name") == "update_plan" and data.get("status") == "ok":
            plan = self._plan_of(call)
            if plan is not None:
                out.append({"type": "STATE_SNAPSHOT", "snapshot": {"plan": plan}})
        return out

    def _plan_of(self, call_id: str) -> dict[str, Any] | None:
        for calls in self.messages.calls.values():
            for call in calls:
                if call.get("id") == call_id:
                    try:
                        plan = json.loads(str((call.get("function") or {}).get("arguments")))
                    except ValueError:
                        return None
                    return plan if isinstance(plan, dict) else None
        return None

    def _close_steps(self) -> list[dict[str, Any]]:
        closing = [{"type": "STEP_FINISHED", "stepName": s} for s in self.steps.values()]
        self.steps.clear()
        return closing


def interrupt(view: RunView) -> dict[str, Any]:
    """A stopped run as AG-UI's interrupt: what stopped it and how to answer."""
    code = (view.error or {}).get("code") or view.status
    verdicts = list((view.unknown or {}).get("verdicts") or [])
    if view.way_out == "resolve" and verdicts:
        schema: dict[str, Any] = {"type": "object", "required": ["verdict"], "properties": {
            "verdict": {"enum": verdicts}, "note": {"type": "string", "maxLength": 2000}}}
        how = f"answer with a verdict ({', '.join(verdicts)})"
    else:
        schema = {"type": "object", "required": ["resume"],
                  "properties": {"resume": {"const": True}}}
        how = "answer with {\"resume\": true}, or cancel"
    message = (view.error or {}).get("message") or view.reason or f"the run is {view.status}"
    return {"id": view.run_id, "reason": str(code), "message": f"{message}; {how}",
            "responseSchema": schema,
            "metadata": {"agentloom": {"status": view.status, "way_out": view.way_out,
                                       "unknown": view.unknown, "next": view.next}}}


@dataclass
class Follow:
    """One request's run, opened (asked, or answered and driven on), to stream."""

    svc: SessionService
    who: Principal
    session_id: str
    run_id: str
    translation: Translation
    after: int

    def frames(self, budget: float) -> Iterator[bytes]:
        """SSE frames: the opening, then each event after ``after`` as it comes, then the
        end; stops early (no end) once ``budget`` seconds have passed."""
        yield from _frames(self.translation.opening(), None)
        cursor, deadline = self.after, time.monotonic() + budget
        while True:
            left = deadline - time.monotonic()
            page = self.svc.events(self.who, self.session_id, self.run_id, after=cursor,
                                   wait=max(0.0, min(WAIT_S, left)))
            for item in page.items:
                cursor = item.seq
                yield from _frames(self.translation.event(item), item.seq)
            if page.done:
                view = self.svc.run(self.who, self.session_id, self.run_id)
                yield from _frames(self.translation.ending(view), None)
                return
            if left <= 0:
                return


def _frames(events: list[dict[str, Any]], seq: int | None) -> Iterator[bytes]:
    """One frame per event; the last of an AgentLoom event's carries its seq as ``id``
    (a client resuming from it gets the next event's whole group)."""
    for i, event in enumerate(events):
        if seq is not None:
            event["rawEvent"] = {"agentloom_seq": seq}
        line = f"data: {json.dumps(event, ensure_ascii=False)}\n"
        tail = f"id: {seq}\n\n" if seq is not None and i == len(events) - 1 else "\n"
        yield (line + tail).encode()


def open_run(svc: SessionService, who: Principal, space_id: str, agent_id: str,
             request: RunAgentInput, after: int | None) -> Follow:
    """The request's session and run: a reconnect (``after``) follows the run on; an
    answer to an interrupt (``resume``) acts on the run it names; else the last user
    message is asked. Every refusal is a PlatformError (the HTTP status of the route)."""
    session = thread_session(svc, who, space_id, agent_id, request.threadId)
    sid = session.session_id
    if request.resume:
        entry = request.resume[0]
        run_id = entry.interruptId
        svc.run(who, sid, run_id)  # 404 when it is not this thread's run
        start = last_seq(svc, who, sid, run_id) if after is None else after
        if after is None:
            answer_interrupt(svc, who, sid, run_id, entry.payload,
                             cancelled=entry.status == "cancelled")
    else:
        question = _question(request.messages, reconnect=after is not None)
        key = "ag-ui:" + secret_hash(f"{sid}\n{request.runId}")[:40]
        run, _ = svc.ask(who, sid, question, key)
        run_id, start = run.run_id, after or 0
    translation = Translation(request.threadId, request.runId,
                              {"session_id": sid, "run_id": run_id},
                              RunMessages(svc, who, sid, run_id))
    for item in events_until(svc, who, sid, run_id, start):
        translation.event(item)  # what is open at the cursor
    return Follow(svc, who, sid, run_id, translation, start)


def _question(messages: list[Message], *, reconnect: bool) -> str:
    """The user's question: the last message — or, resuming a stream, the last user
    message (the client has added what the first stream told it since)."""
    users = [m for m in messages if m.role == "user"]
    pool = users if reconnect else messages
    last = pool[-1] if pool else None
    if last is None or last.role != "user":
        raise Invalid("messages: the last message must be the user's question",
                      code="invalid_field", details={"fields": [
                          {"field": "messages", "message": "end with a user message"}]})
    content = last.content
    if isinstance(content, list):
        content = "\n".join(str(p.get("text", "")) for p in content
                            if isinstance(p, dict) and p.get("type") == "text")
    if not isinstance(content, str) or not content.strip():
        raise Invalid("messages: the user's message has no text", code="invalid_field",
                      details={"fields": [{"field": "messages", "message": "no text"}]})
    return content


def register(app: ApiResolver, admin: AdminService, sessions: SessionService) -> None:
    responses = declare(404, 409, body=True)
    responses[200] = {"description": "AG-UI events as Server-Sent Events", "content": {
        "text/event-stream": {"schema": {"type": "string"}}}}

    @app.post(f"{P}/spaces/<space_id>/agents/<agent_id>/ag-ui", tags=["interop"],
              responses=responses)
    def ag_ui(space_id: str, agent_id: str, body: RunAgentInput) -> Response[str]:
        """Run the agent for an AG-UI client (docs/interop.md#ag-ui): the body is AG-UI's
        RunAgentInput, the answer its events as Server-Sent Events (through API Gateway:
        those of up to 20 s, then the client resumes with forwardedProps.agentloom.after)."""
        headers = {k.lower(): v for k, v in (app.current_event.headers or {}).items()}
        follow = open_run(sessions, app.principal(), space_id, agent_id, body,
                          cursor_of(body, headers))
        events = ""
        if app.can_stream():  # serve: written as they happen (ApiResolver.stream)
            app.stream(guarded(follow.frames(app.stream_budget()), stream_error))
        else:
            events = b"".join(follow.frames(BUFFERED_S)).decode()
        return Response(status_code=200, content_type="text/event-stream", body=events,
                        headers={"Cache-Control": "no-cache"})


def stream_error(err: PlatformError) -> bytes:
    """A refusal after the stream began, as AG-UI's RUN_ERROR."""
    event = {"type": "RUN_ERROR", "code": err.code, "message": err.message}
    return f"data: {json.dumps(event)}\n\n".encode()
