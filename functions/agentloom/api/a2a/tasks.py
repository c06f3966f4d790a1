"""The A2A methods over the platform's services: every call goes through the same
``AdminService`` / ``SessionService`` calls the HTTP routes make (membership, creator-only
session content, idempotency, leases), so there is no second execution path.

- ``SendMessage``: a message without ``taskId`` asks its text as a new run in its context
  (``contexts``); it waits for the run to stop (up to ``WAIT_S``, unless
  ``configuration.returnImmediately``) and answers the task. A message with ``taskId``
  talks to that run: text to a running one is queued as a supplement; a data part
  ``{"resume": {...}}`` or ``{"resolve": {"verdict": ...}}`` (the fields of the API's
  resume and resolve bodies) takes a stopped run's way out.
- ``SendStreamingMessage`` / ``SubscribeToTask``: the task, then a status update at each
  change of state, then the answer artifact and the last status (terminal, or
  input-required). ``follow`` yields ``None`` while nothing happens (a keep-alive).
- ``GetTask``, ``CancelTask``.

Platform errors become A2A errors (``rpc_error``): not found → TaskNotFound (the same
answer for another user's task as for no task), a run that ended → TaskNotCancelable or
UnsupportedOperation, bad fields → InvalidParams.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from pydantic import ValidationError

from agentloom.api.a2a import contexts
from agentloom.api.a2a.states import STATES, TERMINAL, answer_artifact, task_of, task_status
from agentloom.api.a2a.wire import (
    INVALID_PARAMS,
    TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND,
    UNSUPPORTED_OPERATION,
    Message,
    RpcError,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatusUpdateEvent,
)
from agentloom.api.models import ResolveIn, ResumeIn
from agentloom.platform.access import MAX_WAIT_S, check_id
from agentloom.platform.admin import AdminService
from agentloom.platform.domain import Agent
from agentloom.platform.errors import NotFound, PlatformError
from agentloom.platform.identity import Principal
from agentloom.platform.sessions import SessionService
from agentloom.platform.views import RunView

WAIT_S = MAX_WAIT_S  # a blocking SendMessage waits this long for the run to stop
STREAM_WAIT_S = 15.0  # one long poll of a stream (a keep-alive after each empty one)
INTERRUPTED_GRACE_S = 1.0  # how long a stream looks past "interrupted" (``_moves_on``)


class A2ATasks:
    def __init__(self, admin: AdminService, sessions: SessionService) -> None:
        self.admin, self.sessions = admin, sessions

    # -- the endpoint's agent ----------------------------------------------------------

    def agent(self, who: Principal, space_id: str, agent_id: str) -> Agent:
        """The agent (a member's view), refused when it has no published version."""
        agent = self.admin.agent(who, space_id, agent_id)
        if not agent.latest_version:
            raise RpcError(UNSUPPORTED_OPERATION, f"agent {agent_id} has no published "
                           "version yet", "agent_not_published")
        return agent

    def view(self, who: Principal, space_id: str, agent_id: str, task_id: str) -> RunView:
        """The run ``task_id`` as its creator sees it, if it is this agent's."""
        try:
            check_id(task_id, "run", "run")
            session_id = self.sessions.store.runs.session_of(task_id)
            if session_id is None:
                raise NotFound(f"run {task_id} not found", code="run_not_found")
            view = self.sessions.run(who, session_id, task_id)
        except NotFound:
            raise RpcError(TASK_NOT_FOUND, f"task {task_id[:80]!r} not found",
                           "task_not_found") from None
        if view.space_id != space_id or view.agent_id != agent_id:
            raise RpcError(TASK_NOT_FOUND, f"task {task_id[:80]!r} not found",
                           "task_not_found")
        return view

    # -- SendMessage ---------------------------------------------------------------------

    def send(self, who: Principal, space_id: str, agent_id: str,
             request: SendMessageRequest) -> RunView:
        """Start (or, a retried messageId, find) the run of ``request``, or talk to the
        run its ``taskId`` names; the run's view right after."""
        message = request.message
        self.agent(who, space_id, agent_id)
        if message.taskId:
            return self._to_task(who, space_id, agent_id, message)
        text = _text(message)
        if message.contextId:
            try:
                session = contexts.own_context(self.sessions, who, agent_id,
                                               message.contextId)
            except NotFound:
                raise RpcError(INVALID_PARAMS, "contextId: no such context of this agent (a "
                               "session of yours)", "context_not_found") from None
        else:
            session = contexts.first_context(self.sessions, who, space_id, agent_id,
                                             message.messageId)
        run, _ = self.sessions.ask(who, session.session_id, text,
                                   contexts.idempotency_key(message.messageId))
        return self.sessions.run(who, session.session_id, run.run_id)

    def _to_task(self, who: Principal, space_id: str, agent_id: str,
                 message: Message) -> RunView:
        view = self.view(who, space_id, agent_id, str(message.taskId))
        if message.contextId and message.contextId != view.session_id:
            raise RpcError(INVALID_PARAMS, f"task {view.run_id} is in context "
                           f"{view.session_id}, not {message.contextId}", "context_mismatch")
        if STATES[view.status] in TERMINAL:
            raise RpcError(UNSUPPORTED_OPERATION, f"task {view.run_id} is {view.status}: it "
                           "takes no more messages; send a new message (same contextId, no "
                           "taskId) to ask again", "task_ended")
        data = [p.data for p in message.parts if isinstance(p.data, dict)]
        session, run = view.session_id, view.run_id
        if data:
            action = data[0]
            try:
                if set(action) == {"resume"}:
                    body = ResumeIn.model_validate(action["resume"] or {})
                    raised = body.raise_budget
                    self.sessions.resume(
                        who, session, run, retry_unknown_models=body.retry_unknown_models,
                        confirm_hooks=body.confirm_hooks,
                        max_tokens=raised.max_tokens if raised else None,
                        max_cost=raised.max_cost if raised else None,
                        note=raised.note if raised else "")
                elif set(action) == {"resolve"}:
                    verdict = ResolveIn.model_validate(action["resolve"] or {})
                    self.sessions.resolve(who, session, run, verdict.verdict,
                                          note=verdict.note, output=verdict.output,
                                          exit_code=verdict.exit_code,
                                          drive_on=verdict.drive_on)
                else:
                    raise RpcError(INVALID_PARAMS, 'a data part to a task is {"resume": '
                                   '{...}} or {"resolve": {"verdict": ...}}', "invalid_reply")
            except ValidationError as err:
                raise RpcError(INVALID_PARAMS, _fields(err), "invalid_field") from None
        elif view.status in ("queued", "running"):
            self.sessions.supplement(who, session, run, _text(message))
        else:
            raise RpcError(INVALID_PARAMS, f"task {run} is {view.status}: reply with its "
                           "way out (a data part; see its status message), not text",
                           "way_out_expected")
        return self.sessions.run(who, session, run)

    def settle(self, who: Principal, view: RunView, wait: float) -> RunView:
        """The run once it stopped (any state but queued / running), or after ``wait``."""
        deadline = time.monotonic() + wait
        after = 0
        while True:
            remaining = deadline - time.monotonic()
            page = self.sessions.events(who, view.session_id, view.run_id, after=after,
                                        wait=max(0.0, min(remaining, MAX_WAIT_S)), limit=500)
            after = page.next_after
            if page.done or remaining <= 0:
                return self.sessions.run(who, view.session_id, view.run_id)

    # -- GetTask, CancelTask -------------------------------------------------------------

    def get(self, who: Principal, space_id: str, agent_id: str, task_id: str) -> Task:
        return task_of(self.view(who, space_id, agent_id, task_id))

    def cancel(self, who: Principal, space_id: str, agent_id: str, task_id: str) -> Task:
        view = self.view(who, space_id, agent_id, task_id)
        if STATES[view.status] in TERMINAL:
            raise RpcError(TASK_NOT_CANCELABLE, f"task {task_id} is {view.status}",
                           "task_not_cancelable")
        try:
            self.sessions.cancel(who, view.session_id, view.run_id, "canceled over A2A")
        except PlatformError as err:
            if err.code != "run_ended":
                raise
            raise RpcError(TASK_NOT_CANCELABLE, err.message, "task_not_cancelable") from None
        return task_of(self.sessions.run(who, view.session_id, view.run_id))

    # -- streams ---------------------------------------------------------------------------

    def follow(self, who: Principal, view: RunView,
               budget: float | None = None) -> Iterator[StreamResponse | None]:
        """The task, then its changes until it stops (or ``budget`` seconds pass)."""
        deadline = None if budget is None else time.monotonic() + budget
        yield StreamResponse(task=task_of(view))
        state, after = STATES[view.status], 0
        while True:
            wait = STREAM_WAIT_S if deadline is None else \
                max(0.0, min(STREAM_WAIT_S, deadline - time.monotonic()))
            page = self.sessions.events(who, view.session_id, view.run_id, after=after,
                                        wait=wait, limit=500)
            after = page.next_after
            if page.done:
                if not self._moves_on(who, view, page.status, after):
                    break
            elif STATES[page.status] != state:
                state = STATES[page.status]
                yield StreamResponse(statusUpdate=TaskStatusUpdateEvent(
                    taskId=view.run_id, contextId=view.session_id,
                    status=task_status(self.sessions.run(who, view.session_id,
                                                         view.run_id))))
            elif not page.items:
                yield None
            if deadline is not None and time.monotonic() >= deadline:
                return
        last = self.sessions.run(who, view.session_id, view.run_id)
        artifact = answer_artifact(last)
        if artifact is not None:
            yield StreamResponse(artifactUpdate=TaskArtifactUpdateEvent(
                taskId=last.run_id, contextId=last.session_id, artifact=artifact))
        yield StreamResponse(statusUpdate=TaskStatusUpdateEvent(
            taskId=last.run_id, contextId=last.session_id, status=task_status(last)))

    def _moves_on(self, who: Principal, view: RunView, status: str, after: int) -> bool:
        """Whether a run that looks interrupted is in fact moving on: a cancel stops its
        driver first (interrupted for a moment) and records the cancellation after."""
        if status != "interrupted":
            return False
        deadline = time.monotonic() + INTERRUPTED_GRACE_S
        while time.monotonic() < deadline:
            time.sleep(0.05)
            if self.sessions.events(who, view.session_id, view.run_id, after=after,
                                    limit=1).items:
                return True
        return False

    def subscribe(self, who: Principal, space_id: str, agent_id: str,
                  task_id: str) -> RunView:
        view = self.view(who, space_id, agent_id, task_id)
        if STATES[view.status] in TERMINAL:
            raise RpcError(UNSUPPORTED_OPERATION, f"task {task_id} is {view.status}: "
                           "nothing follows; GetTask reads it", "task_ended")
        return view


def _text(message: Message) -> str:
    text = "\n".join(p.text for p in message.parts if p.text)
    if not text.strip():
        raise RpcError(INVALID_PARAMS, "the message has no text part: a question is text",
                       "empty_message")
    return text


def _fields(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "(data)"
    return f"{where}: {first.get('msg', 'invalid')}"
