"""RunTracker: what the platform records about runs as they are driven — the same in
the embedded worker and (later) the step Lambda.

**The session record stream** (seed 000 §2, §4; the approach of
``agentloom.local.sessions``, generalized to every instance). ``sync`` copies references
to a run's new source records (``src:<instance>``, for ``main`` and each child; the run's
own prompt and history copies left out) into the session's stream and advances the
run's cursors in the same compare-and-set transaction on the stream head, so each
record gets exactly one session seq, in the order it reached the session (a resumed old
run's records land at the end), deduplicated by (run_id, instance, entry_key). A run is
opened in the stream when it is asked (``start_run``), and leaves it once it completed,
failed or was cancelled and is fully synced. Runs that stop without completing get one
status record per (execution, status): failed and cancelled at once, blocked when a
new question is asked instead (``abandon``). The content stays in the run's logs (stored
once); the stream holds references and the platform's status notes.

**Usage.** The same sync reads the provider usage of every model call: an action's on
its assistant source record (``call.usage``), a compaction's or review's in its ``ops``
entry. It is summed on the run (all purposes, all instances) in the same transaction,
and each call becomes a ``model.usage`` event (with its ``cost`` when the version's
connection has prices: the engine computes it and keeps it on the same records).
``run_cost`` reads tokens and cost per run (the head's totals) and per step (the
records) for the run view.

**Status.** ``started`` / ``stopped`` move the run's platform status (and its index
entry) and give the session's lease back once the run no longer holds it: a run that
stopped (blocked, completed, failed, cancelled) releases it; one the engine still calls
running while nothing drives it is ``interrupted`` and keeps it (resume or cancel it).

**Events.** ``event`` appends an engine observation to the run's event stream: ids,
kinds, statuses, names, codes and counts — never content. Message texts, questions,
answers, tool arguments and results (``CONTENT_KEYS``) are replaced by their length
(``<key>_chars``): the content is read from the session's messages, where it is stored
once (and encrypted with the run's logs); events stay index-like. Other texts (error
messages) are capped and known credentials redacted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentloom.local.redaction import Redactor
from agentloom.platform.domain import (
    ACTIVE_STATES,
    OpenRun,
    Run,
    RunState,
    SessionRecord,
    StreamHead,
    now,
    usage_tokens,
)
from agentloom.platform.store import PlatformStore, Versioned, WriteConflict, retry_conflicts
from agentloom.platform.views import RunCost, StepCost
from agentloom_runtime.checkpoint.store import BaseCheckpointStore
from agentloom_runtime.context.history import SKIPPED_KINDS, run_status_record
from agentloom_runtime.engine import RunSummary, read_run
from agentloom_runtime.errors import ConfigError

log = logging.getLogger(__name__)

NOTED_AT_ONCE = ("failed", "cancelled")
CLOSED = ("completed", "failed", "cancelled")
EVENT_TEXT_CHARS = 2_000
MAX_COST_STEPS = 200
CONTENT_KEYS = frozenset({"task", "content", "arguments", "result", "answer", "output",
                          "reasoning_content", "text", "reason", "next_action"})


@dataclass
class _Pass:
    """What one sync attempt found."""

    seq: int
    records: list[SessionRecord] = field(default_factory=list)
    runs: list[tuple[Versioned[Run], Run]] = field(default_factory=list)
    usage_events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    changed: bool = False


class RunTracker:
    def __init__(self, store: PlatformStore, checkpoints: BaseCheckpointStore, *,
                 redactor: Redactor | None = None) -> None:
        self.store = store
        self.checkpoints = checkpoints
        self.redactor = redactor or Redactor()
        self._appended = threading.Condition()

    def summary(self, run_id: str) -> RunSummary | None:
        try:
            return read_run(self.checkpoints, run_id)
        except ConfigError:
            return None  # saved by another runtime format

    # -- the record stream ---------------------------------------------------------------

    def sync(self, session_id: str, *, runs: Iterable[str] | None = None,
             abandon: bool = False) -> int:
        """Append the new records of the session's open runs (or of ``runs``); returns how
        many were appended."""
        wanted = None if runs is None else set(runs)

        def attempt() -> _Pass:
            head = self.store.get_stream(session_id)
            if head is None:
                return _Pass(0)
            found = _Pass(head.value.seq)
            open_runs = {k: v.model_copy(deep=True) for k, v in head.value.open.items()}
            for run_id in list(open_runs):
                if wanted is None or run_id in wanted:
                    self._sync_run(session_id, run_id, open_runs, found, abandon)
            if found.changed:
                self.store.append_records(
                    head, StreamHead(session_id=session_id, seq=found.seq, open=open_runs),
                    found.records, found.runs)
            return found

        done = retry_conflicts(attempt)
        for run_id, data in done.usage_events:
            self.event(run_id, "model.usage", data)
        return len(done.records)

    def _sync_run(self, session_id: str, run_id: str, open_runs: dict[str, OpenRun],
                  found: _Pass, abandon: bool) -> None:
        cursor = open_runs[run_id]
        summary = self.summary(run_id)  # before the records: a closed run adds no more
        if summary is None:
            return  # asked, not started yet
        usage: list[tuple[str, str, Mapping[str, Any]]] = []
        for instance in summary.instances:
            for entry in self.checkpoints.read(run_id, f"src:{instance}",
                                               cursor.src.get(instance, 0)):
                cursor.src[instance], found.changed = entry.seq, True
                kind = str(entry.body.get("kind"))
                if kind in SKIPPED_KINDS:
                    continue
                found.seq += 1
                found.records.append(SessionRecord(
                    seq=found.seq, run_id=run_id, instance=instance, kind=kind,
                    entry_key=f"src:{entry.seq}", src=entry.seq, at=now()))
                call = entry.body.get("call")
                if kind == "assistant" and isinstance(call, Mapping) and call.get("usage"):
                    usage.append(("action", instance, call))
        for entry in self.checkpoints.read(run_id, "ops", cursor.ops):
            cursor.ops, found.changed = entry.seq, True
            body = entry.body
            if "raw_output" in body and body.get("purpose") != "action" and body.get("usage"):
                usage.append((str(body.get("purpose")), str(body.get("instance", "main")),
                              body))
        self._status_record(run_id, summary, cursor, found, abandon)
        if summary.status in CLOSED:
            del open_runs[run_id]
            found.changed = True
        if usage:
            self._add_usage(session_id, run_id, usage, found)

    def _status_record(self, run_id: str, summary: RunSummary, cursor: OpenRun,
                       found: _Pass, abandon: bool) -> None:
        status = summary.status
        noted = f"{summary.execution}:{status}"
        if not (status in NOTED_AT_ONCE or (status == "blocked" and abandon)) \
                or cursor.noted == noted:
            return
        error = summary.error or {}
        note = run_status_record(run_id, status, code=error.get("code", ""),
                                 message=error.get("message", ""),
                                 abandoned=status == "blocked")
        found.seq += 1
        found.records.append(SessionRecord(
            seq=found.seq, run_id=run_id, instance="main", kind="status",
            entry_key=f"status:{noted}", note=self.redactor.scrub(note), at=now()))
        cursor.noted, found.changed = noted, True

    def _add_usage(self, session_id: str, run_id: str,
                   calls: list[tuple[str, str, Mapping[str, Any]]], found: _Pass) -> None:
        stored = self.store.get_run(session_id, run_id)
        if stored is None:
            return
        total = stored.value.usage
        for purpose, instance, call in calls:
            total = total.add(purpose, call.get("usage"))
            given, produced, _ = usage_tokens(call.get("usage"))
            found.usage_events.append((run_id, {
                "op_id": call.get("op_id"), "purpose": purpose, "instance": instance,
                "input_tokens": given, "output_tokens": produced,
                "cost": _cost(call)}))
        found.runs.append((stored, stored.value.model_copy(update={"usage": total})))

    # -- cost ----------------------------------------------------------------------------

    def run_cost(self, run_id: str, *, steps: int = MAX_COST_STEPS) -> RunCost | None:
        """Tokens and cost of ``run_id``: the run's totals from its head (every purpose,
        sub-agent and execution), each model call from its record (an action's on its
        assistant record, a compaction's or review's in ``ops``). None: no such run."""
        summary = self.summary(run_id)
        loaded = self.checkpoints.load_head(run_id)
        if summary is None or loaded is None:
            return None
        calls: list[StepCost] = []
        for instance in summary.instances:
            for entry in self.checkpoints.read(run_id, f"src:{instance}"):
                call = entry.body.get("call")
                if entry.body.get("kind") == "assistant" and isinstance(call, Mapping):
                    calls.append(_step("action", instance, call))
        for entry in self.checkpoints.read(run_id, "ops"):
            body = entry.body
            if "raw_output" in body and body.get("purpose") != "action":
                calls.append(_step(str(body.get("purpose")), str(body.get("instance",
                                                                         "main")), body))
        calls.sort(key=lambda c: _op_order(c.op_id))
        priced = any(c.cost is not None for c in calls)
        totals = loaded.body.get("usage")
        if isinstance(totals, Mapping):
            given, produced = int(totals["input_tokens"]), int(totals["output_tokens"])
            count = int(totals["calls"])
            cost = float(totals["cost"]) if priced else None
        else:  # a run saved before the head kept totals
            given = sum(c.input_tokens for c in calls)
            produced = sum(c.output_tokens for c in calls)
            count = len(calls)
            cost = sum(c.cost or 0.0 for c in calls) if priced else None
        return RunCost(calls=count, input_tokens=given, output_tokens=produced,
                       total_tokens=given + produced, cost=cost,
                       steps=calls[-steps:] if steps > 0 else [], steps_total=len(calls))

    # -- status --------------------------------------------------------------------------

    def started(self, session_id: str, run_id: str) -> None:
        self._set_status(session_id, run_id, "running", None)

    def stopped(self, session_id: str, run_id: str, *,
                absent: tuple[RunState, dict[str, str]] | None = None) -> RunState:
        """Record how the run stands now that its driver let go (``absent``: the status
        and error to record when the run never started)."""
        summary = self.summary(run_id)
        error: dict[str, str] | None
        if summary is None:
            status, error = absent or ("failed", {"code": "run_not_started",
                                                  "message": "the run did not start"})
        else:
            status = "interrupted" if summary.status == "running" else summary.status
            given = summary.error
            error = None if not given else {"code": given.get("code", ""),
                                            "message": given.get("message", "")}
        self._set_status(session_id, run_id, status, error)
        return status

    def _set_status(self, session_id: str, run_id: str, status: RunState,
                    error: dict[str, str] | None) -> None:
        def attempt() -> None:
            run = self.store.get_run(session_id, run_id)
            session = self.store.get_session(session_id)
            if run is None or session is None:
                return
            new = run.value.model_copy(update={
                "status": status, "updated_at": now(),
                "error": self.redactor.scrub(error) if error else None})
            release = session.value.active_run == run_id and status not in ACTIVE_STATES
            self.store.update_run(run, new, session=session if release else None,
                                  session_update=session.value.model_copy(
                                      update={"active_run": None}) if release else None)

        try:
            retry_conflicts(attempt)
        except WriteConflict:  # pragma: no cover (50 attempts)
            log.exception("run %s: status %s could not be recorded", run_id, status)
            return
        self.event(run_id, "run.status", {"run_id": run_id, "status": status,
                                          "error": error})

    # -- events --------------------------------------------------------------------------

    def event(self, run_id: str, topic: str, data: Mapping[str, Any]) -> None:
        try:
            clean = _capped(self.redactor.scrub(_without_content(data)))
            self.store.append_events(run_id, [(topic, clean)])
        except Exception:  # an observer never breaks a step
            log.exception("run %s: event %s was not recorded", run_id, topic)
        with self._appended:
            self._appended.notify_all()

    def wait(self, timeout: float) -> None:
        """Wait until an event is appended in this process, at most ``timeout`` seconds
        (events written elsewhere are seen by polling after the timeout)."""
        with self._appended:
            self._appended.wait(timeout)


def _cost(call: Mapping[str, Any]) -> float | None:
    value = call.get("cost")
    return float(value) if isinstance(value, int | float) and \
        not isinstance(value, bool) else None


def _step(purpose: str, instance: str, call: Mapping[str, Any]) -> StepCost:
    given, produced, total = usage_tokens(call.get("usage"))
    return StepCost(op_id=str(call.get("op_id") or ""), purpose=purpose, instance=instance,
                    input_tokens=given, output_tokens=produced, total_tokens=total,
                    cost=_cost(call))


def _op_order(op_id: str) -> tuple[int, int]:
    """Model op ids are ``m<execution>-<n>`` with ``n`` counting the run's calls."""
    execution, _, number = op_id.removeprefix("m").partition("-")
    try:
        return int(number), int(execution)
    except ValueError:
        return (1 << 62), 0


def _without_content(data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in CONTENT_KEYS and value is not None:
            out[f"{key}_chars"] = len(value) if isinstance(value, str) else len(str(value))
        elif isinstance(value, Mapping):
            out[key] = _without_content(value)
        else:
            out[key] = value
    return out


def _capped(value: Any) -> Any:
    if isinstance(value, str):
        if len(value) > EVENT_TEXT_CHARS:
            return value[:EVENT_TEXT_CHARS] + f"… [{len(value) - EVENT_TEXT_CHARS} more chars]"
        return value
    if isinstance(value, Mapping):
        return {str(k): _capped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_capped(v) for v in value[:100]]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _capped(str(value))
