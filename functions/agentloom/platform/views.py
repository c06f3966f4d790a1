"""What the session service answers with (and the API returns as is): a run's status
with its detail, a page of session messages, a page of run events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentloom.platform.domain import RunState, Usage

MAX_MESSAGE_CHARS = 100_000  # per message in a page; longer content is cut and marked


class _View(BaseModel):
    model_config = ConfigDict(frozen=True)


class StepCost(_View):
    """One model call of a run (a step): its purpose, instance, tokens and cost (None
    when the version's model connection has no prices)."""

    op_id: str
    purpose: str
    instance: str
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None


class RunCost(_View):
    """What the run view is to carry as ``cost`` (not a RunView field yet: wiring it
    changes sessions.py and docs/openapi.json). Tokens and cost of a run (every
    purpose, sub-agent and execution, from the run's head) and of each step (from its
    records; the latest ``MAX_COST_STEPS``, oldest first; ``steps_total`` counts them
    all)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None
    steps: list[StepCost] = Field(default_factory=list)
    steps_total: int = 0


class RunView(_View):
    """A run as its creator sees it. ``status`` is the platform's (``queued``,
    ``interrupted`` besides the engine's); ``way_out`` what moves a stopped run on:
    ``resume``, ``resolve`` (see ``unknown``), ``confirm_hooks``, ``raise_budget``,
    ``change_model`` (the provider has no such model: fix it, ask again),
    ``new_question``; null while it runs. ``unknown`` is the operation of unknown
    outcome that blocks it, with the verdicts that apply. ``next``: the API calls that
    move it on (``api_next``), for the creator; an operator's are under
    ``/spaces/{space}/runs/{run}``. ``usage`` sums provider usage over every model call."""

    run_id: str
    session_id: str
    space_id: str
    agent_id: str
    version: int
    user_id: str
    status: RunState
    engine_status: str | None = None
    driven: bool = False
    execution: int | None = None
    instances: list[str] = Field(default_factory=list)
    created_at: float
    updated_at: float
    error: dict[str, str] | None = None
    way_out: str | None = None
    next: list[str] = Field(default_factory=list)
    answer: str | None = None
    reason: str = ""
    unknown: dict[str, Any] | None = None
    pending: list[dict[str, Any]] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cost: RunCost | None = None  # tokens and cost per run and per model call (detail only)
    note: str | None = None


class MessageItem(_View):
    seq: int
    run_id: str
    instance: str
    kind: str
    message: dict[str, Any]
    visible: dict[str, Any] | None = None  # what the model was shown, when it differs
    truncated: bool = False  # the content was cut at ``MAX_MESSAGE_CHARS``
    at: float


class MessagePage(_View):
    items: list[MessageItem]
    next_after: int


class EventItem(_View):
    seq: int
    type: str
    at: float
    data: dict[str, Any]


class EventPage(_View):
    items: list[EventItem]
    next_after: int
    status: RunState
    done: bool  # the run stopped and every event so far is in this page or before
    way_out: str | None = None  # when done: what moves it on (``RunView.way_out``)


def cap_message(message: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A message of a page, its content cut at ``MAX_MESSAGE_CHARS`` (and whether it was)."""
    content = message.get("content")
    if isinstance(content, str) and len(content) > MAX_MESSAGE_CHARS:
        return {**message, "content": content[:MAX_MESSAGE_CHARS]}, True
    return message, False


def operator_view(view: RunView) -> RunView:
    """An operator sees a run's status, never its content."""
    return view.model_copy(update={"answer": None, "unknown": None, "pending": []})


API = "/api/v1"
VERDICTS = {"model_outcome_unknown": ("send_again", "treat_as_failed")}
TOOL_VERDICTS = ("ran", "did_not_run", "run_again")


def api_next(session_id: str, run_id: str, way_out: str | None, *, code: str = "",
             verdicts: Sequence[str] = (), agent: tuple[str, str] | None = None) -> list[str]:
    """The HTTP calls that move a stopped run on (``way_out``), as ``METHOD path body``:
    what an API run names instead of a CLI command (the engine's messages name none)."""
    run = f"{API}/sessions/{session_id}/runs/{run_id}"
    if way_out == "resume":
        return [f"POST {run}/resume {{}}"]
    if way_out == "confirm_hooks":
        return [f'POST {run}/resume {{"confirm_hooks": true}}']
    if way_out == "raise_budget":
        return [f'POST {run}/resume {{"raise_budget": {{"max_tokens": N}}}} (or "max_cost"; '
                "above what is used: see usage)"]
    if way_out == "resolve":
        kinds = verdicts or VERDICTS.get(code, TOOL_VERDICTS)
        return [f"GET {run} (unknown: what is unknown and what the host knows)",
                *(f'POST {run}/resolve {{"verdict": "{kind}"}}' for kind in kinds)]
    if way_out == "change_model" and agent:
        space, agent_id = agent
        base = f"{API}/spaces/{space}"
        return [f"PUT {base}/models/connections/CONNECTION (the connection's model) or PUT "
                f"{base}/agents/{agent_id}/draft (model.model), then POST "
                f"{base}/agents/{agent_id}/publish",
                f'POST {base}/sessions {{"agent_id": "{agent_id}"}} (its latest version), '
                'then POST …/runs {"question": "..."}']
    if way_out == "new_question":
        return [f'POST {API}/sessions/{session_id}/runs {{"question": "..."}}']
    return []


def run_view(fields: dict[str, Any]) -> RunView:
    """A ``RunView`` of ``fields`` with the API calls that move the run on (``api_next``)."""
    error, unknown = fields.get("error") or {}, fields.get("unknown") or {}
    fields["next"] = api_next(fields["session_id"], fields["run_id"], fields.get("way_out"),
                              code=str(error.get("code", "")),
                              verdicts=list(unknown.get("verdicts") or ()),
                              agent=(fields["space_id"], fields["agent_id"]))
    return RunView(**fields)
