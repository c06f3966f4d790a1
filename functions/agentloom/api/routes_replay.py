"""Replay route (``agentloom.platform.replay``), prefix ``/api/v1``:

    POST /sessions/{s}/runs/{r}/replay   the session's creator   replay a stopped run

The body is optional: ``{}`` replays the run with its own version (``identical``: the
replay reproduced its records text for text); ``{"version": N}`` or ``{"draft": true}``
(admins: reading the draft is theirs) evaluates another configuration of the agent
against the recorded run (``diverged_at``: the first step whose model request differs,
with a diff). Nothing is executed again: no model, tool, command or MCP call is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from agentloom.api.routing import declare
from agentloom.platform.replay import ReplayChoice, RunReplays

if TYPE_CHECKING:
    from agentloom.api._resolver import ApiResolver
    from agentloom.platform.admin import AdminService
    from agentloom.platform.sessions import SessionService

P = "/api/v1"


class ReplayIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: StrictInt | None = Field(default=None, ge=1, description="Another published "
                                      "version of the run's agent to evaluate against the "
                                      "recorded run")
    draft: StrictBool = Field(default=False, description="Evaluate the agent's draft "
                              "(admins only)")


class DivergenceOut(BaseModel):
    kind: Literal["request", "request_digest", "model_call", "tool_call", "tool_arguments",
                  "command_result"]
    message: str
    step: int = Field(description="1-based engine step of the replay where it diverged")
    model_call: int = Field(description="1-based: the model calls made up to it")
    op_id: str | None = None
    purpose: str | None = None
    instance: str | None = None
    call_id: str | None = None
    diff: dict[str, Any] = Field(description="per part that differs (system, messages, "
                                 "tools, options, purpose, instance, arguments): a unified "
                                 "diff from the recorded run to the replay")


class RecordsOut(BaseModel):
    equal: bool = Field(description="every record (every log stream but meta) is the "
                        "recorded one, text for text")
    recorded: int
    replayed: int
    recorded_digest: str
    replayed_digest: str
    first_difference: dict[str, Any] | None = None


class ReplaySummaryOut(BaseModel):
    identical: bool
    steps: int
    model_calls: int
    ended: Literal["stopped", "recording_end", "diverged", "step_limit"]
    status: str = Field(description="the replayed run's status when it stopped")
    diverged_at: DivergenceOut | None
    records: RecordsOut


class ReplayOut(ReplaySummaryOut):
    run_id: str
    recorded_version: int
    version: int | Literal["recorded", "draft"]
    start_recorded: bool = Field(description="false: the run was recorded before its "
                                 "start counters were kept (reconstructed)")
    baseline: ReplaySummaryOut | None = Field(description="with version or draft: the "
                                              "replay of the run's own version, the "
                                              "reference the other one is compared with")


def register(app: ApiResolver, admin: AdminService, sessions: SessionService) -> None:
    replays = RunReplays(admin, sessions)

    @app.post(f"{P}/sessions/<session_id>/runs/<run_id>/replay", tags=["runs"],
              responses=declare(403, 404, 409, body=True))
    def replay(session_id: str, run_id: str, body: ReplayIn | None = None) -> ReplayOut:
        given = body or ReplayIn()
        report = replays.replay(app.principal(), session_id, run_id,
                                ReplayChoice(version=given.version, draft=given.draft))
        return ReplayOut.model_validate(report)
