"""Request and response bodies of the HTTP API (pydantic; the OpenAPI document is
generated from them). Records the platform stores are returned as they are
(``agentloom.platform.domain``, ``agentloom.platform.views``); these are the inputs and
the envelopes around them.

Inputs refuse unknown fields and coerce nothing: booleans are JSON booleans, counts are
JSON integers.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from agentloom.models import DiscoveredModel, ModelConnectionSpec, Provider, ResolvedBudget
from agentloom.platform.domain import (
    Agent,
    AgentVersion,
    Draft,
    Member,
    ModelConnectionRecord,
    Role,
    Run,
    RunIndex,
    Session,
    Space,
)
from agentloom_runtime.contracts import EXIT_CODES, VerdictKind

T = TypeVar("T")


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: dict[str, Any] | None = None


class ErrorOut(BaseModel):
    """Every error: a stable ``code`` and a message for a person."""

    error: ErrorDetail


class Items(BaseModel, Generic[T]):
    items: list[T]


class Health(BaseModel):
    status: str = "ok"


class Me(BaseModel):
    user_id: str
    spaces: list[SpaceOut]


class SpaceIn(_In):
    name: StrictStr = Field(min_length=1, max_length=200)


class SpaceOut(BaseModel):
    space: Space
    role: Role


class MemberIn(_In):
    role: Role


class AgentIn(_In):
    name: StrictStr = Field(min_length=1, max_length=200)
    config: dict[str, Any] = Field(description="The agent's configuration: the fields of "
                                   "an agent snapshot (prompt, model, tools, subagents, "
                                   "hooks, context_policy, limits, ...) without format, "
                                   "space_id, agent_id, version and legacy.")


class AgentOut(BaseModel):
    agent: Agent
    draft: Draft | None = None


class DraftIn(_In):
    config: dict[str, Any]
    revision: StrictInt | None = Field(default=None, ge=1, description="The revision this "
                                       "edit is based on: 409 draft_changed if the draft "
                                       "moved on meanwhile.")


class PublishIn(_In):
    revision: StrictInt | None = Field(default=None, ge=1, description="Publish exactly "
                                       "this draft revision (409 draft_changed otherwise).")


class PublishOut(BaseModel):
    version: AgentVersion
    created: bool = Field(description="False when the draft was unchanged since the latest "
                          "version, which is returned.")


class SessionIn(_In):
    agent_id: StrictStr = Field(min_length=1, max_length=40)
    version: StrictInt | None = Field(default=None, ge=1, description="A published "
                                      "version; the latest when omitted.")
    title: StrictStr = Field(default="", max_length=200)


class AskIn(_In):
    question: StrictStr = Field(min_length=1, description="At most 100,000 characters "
                                "(413 input_too_large).")


class AskOut(BaseModel):
    run: Run
    created: bool = Field(description="False when an earlier ask with the same "
                          "Idempotency-Key made this run.")


class BudgetRaiseIn(_In):
    """A run's new budget (space admins and owners only): each figure given must exceed
    the current one, and the version must set that budget."""

    max_tokens: StrictInt | None = Field(default=None, ge=1, le=10**12)
    max_cost: float | None = Field(default=None, gt=0, le=10**9, allow_inf_nan=False)
    note: StrictStr = Field(default="", max_length=500)


class ResumeIn(_In):
    retry_unknown_models: StrictBool = Field(default=False, description="Send a model "
                                             "request of unknown outcome again.")
    confirm_hooks: StrictBool = Field(default=False, description="Run an interrupted hook "
                                      "again.")
    raise_budget: BudgetRaiseIn | None = Field(default=None, description="Raise the run's "
                                               "token and/or cost budget (admins, owners).")


class OperatorResumeIn(_In):
    raise_budget: BudgetRaiseIn | None = None


class ResolveIn(_In):
    verdict: VerdictKind = Field(description="ran / did_not_run / run_again for a tool or "
                                 "command; send_again / treat_as_failed for a model call.")
    note: StrictStr = Field(default="", max_length=2_000)
    output: StrictStr | None = Field(default=None, max_length=1_000_000, description="With "
                                     "ran: what the call produced, as you saw it.")
    exit_code: StrictInt | None = Field(
        default=None, ge=EXIT_CODES.start, le=EXIT_CODES.stop - 1,
        description="With ran: its exit status (0..255), or -1..-64 for a process killed by "
        "that signal.")
    drive_on: StrictBool = Field(default=True, description="Drive the run on after the "
                                 "verdict (false: record it only; resume later).")


class InputIn(_In):
    text: StrictStr = Field(min_length=1)


class InputOut(BaseModel):
    queued: int = Field(description="The supplement's position in the run's input queue.")


class CancelIn(_In):
    reason: StrictStr = Field(default="", max_length=500)


_KEY = Field(default=None, max_length=4_096, description="The provider key: stored "
             "encrypted, never returned. Empty on update: keep the stored key (only when "
             "provider and base URL are unchanged).")


class ModelConnectionIn(_In):
    name: StrictStr = Field(min_length=1, max_length=200)
    spec: dict[str, Any] = Field(description="A ModelConnectionSpec (provider, base_url, "
                                 "model_id, budget figures and sources, prices) without "
                                 "api_key_ref, which the platform sets.")
    api_key: StrictStr | None = _KEY


class ModelConnectionUpdate(_In):
    name: StrictStr | None = Field(default=None, min_length=1, max_length=200)
    spec: dict[str, Any]
    api_key: StrictStr | None = _KEY
    revision: StrictInt | None = Field(default=None, ge=1, description="The revision this "
                                       "edit is based on: 409 connection_changed if it "
                                       "moved on meanwhile.")


class ModelConnectionOut(BaseModel):
    """A connection as admins see it: the spec, whether a key is stored, the budget with
    its sources and warnings — never the key."""

    space_id: str
    connection_id: str
    name: str
    spec: ModelConnectionSpec
    has_key: bool
    budget: ResolvedBudget
    revision: int
    created_by: str
    created_at: float
    updated_by: str
    updated_at: float

    @classmethod
    def of(cls, record: ModelConnectionRecord) -> ModelConnectionOut:
        spec = ModelConnectionSpec.model_validate(record.spec, context={"stored": True})
        return cls(space_id=record.space_id, connection_id=record.connection_id,
                   name=record.name, spec=spec, has_key=record.sealed_key is not None,
                   budget=spec.budget(), revision=record.revision,
                   created_by=record.created_by, created_at=record.created_at,
                   updated_by=record.updated_by, updated_at=record.updated_at)


class DiscoverIn(_In):
    provider: Provider
    base_url: StrictStr = Field(default="", max_length=2_000, description="Empty: the "
                                "provider's own.")
    api_key: StrictStr | None = Field(default=None, max_length=4_096, description="Used "
                                      "for this request only, never saved.")
    resource_id: StrictStr | None = Field(default=None, max_length=40, description="A "
                                          "saved connection whose key to use when api_key "
                                          "is empty (same provider and base URL only).")


class DiscoverOut(BaseModel):
    items: list[DiscoveredModel]


class SessionOut(BaseModel):
    """A session as the API shows it: everything but who drives its run (a process
    identity of the host, which is the platform's business)."""

    model_config = ConfigDict(frozen=True)

    format: int = 1
    session_id: str
    space_id: str
    agent_id: str
    version: int
    user_id: str
    title: str = ""
    created_at: float
    active_run: str | None = None
    runs: int = 0

    @classmethod
    def of(cls, session: Session) -> SessionOut:
        return cls(**session.model_dump(exclude={"driver"}))


RunsOut = Items[Run]
RunIndexOut = Items[RunIndex]
SessionsOut = Items[SessionOut]
MembersOut = Items[Member]
AgentsOut = Items[Agent]
VersionsOut = Items[AgentVersion]
SpacesOut = Items[SpaceOut]
ModelConnectionsOut = Items[ModelConnectionOut]
Me.model_rebuild()
