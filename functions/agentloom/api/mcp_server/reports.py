"""What the MCP tools answer about a run: ``RunReport`` (the tools' ``structuredContent``
and ``outputSchema``), its text for a model or a person, and the next calls in MCP
terms (the tool to call and its arguments), from the same ``RunView`` the HTTP API
returns: ``way_out`` and the verdicts that apply come from the platform
(``agentloom.platform.views``), never from a second rule here."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from agentloom.platform.domain import RunState
from agentloom.platform.errors import PlatformError
from agentloom.platform.views import TOOL_VERDICTS, VERDICTS, EventItem, RunView

MOVING = ("queued", "running")


class RunReport(BaseModel):
    """A run as the caller sees it after a tool call."""

    session_id: str = Field(description="Pass it to ask to continue this conversation.")
    run_id: str
    status: RunState = Field(description="queued, running, blocked, interrupted, "
                             "completed, failed or cancelled")
    done: bool = Field(description="The run stopped: nothing moves it on until its way "
                       "out is taken (next).")
    answer: str | None = Field(default=None, description="The answer, once completed.")
    way_out: str | None = Field(default=None, description="What moves a stopped run on: "
                                "resume, resolve, confirm_hooks, raise_budget, "
                                "change_model, new_question.")
    next: list[str] = Field(default_factory=list, description="The tool calls that move "
                            "the run on, as `tool {arguments}`.")
    error: dict[str, str] | None = None
    unknown: dict[str, Any] | None = Field(default=None, description="When blocked on an "
                                           "operation of unknown outcome: what is unknown, "
                                           "what the host knows, the verdicts that apply.")
    after: int = Field(default=0, description="The run's event cursor: pass it to "
                       "run_status to follow on from here.")
    created: bool | None = Field(default=None, description="ask: false when this "
                                 "idempotency_key made the run earlier.")


def run_report(view: RunView, after: int, created: bool | None = None) -> RunReport:
    done = view.status not in MOVING and not view.driven
    return RunReport(session_id=view.session_id, run_id=view.run_id, status=view.status,
                     done=done, answer=view.answer, way_out=view.way_out if done else None,
                     next=mcp_next(view, after, done), error=view.error,
                     unknown=view.unknown, after=after, created=created)


def _call(tool: str, **arguments: Any) -> str:
    return f"{tool} {json.dumps(arguments, ensure_ascii=False)}"


def verdicts_of(view: RunView) -> list[str]:
    """The verdicts that resolve ``view`` (what the API's ``next`` lists too)."""
    unknown = view.unknown or {}
    code = str((view.error or {}).get("code", ""))
    given = unknown.get("verdicts")
    return [str(v) for v in given] if given else list(VERDICTS.get(code, TOOL_VERDICTS))


def mcp_next(view: RunView, after: int, done: bool) -> list[str]:
    ref = {"session_id": view.session_id, "run_id": view.run_id}
    if not done:
        return [_call("run_status", **ref, after=after)]
    way_out = view.way_out
    if way_out == "resume":
        return [_call("resume_run", **ref)]
    if way_out == "confirm_hooks":
        return [_call("resume_run", **ref, confirm_hooks=True)]
    if way_out == "raise_budget":
        return [_call("resume_run", **ref, raise_budget={"max_tokens": "N"})
                + " (N above what the run used; space admins and owners)"]
    if way_out == "resolve":
        return [_call("resolve_run", **ref, verdict=kind) for kind in verdicts_of(view)]
    if way_out == "change_model":
        return ["an admin of the space fixes the agent's model and publishes it; then "
                + _call("ask", question="...")]
    if way_out == "new_question":
        return [_call("ask", session_id=view.session_id, question="...")]
    return []


def report_text(report: RunReport) -> str:
    """The report in a sentence or two; a completed run's text is its answer."""
    if report.status == "completed":
        return report.answer or "(the run completed without an answer)"
    head = f"Run {report.run_id} is {report.status}"
    if not report.done:
        return f"{head}. Follow it: {report.next[0]}"
    error = report.error or {}
    reason = f": {error['message']}" if error.get("message") else ""
    if report.status == "blocked" and report.way_out == "resolve":
        return (f"{head}{reason}. An operation of unknown outcome blocks it (see unknown); "
                "say what happened with one of: " + "; ".join(report.next))
    moves = "; ".join(report.next)
    return f"{head}{reason}." + (f" Way out: {moves}" if moves else "")


def error_text(err: PlatformError) -> str:
    return f"{err.code}: {err.message}"


def progress_message(item: EventItem) -> str:
    """One event of the run in a few words (no content: events carry none)."""
    data = item.data
    detail = [str(data[key]) for key in ("status", "purpose", "name", "instance", "verdict")
              if isinstance(data.get(key), str | int) and data.get(key) != ""]
    return f"{item.type} ({', '.join(detail)})" if detail else item.type
