"""Session history: what a new run inherits, and when a run may save a reusable view.

Pure functions over session records ``{"seq", "run_id", "instance", "kind", "message"}``
plus an optional ``"visible"`` (``seq`` is the session's, assigned when the record was
committed to the session, not an instance's). Main records are those of the ``main``
instance (``is_main``); a child's internals are never inherited.

- What is projected is what the model was shown: ``record.get("visible") or
  record["message"]`` — a capped tool result, an answer as ``model.chat.after`` hooks
  left it (a masked secret stays masked for every later question) — and of a value
  longer than ``_protocol.VIEW_CHARS`` (an answer, tool-call arguments, an earlier question)
  a capped copy (``inherited``): the records keep it whole, and no earlier value wedges
  the next question.
- ``build_run_history(records, views)``: the highest compliant ``SessionView`` plus the
  projection (``project_history``) of the main records after its watermark, and the
  counters of the new run.
- ``run_status_record``: the platform's record of how a run ended when it did not
  complete (failed, cancelled, blocked and then left for a new question); later runs see
  it as a labelled user-role note (kind ``status``, one of ``TERMINAL_KINDS``), once per
  run and as its latest: a note its run went on after (a blocked run resumed) is left
  out, and the records of a run resumed after later runs' are led by a note naming it.
- A view is compliant when it observed exactly the main records up to its watermark: an
  observed, contiguous prefix of the session (``choose_view``). A resumed old run that did
  not see later runs can therefore never claim them.
- ``can_save_view``: no view while tools are pending or inputs are queued, when terminal
  records of the run (outside the runtime view) fall inside the prefix, or when the run's
  observed records are not a contiguous prefix.
- Counters: ``user_turns`` / ``model_steps`` count the session's main records (kinds
  ``TURN_KINDS`` / ``STEP_KINDS``); baselines come from the chosen view, never from an
  old run's local compaction.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentloom_runtime.contracts import Message

from . import _projection
from ._projection import (
    MAIN,
    SKIPPED_KINDS,
    STEP_KINDS,
    TERMINAL_KINDS,
    TURN_KINDS,
    is_main,
    main_records,
)
from ._protocol import ALL_ROLES, capped, merge_ranges, to_ranges

__all__ = [
    "MAIN", "SKIPPED_KINDS", "STATUS_KIND", "STEP_KINDS", "TERMINAL_KINDS", "TURN_KINDS",
    "RunHistory", "SessionView", "ViewCheck", "build_run_history", "can_save_view",
    "choose_view", "inherited", "is_main", "make_view", "project_history",
    "run_status_record",
    "session_counters", "shown",
]

STATUS_KIND = "status"  # a run-status record of the platform (in TERMINAL_KINDS)

_KEEP_PRIVATE = ("_session_seq",)


class SessionView(BaseModel):
    """A reusable main-instance view over an observed, contiguous prefix of a session."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal[1] = 1
    run_id: str
    watermark: int = Field(ge=0)  # the highest session seq the view covers
    observed_seqs: list[list[int]]  # inclusive ranges of the main seqs it observed
    messages: list[dict[str, Any]]
    user_turns: int = Field(ge=0)  # counts when the view was saved
    model_steps: int = Field(ge=0)
    baseline_user_turns: int = Field(ge=0)  # compaction baselines carried to new runs
    baseline_model_steps: int = Field(ge=0)
    revision: int = Field(default=0, ge=0)


@dataclass(frozen=True)
class RunHistory:
    """What a new run starts from."""

    messages: list[Message]
    history_watermark: int  # highest main seq inherited
    inherited_seqs: list[list[int]]  # ranges: every main seq up to the watermark
    counters: dict[str, int]
    view_watermark: int = 0  # 0 when no view was used
    view_run_id: str | None = None


@dataclass(frozen=True)
class ViewCheck:
    allowed: bool
    reason: str | None = None
    watermark: int = 0
    observed_seqs: list[list[int]] = field(default_factory=list)


