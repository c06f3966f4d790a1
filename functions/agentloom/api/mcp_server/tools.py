"""The MCP tools of an agent's (or a space's) MCP server, each a call of the
``SessionService`` the HTTP routes call — no second execution path:

    ask          create_session (unless session_id) → ask → events (wait) → run
    run_status   events after a cursor (wait) → run
    resume_run   resume (confirm_hooks, retry_unknown_models, raise_budget)
    resolve_run  resolve (the verdict on an operation of unknown outcome)
    cancel_run   cancel

Authorization is the services': a session is its creator's alone (another user's is
``session_not_found``), and it must be a session of this endpoint's agent (of the
space, on a space's endpoint). While a tool waits for a run it reports each event of
the run as a progress notification when the request streams (``agentloom serve``, a
``progressToken``) and waits up to ``MAX_STREAM_WAIT_S``; a JSON answer waits at most
``MAX_JSON_WAIT_S`` (API Gateway's integration timeout is 29 s).
A platform error is a tool result with ``isError`` (``code: message``, and the API's
error body as ``structuredContent``), as MCP asks of errors a model could act on.

Errors (the tree is drawn in ``protocol``)::

    AgentLoomError (agentloom_runtime)
    └── UnknownTool   a tools/call of no such tool (raised before any service call)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from agentloom.api.mcp_server.reports import (
    RunReport,
    error_text,
    report_text,
    run_report,
)
from agentloom.api.models import CancelIn, ResolveIn, ResumeIn
from agentloom.platform.access import MAX_QUESTION_CHARS, MAX_WAIT_S
from agentloom.platform.domain import Agent
from agentloom.platform.errors import NotFound, PlatformError, field_errors
from agentloom.platform.identity import Principal
from agentloom.platform.sessions import SessionService
from agentloom.platform.views import EventItem
from agentloom_runtime.errors import AgentLoomError, PersistenceError

MAX_JSON_WAIT_S = MAX_WAIT_S  # one JSON answer: within API Gateway's 29 s
MAX_STREAM_WAIT_S = 120.0  # a streamed answer (serve; within the client's read timeout)
Progress = Callable[[EventItem], bool]  # False: the client went away


class UnknownTool(AgentLoomError):
    """A ``tools/call`` of a tool this server does not have (a protocol error: the
    endpoint answers ``-32602``; see the tree in ``protocol``)."""

    code = "mcp_unknown_tool"


_WAIT = Field(default=20.0, ge=0, le=MAX_STREAM_WAIT_S, allow_inf_nan=False,
              description=f"How long to wait for the run to stop (seconds). A JSON answer "
              f"waits at most {MAX_JSON_WAIT_S:g} s; one streamed with progress "
              f"notifications (a progressToken, agentloom serve) up to "
              f"{MAX_STREAM_WAIT_S:g} s.")
_ID = Field(min_length=1, max_length=64)


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AskArgs(_Args):
    question: StrictStr = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    session_id: StrictStr | None = Field(default=None, max_length=64, description=(
        "One of your sessions with this agent, to continue its conversation; without "
        "it a new session is created (its id is in the result)."))
    idempotency_key: StrictStr | None = Field(default=None, min_length=1, max_length=200,
                                              description="A retried ask with the same "
                                              "key returns the same run (24 hours).")
    wait_seconds: float = _WAIT


class SpaceAskArgs(AskArgs):
    agent_id: StrictStr = Field(min_length=1, max_length=64,
                                description="The published agent to ask (see the list).")


class RunRef(_Args):
    session_id: StrictStr = _ID
    run_id: StrictStr = _ID


class StatusArgs(RunRef):
    after: int = Field(default=0, ge=0, strict=True, description="The event cursor of "
                       "an earlier report: only later events are reported as progress.")
    wait_seconds: float = _WAIT


class ResumeArgs(ResumeIn, RunRef):
    pass


class ResolveArgs(ResolveIn, RunRef):
    pass


class CancelArgs(CancelIn, RunRef):
    pass


@dataclass(frozen=True)
class Scope:
    """What one MCP endpoint serves: an agent of a space (``agent``) or every published
    agent of the space (``agent`` None)."""

    space_id: str
    agent: Agent | None
    agents: tuple[Agent, ...]


@dataclass(frozen=True)
class _Tool:
    name: str
    title: str
    args: type[BaseModel]
    description: str
    annotations: dict[str, bool]


_RUN_TOOLS = (
    _Tool("run_status", "Follow a run", StatusArgs,
          "A run's status: waits up to wait_seconds for it to stop (events reported as "
          "progress), then its answer, or what blocks it and the tool call that moves it "
          "on (next).", {"readOnlyHint": True, "idempotentHint": True}),
    _Tool("resume_run", "Resume a run", ResumeArgs,
          "Resume a stopped run: interrupted (nothing drives it), confirm_hooks, "
          "retry_unknown_models, or raise_budget (space admins and owners).",
          {"readOnlyHint": False}),
    _Tool("resolve_run", "Resolve a blocked run", ResolveArgs,
          "Say what happened to the operation of unknown outcome that blocks a run "
          "(its report's unknown and next): ran / did_not_run / run_again for a tool or "
          "command, send_again / treat_as_failed for a model call; then it drives on.",
          {"readOnlyHint": False, "destructiveHint": True}),
    _Tool("cancel_run", "Cancel a run", CancelArgs,
          "Cancel a run that has not ended (an in-flight command is killed).",
          {"readOnlyHint": False, "destructiveHint": True}),
)


class Toolbox:
    def __init__(self, sessions: SessionService, who: Principal, scope: Scope) -> None:
        self.sessions, self.who, self.scope = sessions, who, scope

    # -- tools/list ----------------------------------------------------------------------

    def descriptors(self) -> list[dict[str, Any]]:
        output = RunReport.model_json_schema()
        tools = [self._ask_tool(), *_RUN_TOOLS]
        out = []
        for tool in tools:
            schema = tool.args.model_json_schema()
            if tool.name == "ask" and self.scope.agent is None:
                published = [a.agent_id for a in self.scope.agents]
                if published:
                    schema["properties"]["agent_id"]["enum"] = published
            out.append({"name": tool.name, "title": tool.title,
                        "description": tool.description, "inputSchema": schema,
                        "outputSchema": output, "annotations": tool.annotations})
        return out

    def _ask_tool(self) -> _Tool:
        how = ("starts a run in a session (a new one unless session_id names one of "
               "yours) and waits up to wait_seconds for its answer; a run still going is "
               "reported with the run_status call that follows it, a stopped one with "
               "its way out (next).")
        agent = self.scope.agent
        if agent is not None:
            state = f"published version {agent.latest_version}" if agent.latest_version \
                else "not published yet: ask answers agent_not_published"
            return _Tool("ask", f"Ask {agent.name}", AskArgs,
                         f"Ask {agent.name} (agent {agent.agent_id}, {state}) a question: "
                         + how, {"readOnlyHint": False, "openWorldHint": True})
        names = "; ".join(f"{a.agent_id}: {a.name}" for a in self.scope.agents) or \
            "none is published yet"
        return _Tool("ask", "Ask an agent", SpaceAskArgs,
                     f"Ask one of this space's published agents ({names}) a question: "
                     + how, {"readOnlyHint": False, "openWorldHint": True})

    # -- tools/call ----------------------------------------------------------------------

    def call(self, name: str, arguments: dict[str, Any],
             progress: Progress | None) -> dict[str, Any]:
        tool = next((t for t in (self._ask_tool(), *_RUN_TOOLS) if t.name == name), None)
        runs: dict[str, Callable[[Any, Progress | None], RunReport]] = {
            "ask": self._ask, "run_status": self._run_status, "resume_run": self._resume_run,
            "resolve_run": self._resolve_run, "cancel_run": self._cancel_run}
        run = runs.get(name)
        if tool is None or run is None:
            raise UnknownTool(f"unknown tool: {name[:80]}")
        try:
            report = run(tool.args.model_validate(arguments), progress)
        except ValidationError as err:
            return _error(field_errors([dict(e) for e in err.errors()]))
        except PlatformError as err:
            return _error(err)
        except PersistenceError:
            raise  # the API's 503 (the store is busy): a retry, not the model's concern
        except AgentLoomError as err:
            return _error(PlatformError(err.message, code=err.code))
        return {"content": [{"type": "text", "text": report_text(report)}],
                "structuredContent": report.model_dump(mode="json"),
                "isError": report.status == "failed"}

    def _ask(self, args: AskArgs, progress: Progress | None) -> RunReport:
        agent_id = args.agent_id if isinstance(args, SpaceAskArgs) else \
            self._agent().agent_id
        if isinstance(args, SpaceAskArgs) and \
                agent_id not in {a.agent_id for a in self.scope.agents}:
            raise NotFound(f"agent {agent_id[:80]!r} not found (or not published)",
                           code="agent_not_found")
        if args.session_id is not None:
            session_id = self._session(args.session_id, agent_id)
        else:
            session_id = self.sessions.create_session(
                self.who, self.scope.space_id, agent_id,
                title=args.question.strip()[:80]).session_id
        run, created = self.sessions.ask(self.who, session_id, args.question,
                                         args.idempotency_key)
        return self._follow(session_id, run.run_id, 0, args.wait_seconds, progress,
                            created=created)

    def _run_status(self, args: StatusArgs, progress: Progress | None) -> RunReport:
        self._session(args.session_id)
        return self._follow(args.session_id, args.run_id, args.after, args.wait_seconds,
                            progress)

    def _resume_run(self, args: ResumeArgs, progress: Progress | None) -> RunReport:
        self._session(args.session_id)
        raised = args.raise_budget
        view = self.sessions.resume(
            self.who, args.session_id, args.run_id,
            retry_unknown_models=args.retry_unknown_models, confirm_hooks=args.confirm_hooks,
            max_tokens=raised.max_tokens if raised else None,
            max_cost=raised.max_cost if raised else None, note=raised.note if raised else "")
        return run_report(view, 0)

    def _resolve_run(self, args: ResolveArgs, progress: Progress | None) -> RunReport:
        self._session(args.session_id)
        view = self.sessions.resolve(self.who, args.session_id, args.run_id, args.verdict,
                                     note=args.note, output=args.output,
                                     exit_code=args.exit_code, drive_on=args.drive_on)
        return run_report(view, 0)

    def _cancel_run(self, args: CancelArgs, progress: Progress | None) -> RunReport:
        self._session(args.session_id)
        return run_report(self.sessions.cancel(self.who, args.session_id, args.run_id,
                                               args.reason), 0)

    # -- helpers -------------------------------------------------------------------------

    def _agent(self) -> Agent:
        assert self.scope.agent is not None  # an agent's endpoint
        return self.scope.agent

    def _session(self, session_id: str, agent_id: str | None = None) -> str:
        """The caller's own session, of this endpoint's agent (or space): else 404, the
        same answer as for a session that does not exist."""
        session = self.sessions.session(self.who, session_id)
        wanted = agent_id or (self.scope.agent.agent_id if self.scope.agent else None)
        if session.space_id != self.scope.space_id or \
                (wanted is not None and session.agent_id != wanted):
            raise NotFound(f"session {session_id} not found", code="session_not_found")
        return session_id

    def _follow(self, session_id: str, run_id: str, after: int, wait: float,
                progress: Progress | None, *, created: bool | None = None) -> RunReport:
        """Events after ``after`` until the run stops or ``wait`` (capped) has passed,
        each reported to ``progress``; then the run's view."""
        cap = MAX_STREAM_WAIT_S if progress is not None else MAX_JSON_WAIT_S
        deadline = time.monotonic() + min(wait, cap)
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            page = self.sessions.events(self.who, session_id, run_id, after=after,
                                        wait=min(remaining, MAX_WAIT_S))
            after = page.next_after
            gone = progress is not None and not all(progress(item) for item in page.items)
            if page.done or gone or deadline - time.monotonic() <= 0:
                break
        view = self.sessions.run(self.who, session_id, run_id)
        return run_report(view, after, created)


def _error(err: PlatformError) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": error_text(err)}],
            "structuredContent": err.body(), "isError": True}
