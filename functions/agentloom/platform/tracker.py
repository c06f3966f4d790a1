"""RunTracker: what the platform records about runs as they are driven — the same in
the embedded worker and the step Lambda.

**The session record stream** (docs/contract.md#context) is written *in each run's checkpoint
commit*: the checkpoint store's companion ``SessionCommits``
(``agentloom.platform.store.session_commits``) turns what a commit appends into record
references, cursors, usage totals, status records and a reusable view, in the same
transaction. ``sync`` is the catch-up for what was committed without the companion
(older data, a store opened without it) and the one writer of what no commit implies: a
blocked run's status record when a new question is asked instead (``abandon``). Both
go through ``advance``, so a record gets exactly one session seq in the order it
reached the session, deduplicated by (run_id, instance, entry_key). A run is opened in
the stream when it is asked (``store.runs.start``), and leaves it once it completed,
failed or was cancelled. The content stays in the run's logs (stored once); the stream
holds references and the platform's status notes.

**History.** ``history`` is what a new run inherits: the session's main records (their
messages read from the runs' logs, credentials redacted) after the highest compliant
reusable view (``build_run_history``).

**Usage.** The same pass reads the provider usage of every model call: an action's on
its assistant source record (``call.usage``), a compaction's or review's in its ``ops``
entry. It is summed for the run (all purposes, all instances) in the same transaction
(on its stream cursor while it runs, on the run item once it is not running),
and each call becomes a ``model.usage`` event (with its ``cost`` when the version's
connection has prices: the engine computes it and keeps it on the same records).
``run_cost`` reads tokens and cost per run (the head's totals) and per step (the
records) for the run view.

**Status.** ``started`` / ``stopped`` move the run's platform status (and its index
entry) and give the session's lease back once the run no longer holds it: a run that
stopped (blocked, completed, failed, cancelled) releases it; one the engine still calls
running while nothing drives it is ``interrupted`` and keeps it (resume or cancel it).

**Events.** ``event`` appends an event of the catalogue (``agentloom_runtime.events``:
the engine's observations and the platform's own topics) to the run's event stream; a
topic outside it is refused (``ConfigError``), so nothing reaches the stream that API
users were not told about. Events carry ids,
kinds, statuses, names, codes and counts — never content. Message texts, questions,
answers, tool arguments and results (``CONTENT_KEYS``) are replaced by their length
(``<key>_chars``): the content is read from the session's messages, where it is stored
once (and encrypted with the run's logs); events stay index-like. Other texts (error
messages) are capped and known credentials redacted.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from agentloom.platform.domain import (
    ACTIVE_STATES,
    RunState,
    SessionRecord,
    StreamHead,
    now,
    usage_tokens,
)
from agentloom.platform.redaction import Redactor
from agentloom.platform.store import PlatformStore, WriteConflict, retry_conflicts
from agentloom.platform.store.session_commits import Pass, SessionCommits, advance
from agentloom.platform.views import RunCost, StepCost
from agentloom_runtime.checkpoint.store import BaseCheckpointStore, LogEntry
from agentloom_runtime.context.history import (
    RunHistory,
    SessionView,
    build_run_history,
    choose_view,
)
from agentloom_runtime.engine import RunSummary, read_run
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.events import TOPICS, Topic

log = logging.getLogger(__name__)

HISTORY_PAGE = 1000
EVENT_TEXT_CHARS = 2_000
MAX_COST_STEPS = 200
CONTENT_KEYS = frozenset({"task", "content", "arguments", "result", "answer", "output",
                          "reasoning_content", "text", "reason", "next_action"})


class RunTracker:
    def __init__(self, store: PlatformStore, checkpoints: BaseCheckpointStore, *,
                 redactor: Redactor | None = None,
                 commits: SessionCommits | None = None) -> None:
        """``commits``: the companion ``checkpoints`` was opened with (the usage events
        it writes in each commit wake this tracker's waiters: ``notify``)."""
        self.store = store
        self.checkpoints = checkpoints
        self.redactor = redactor or Redactor()
        self.commits = commits
        self._appended = threading.Condition()
        if commits is not None:
            commits.bind_notify(self.notify)

    def summary(self, run_id: str) -> RunSummary | None:
        try:
            return read_run(self.checkpoints, run_id)
        except ConfigError:
            return None  # saved by another runtime format

    # -- the record stream ---------------------------------------------------------------

    def sync(self, session_id: str, *, runs: Iterable[str] | None = None,
             abandon: bool = False) -> int:
        """Append what is committed but not yet in the stream for the session's open runs
        (or ``runs``); returns how many records were appended."""
        wanted = None if runs is None else set(runs)

        def attempt() -> Pass:
            head = self.store.streams.head(session_id)
            if head is None:
                return Pass(0)
            found = Pass(head.value.seq)
            open_runs = {k: v.model_copy(deep=True) for k, v in head.value.open.items()}
            for run_id in list(open_runs):
                summary = self.summary(run_id) if wanted is None or run_id in wanted \
                    else None
                if summary is None:
                    continue  # asked, not started yet (or not wanted)

                def read(stream: str, after: int, run_id: str = run_id) -> list[LogEntry]:
                    return self.checkpoints.read(run_id, stream, after)

                advance(self.store, session_id, run_id, summary, read, open_runs, found,
                        abandon=abandon, redactor=self.redactor)
            if found.changed:
                self.store.streams.append(
                    head, StreamHead(session_id=session_id, seq=found.seq, open=open_runs),
                    found.records, found.runs)
            return found

        done = retry_conflicts(attempt)
        for run_id, data in done.usage_events:
            self.event(run_id, "model.usage", data)
        return len(done.records)

    def history(self, session_id: str, *, abandon: bool = False) -> RunHistory:
        """What a new run of the session inherits, after a ``sync`` (``abandon``: a new
        question is being asked, so a blocked run's status becomes a record)."""
        self.sync(session_id, abandon=abandon)
        records = self._main_records(session_id)
        refs = self.store.streams.views(session_id)
        bare = [SessionView(messages=[], **ref.model_dump(exclude={"format", "blob"}))
                for ref in refs]
        chosen = choose_view(bare, [int(r["seq"]) for r in records])
        views = []
        if chosen is not None:
            ref = refs[bare.index(chosen)]
            messages = json.loads(self.checkpoints.get_blob(ref.run_id, ref.blob))
            views.append(chosen.model_copy(update={"messages": self.redactor.scrub(messages)}))
        return build_run_history(records, views)

    def records(self, session_id: str) -> list[dict[str, Any]]:
        """The session's main records as ``build_run_history`` reads them: ``seq``,
        ``run_id``, ``instance``, ``kind``, ``message`` (read from the run's logs),
        ``visible``/``name`` when set; a status record as ``run_status_record`` made it.
        Known credentials redacted."""
        return self._main_records(session_id)

    def _main_records(self, session_id: str) -> list[dict[str, Any]]:
        """The session's main records as ``build_run_history`` reads them."""
        refs: list[SessionRecord] = []
        while True:
            page = self.store.streams.records(session_id, after=refs[-1].seq if refs else 0,
                                              limit=HISTORY_PAGE, instance="main")
            refs += page
            if len(page) < HISTORY_PAGE:
                break
        first: dict[str, int] = {}
        for ref in refs:
            if ref.src is not None:
                first.setdefault(ref.run_id, ref.src)
        bodies = {(run_id, e.seq): e.body for run_id, low in first.items()
                  for e in self.checkpoints.read(run_id, "src:main", low - 1)}
        out: list[dict[str, Any]] = []
        for ref in refs:
            if ref.src is None:
                out.append({**(ref.note or {}), "seq": ref.seq})
                continue
            body = bodies.get((ref.run_id, ref.src), {})
            record = {"seq": ref.seq, "run_id": ref.run_id, "instance": ref.instance,
                      "kind": ref.kind, "message": body.get("message") or {}}
            for key in ("visible", "name"):
                if body.get(key):
                    record[key] = body[key]
            out.append(record)
        return [self.redactor.scrub(r) for r in out]

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
            run = self.store.runs.get(session_id, run_id)
            session = self.store.sessions.get(session_id)
            if run is None or session is None:
                return
            new = run.value.model_copy(update={
                "status": status, "updated_at": now(),
                "error": self.redactor.scrub(error) if error else None})
            # the lease (agentloom.platform.lease): given back when the run stopped, its
            # driver cleared when it let go of a run still running (interrupted)
            held = session.value.active_run == run_id
            if held and status not in ACTIVE_STATES:
                update: dict[str, Any] | None = {"active_run": None, "driver": None}
            elif held and status == "interrupted" and session.value.driver is not None:
                update = {"driver": None}
            else:
                update = None
            if update is None and run.value.status == status and \
                    run.value.error == new.error:
                return  # the run's stopping commit recorded it (SessionCommits)
            self.store.runs.update(run, new, session=session if update else None,
                                   session_update=session.value.model_copy(update=update)
                                   if update else None)

        try:
            retry_conflicts(attempt)
        except WriteConflict:  # pragma: no cover (50 attempts)
            log.exception("run %s: status %s could not be recorded", run_id, status)
            return
        self.event(run_id, "run.status", {"run_id": run_id, "status": status,
                                          "error": error})

    # -- events --------------------------------------------------------------------------

    def event(self, run_id: str, topic: Topic, data: Mapping[str, Any]) -> None:
        """Record ``topic`` (never raises for the store: an observer never breaks a
        step; a topic outside the catalogue is a programming error and raises)."""
        if topic not in TOPICS:
            raise ConfigError(f"event topic {topic!r} is not in the catalogue "
                              "(agentloom_runtime.events)", details={"topic": str(topic)})
        try:
            clean = _capped(self.redactor.scrub(_without_content(data)))
            if self.commits is not None:
                if self.commits.hold(run_id, topic, clean):
                    return  # written with the commit it precedes (SessionCommits.hold)
                self.commits.flush_held(run_id)  # what was held comes first
            self.store.events.append(run_id, [(topic, clean)])
        except Exception:  # an observer never breaks a step
            log.exception("run %s: event %s was not recorded", run_id, topic)
        self.notify()

    def notify(self) -> None:
        """Wake the readers waiting for events (``wait``)."""
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