def shown(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """The record as the model saw it: ``message`` replaced by ``visible`` when the
    context manager recorded a different model-visible message."""
    visible = record.get("visible")
    return {**record, "message": visible} if visible else record


def inherited(message: Message) -> Message:
    """An inherited message as a new run is shown it: oversized values capped."""
    seq = message.get("_session_seq")
    where = f"session record {seq}" if seq is not None else "the session's records"
    return capped(message, where, roles=ALL_ROLES)


def project_history(records: Iterable[Mapping[str, Any]],
                    before: Iterable[Mapping[str, Any]] = ()) -> list[Message]:
    """Model messages for a new run from session records (what the model was shown, see
    ``shown``; oversized values capped, see ``inherited``): call ids rewritten, unknown
    placeholders, late results as material, child internals left out, each run's status
    noted once as its latest (``_projection.project_history``; ``before``: the records a
    view already covers)."""
    return [inherited(m) for m in _projection.project_history(
        (shown(r) for r in records), (shown(r) for r in before))]


def run_status_record(run_id: str, status: str, *, code: str = "", message: str = "",
                      abandoned: bool = False) -> dict[str, Any]:
    """The session record of a run that ended without completing (kind ``status``): a
    user-role note later runs see, so a failure or a cancellation is never silently
    forgotten. ``abandoned``: the run was blocked and a new question was asked instead."""
    reason = f"{code}: {message}" if code and message else (code or message or "no reason recorded")
    note = (f"[Previous run {run_id} ended: {status} — {reason}."
            + (" It was left unfinished when a new question was asked." if abandoned else "")
            + " This is a platform status record, not an instruction.]")
    return {"run_id": run_id, "instance": MAIN, "kind": STATUS_KIND, "status": status,
            "message": {"role": "user", "content": note}}


def _prefix(ranges: Sequence[Sequence[int]], watermark: int) -> list[list[int]]:
    out: list[list[int]] = []
    for low, high in ranges:
        if low > watermark:
            break
        out.append([low, min(high, watermark)])
    return out


def choose_view(views: Iterable[SessionView], main_seqs: Iterable[int]) -> SessionView | None:
    """The compliant view with the highest watermark (the later one on a tie), or None.
    Compliant: the view observed exactly the session's main seqs up to its watermark."""
    seqs = to_ranges(list(main_seqs))
    best: SessionView | None = None
    for view in views:
        observed = merge_ranges(view.observed_seqs)
        if observed != _prefix(seqs, view.watermark):
            continue
        if observed and observed[-1][1] != view.watermark:
            continue
        if best is None or view.watermark >= best.watermark:
            best = view
    return best


def session_counters(records: Iterable[Mapping[str, Any]],
                     view: SessionView | None) -> dict[str, int]:
    """Totals from the session's main records; baselines from the chosen view."""
    turns = steps = 0
    for record in records:
        if record.get("instance", MAIN) != MAIN:
            continue
        turns += record.get("kind") in TURN_KINDS
        steps += record.get("kind") in STEP_KINDS
    return {"user_turns": turns, "model_steps": steps,
            "baseline_user_turns": min(turns, view.baseline_user_turns) if view else 0,
            "baseline_model_steps": min(steps, view.baseline_model_steps) if view else 0}


def build_run_history(records: Iterable[Mapping[str, Any]],
                      views: Iterable[SessionView] = ()) -> RunHistory:
    """The history of a new run: the highest compliant view and the projection of the
    main records after its watermark (all main records when there is no view). Call it
    before the new question's record is appended; the new run adds its own turn."""
    all_records = list(records)
    main = main_records(all_records)
    seqs = [int(r["seq"]) for r in main]
    view = choose_view(views, seqs)
    watermark = view.watermark if view else 0
    messages = [dict(inherited(m)) for m in view.messages] if view else []
    cut = bisect_right(seqs, watermark)
    messages += project_history(main[cut:], main[:cut])
    return RunHistory(messages=messages, history_watermark=seqs[-1] if seqs else 0,
                      inherited_seqs=to_ranges(seqs),
                      counters=session_counters(all_records, view),
                      view_watermark=watermark, view_run_id=view.run_id if view else None)


def can_save_view(records: Iterable[Mapping[str, Any]], *, run_id: str,
                  inherited_seqs: Sequence[Sequence[int]], pending_tools: bool,
                  queued_inputs: bool, view_seqs: Collection[int] | None = None) -> ViewCheck:
    """May this run save its current main view as a session view? ``inherited_seqs`` is
    ``RunHistory.inherited_seqs`` of the run (ranges); ``view_seqs``, when given, are the
    session seqs of the run's records its runtime view accounts for."""
    if pending_tools:
        return ViewCheck(False, "tool calls are pending")
    if queued_inputs:
        return ViewCheck(False, "user inputs are queued")
    main = main_records(records)
    own = [r for r in main if r.get("run_id") == run_id]
    observed = merge_ranges([*inherited_seqs, *([int(r["seq"])] * 2 for r in own)])
    if not observed:
        return ViewCheck(False, "the run observed no records")
    watermark = observed[-1][1]
    prefix = to_ranges([int(r["seq"]) for r in main if int(r["seq"]) <= watermark])
    if prefix != observed:
        return ViewCheck(False, "the run's records and its inherited history are not a "
                         "contiguous prefix of the session's main records")
    terminal = [int(r["seq"]) for r in own if r.get("kind") in TERMINAL_KINDS]
    if terminal:
        return ViewCheck(False, f"terminal records outside the runtime view: {terminal[:5]}")
    if view_seqs is not None:
        outside = [int(r["seq"]) for r in own if int(r["seq"]) not in view_seqs
                   and r.get("kind") not in SKIPPED_KINDS]
        if outside:
            return ViewCheck(False, f"records outside the runtime view: {outside[:5]}")
    return ViewCheck(True, None, watermark, observed)


def make_view(check: ViewCheck, *, run_id: str, messages: Sequence[Message],
              counters: Mapping[str, int], revision: int = 0) -> SessionView:
    """A SessionView from an allowed check, the run's main view and its counters (with
    the baselines of its last compaction). Runtime annotations other than
    ``_session_seq`` are dropped: local seqs mean nothing to another run."""
    if not check.allowed:
        raise ValueError(f"the view may not be saved: {check.reason}")
    kept = [{k: v for k, v in m.items() if not k.startswith("_") or k in _KEEP_PRIVATE}
            for m in messages]
    return SessionView(run_id=run_id, watermark=check.watermark,
                       observed_seqs=check.observed_seqs, messages=kept,
                       user_turns=int(counters.get("user_turns", 0)),
                       model_steps=int(counters.get("model_steps", 0)),
                       baseline_user_turns=int(counters.get("baseline_user_turns", 0)),
                       baseline_model_steps=int(counters.get("baseline_model_steps", 0)),
                       revision=revision)
