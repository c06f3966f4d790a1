"""SessionService: sessions, questions (runs), and everything a run's creator does.

- A session binds its creator, an agent and a published version (the latest unless one
  is named). Its content — runs, messages, events — is its creator's alone (``access``).
- ``ask`` creates a run under the session's lease (``agentloom.platform.lease``: while a
  run is queued, running or interrupted another question is refused, 409 ``run_active``
  naming it and its way out; of concurrent asks exactly one wins) and starts it through
  the ``RunLauncher``; a retried ask with its ``Idempotency-Key`` returns the same run
  (24 hours; the same key with another question is 422).
- ``resume`` (retry unknown model calls, confirm hooks) and ``resolve`` (a verdict, then
  the run is driven on) take the lease for the run itself; ``supplement`` queues an input
  durably; ``cancel`` stops the driver (an in-flight command is killed) and records the
  cancellation (readers see it running until then); operators (admins) list the space's
  runs by status and may cancel or resume them (raising the budget).
- ``run``: the status with its detail (engine status, error, way out, the unknown a
  blocked run waits on, the answer, usage); ``messages``: the record stream, paged by
  session seq; ``events``: a run's events after a cursor, waiting up to 20 s for one
  (long poll); a stopped run (any state but queued and running) answers at once, ``done``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from agentloom.platform.access import (
    IDEMPOTENCY_KEY,
    IDEMPOTENCY_TTL_S,
    INSTANCE,
    MAX_QUESTION_CHARS,
    PAGE_CHARS,
    check_event_cursor,
    check_id,
    check_text,
    member_of,
    own_session,
)
from agentloom.platform.agents import snapshot_of
from agentloom.platform.budgets import budget_raise
from agentloom.platform.domain import (
    ENDED_STATES,
    MOVING_STATES,
    Idempotency,
    Run,
    RunIndex,
    RunState,
    Session,
    content_hash,
    new_id,
    now,
)
from agentloom.platform.errors import BadRequest, Conflict, Invalid, NotFound
from agentloom.platform.identity import Principal
from agentloom.platform.launcher import RunEngines, RunJob, RunLauncher
from agentloom.platform.lease import LeaseRefused, SessionLease, launcher_probe, run_active
from agentloom.platform.store import ABSENT, PlatformStore, Versioned, retry_conflicts
from agentloom.platform.store.tenancy import secret_hash
from agentloom.platform.teardown import NOTHING_EXTRA, SessionResources, SessionTeardown
from agentloom.platform.tracker import RunTracker
from agentloom.platform.views import (
    EventItem,
    EventPage,
    MessageItem,
    MessagePage,
    RunView,
    cap_message,
    operator_view,
    run_view,
)
from agentloom_runtime.contracts import Verdict, VerdictKind
from agentloom_runtime.snapshot import AgentSnapshot


class SessionService:
    def __init__(self, store: PlatformStore, tracker: RunTracker, launcher: RunLauncher,
                 engines: RunEngines, resources: SessionResources = NOTHING_EXTRA
                 ) -> None:
        self.store = store
        self.teardown = SessionTeardown(store, resources, launcher.driving,  # DELETE
                                        tracker.checkpoints)
        self.tracker = tracker
        self.lease = SessionLease(store, tracker.summary, probe=launcher_probe(launcher.driving))
        self.checkpoints, self.launcher, self.engines = tracker.checkpoints, launcher, engines
        self._snapshots: dict[tuple[str, int], AgentSnapshot] = {}
        self._cancelling: set[str] = set()  # stopped to be cancelled: still moving

    # -- sessions ------------------------------------------------------------------------

    def create_session(self, who: Principal, space_id: str, agent_id: str,
                       version: int | None = None, title: str = "",
                       thread: str | None = None) -> Session:
        member_of(self.store, who, space_id)
        check_id(agent_id, "agt", "agent")
        agent = self.store.agents.get(space_id, agent_id)
        if agent is None:
            raise NotFound(f"agent {agent_id} not found", code="agent_not_found")
        chosen = version or agent.value.latest_version
        if not chosen:
            raise Conflict(f"agent {agent_id} has no published version yet: publish its "
                           "draft first", code="agent_not_published")
        if self.store.agents.version(agent_id, chosen) is None:
            raise NotFound(f"agent {agent_id} has no version {chosen}",
                           code="version_not_found")
        session = Session(session_id=new_id("ses"), space_id=space_id, agent_id=agent_id,
                          version=chosen, user_id=who.user_id, title=title.strip()[:200],
                          created_at=now(), thread=thread)
        self.store.sessions.create(session)
        return session

    def sessions(self, who: Principal, space_id: str) -> list[Session]:
        member_of(self.store, who, space_id)
        return self.store.sessions.of_user(who.user_id, space_id)

    def session(self, who: Principal, session_id: str) -> Session:
        return own_session(self.store, who, session_id)

    def _snapshot(self, agent_id: str, version: int) -> AgentSnapshot:
        key = (agent_id, version)
        if key not in self._snapshots:
            found = self.store.agents.version(agent_id, version)
            if found is None:
                raise NotFound(f"agent {agent_id} has no version {version}",
                               code="version_not_found")
            if len(self._snapshots) > 256:
                self._snapshots.clear()
            self._snapshots[key] = snapshot_of(found.snapshot)
        return self._snapshots[key]

    # -- questions -----------------------------------------------------------------------

    def ask(self, who: Principal, session_id: str, question: str,
            idempotency_key: str | None = None) -> tuple[Run, bool]:
        """A new run for ``question``; ``created`` is False when the key names an earlier
        ask (that run is returned)."""
        session = own_session(self.store, who, session_id)
        check_text(question, "question", MAX_QUESTION_CHARS)
        if idempotency_key is not None and not IDEMPOTENCY_KEY.fullmatch(idempotency_key):
            raise BadRequest("Idempotency-Key: 1-200 printable ASCII characters",
                             code="invalid_idempotency_key")
        key_sha = secret_hash(idempotency_key) if idempotency_key is not None else None
        request_hash = content_hash({"question": question})
        snapshot = self._snapshot(session.agent_id, session.version)

        def attempt() -> tuple[Run, bool]:
            current = self._session_item(session_id)
            replace = ABSENT
            if key_sha is not None:
                earlier = self.store.runs.idempotency(session_id, key_sha)
                if earlier is not None and earlier.value.expires_at > now():
                    return self._replay(session_id, earlier.value, request_hash), False
                replace = earlier.version if earlier is not None else ABSENT
            at = now()
            run = Run(run_id=new_id("run"), session_id=session_id,
                      space_id=session.space_id, agent_id=session.agent_id,
                      version=session.version, user_id=who.user_id, created_at=at,
                      updated_at=at)
            key = None if key_sha is None else Idempotency(
                session_id=session_id, key_sha256=key_sha, run_id=run.run_id,
                request_hash=request_hash, user_id=who.user_id, created_at=at,
                expires_at=at + IDEMPOTENCY_TTL_S)
            try:
                self.lease.open(current, run, self.launcher.holder(), idempotency=key,
                                replace=replace)
            except LeaseRefused as refused:
                raise run_active(self.store, current.value, refused) from None
            return run, True

        run, created = retry_conflicts(attempt, attempts=200)
        if created:
            self._launch(RunJob("ask", run, snapshot, question=question))
        return run, created

    def _replay(self, session_id: str, earlier: Idempotency, request_hash: str) -> Run:
        if earlier.request_hash != request_hash:
            raise Invalid("this Idempotency-Key was used for another question; use a new "
                          "key for a new question", code="idempotency_key_reused")
        found = self.store.runs.get(session_id, earlier.run_id)
        if found is None:  # pragma: no cover (written in one transaction)
            raise NotFound(f"run {earlier.run_id} not found", code="run_not_found")
        return found.value

    def _session_item(self, session_id: str) -> Versioned[Session]:
        found = self.store.sessions.get(session_id)
        if found is None:
            raise NotFound(f"session {session_id} not found", code="session_not_found")
        return found

    def _launch(self, job: RunJob) -> None:
        try:
            self.launcher.launch(job)
        except Exception as err:
            code = getattr(err, "code", "launch_failed")
            self.tracker.stopped(job.run.session_id, job.run.run_id,
                                 absent=("failed", {"code": str(code), "message": str(err)}))
            raise

    # -- runs ----------------------------------------------------------------------------

    def runs(self, who: Principal, session_id: str) -> list[Run]:
        own_session(self.store, who, session_id)
        return self.store.runs.of_session(session_id)

    def _own_run(self, who: Principal, session_id: str, run_id: str) -> Versioned[Run]:
        own_session(self.store, who, session_id)
        check_id(run_id, "run", "run")
        found = self.store.runs.get(session_id, run_id)
        if found is None:
            raise NotFound(f"run {run_id} not found", code="run_not_found")
        return found

    def run(self, who: Principal, session_id: str, run_id: str) -> RunView:
        return self._view(self._own_run(who, session_id, run_id).value, detail=True)

    def _view(self, run: Run, *, detail: bool) -> RunView:
        summary = self.tracker.summary(run.run_id)
        driven = self.launcher.driving(run.run_id)
        fields: dict[str, Any] = dict(
            run_id=run.run_id, session_id=run.session_id, space_id=run.space_id,
            agent_id=run.agent_id, version=run.version, user_id=run.user_id,
            created_at=run.created_at, updated_at=run.updated_at, usage=run.usage,
            driven=driven, status=run.status, error=run.error)
        if summary is None:
            fields["way_out"] = "new_question" if run.status in ENDED_STATES else None
            return run_view(fields)
        status: RunState = summary.status
        if status == "running" and not driven and run.run_id not in self._cancelling:
            status = "queued" if run.status == "queued" else "interrupted"
        elif run.status == "queued" and not driven:
            status = "queued"  # resumed or resolved: its driver has not begun yet
        error = summary.error
        way_out = "resume" if status == "interrupted" else \
            None if status == "queued" else summary.way_out
        fields.update(status=status, engine_status=summary.status,
                      execution=summary.execution, instances=list(summary.instances),
                      way_out=way_out,
                      error=None if not error else self.tracker.redactor.scrub(
                          {"code": error["code"], "message": error["message"]}))
        if detail:
            fields["cost"] = self.tracker.run_cost(run.run_id)
        if detail and (summary.status == "completed" or summary.way_out == "resolve"):
            info = self.engines.detail(run, self._snapshot(run.agent_id, run.version))
            scrub = self.tracker.redactor
            fields.update(answer=scrub.text(info.answer) if info.answer else None,
                          reason=scrub.text(info.reason), note=info.note,
                          unknown=self.tracker.redactor.scrub(info.unknown.to_dict())
                          if info.unknown else None,
                          pending=[self.tracker.redactor.scrub(vars(p)) for p in info.pending])
        return run_view(fields)

    def _take_lease(self, run: Versioned[Run], *, doing: str) -> Run:
        """The session's lease for ``run`` itself (resume, resolve): refused while another
        run holds it, or while this one is driven or has ended."""
        run_id = run.value.run_id
        if run.value.status in ENDED_STATES:
            raise Conflict(f"run {run_id} is {run.value.status}; it cannot be {doing} (ask "
                           "a new question)", code="run_ended",
                           details={"run_id": run_id, "status": run.value.status})
        summary = self.tracker.summary(run_id)
        deadline = time.monotonic() + 10.0  # a run that stopped: its driver lets go
        while summary is not None and summary.status != "running" and \
                self.launcher.driving(run_id) and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.launcher.driving(run_id):
            raise Conflict(f"run {run_id} is being driven; wait for it to stop",
                           code="run_running", details={"run_id": run_id})
        if summary is None:
            raise Conflict(f"run {run_id} never started; ask the question again",
                           code="run_not_started", details={"run_id": run_id})
        if summary.status in ENDED_STATES:
            self.tracker.stopped(run.value.session_id, run_id)
            raise Conflict(f"run {run_id} is {summary.status}; it cannot be {doing}",
                           code="run_ended", details={"run_id": run_id,
                                                      "status": summary.status})

        def attempt() -> Run:
            session = self._session_item(run.value.session_id)
            current = self.store.runs.get(run.value.session_id, run_id)
            assert current is not None
            try:
                return self.lease.take(session, current, self.launcher.holder())
            except LeaseRefused as refused:
                raise run_active(self.store, session.value, refused) from None

        return retry_conflicts(attempt)

    def resume(self, who: Principal, session_id: str, run_id: str, *,
               retry_unknown_models: bool = False, confirm_hooks: bool = False,
               max_tokens: int | None = None, max_cost: float | None = None,
               note: str = "") -> RunView:
        """A new execution of a stopped run; ``max_tokens`` / ``max_cost`` raise its
        budget (admins and owners only: ``budgets``)."""
        found = self._own_run(who, session_id, run_id)
        snapshot = self._snapshot(found.value.agent_id, found.value.version)
        raised = budget_raise(self.store, self.checkpoints, who, found.value, snapshot,
                              max_tokens=max_tokens, max_cost=max_cost, note=note)
        run = self._take_lease(found, doing="resumed")
        self._launch(RunJob("resume", run, snapshot,
                            retry_unknown_models=retry_unknown_models,
                            confirm_hooks=confirm_hooks, raise_budget=raised))
        return self._view(run, detail=False)

    def resolve(self, who: Principal, session_id: str, run_id: str, kind: VerdictKind, *,
                note: str = "", output: str | None = None, exit_code: int | None = None,
                drive_on: bool = True) -> RunView:
        """Record a verdict on the unknown outcome that blocks the run (``by`` is the
        caller), then drive it on (unless ``drive_on`` is False: resume it later)."""
        found = self._own_run(who, session_id, run_id)
        if output is not None and kind != "ran":
            raise Invalid("output goes with the verdict 'ran' only", code="invalid_field",
                          details={"fields": [{"field": "output", "message": "only with ran"}]})
        run = self._take_lease(found, doing="resolved")
        snapshot = self._snapshot(run.agent_id, run.version)
        verdict = Verdict(kind=kind, by=who.user_id, note=note, output=output,
                          exit_code=exit_code)
        try:
            self.engines.resolve(run, snapshot, verdict)
        except BaseException:
            self.tracker.stopped(session_id, run_id)  # gives the lease back
            raise
        if drive_on:
            self._launch(RunJob("continue", run, snapshot))
        else:
            self.tracker.sync(session_id, runs=[run_id])
            self.tracker.stopped(session_id, run_id)
        return self._view(run, detail=False)

    def supplement(self, who: Principal, session_id: str, run_id: str, text: str) -> int:
        found = self._own_run(who, session_id, run_id)
        check_text(text, "text", MAX_QUESTION_CHARS)
        run = found.value
        if run.status in ENDED_STATES:
            raise Conflict(f"run {run_id} is {run.status}; ask a new question instead",
                           code="run_ended", details={"run_id": run_id})
        if self.tracker.summary(run_id) is None:
            raise Conflict(f"run {run_id} has not started yet; try again in a moment",
                           code="run_not_started", details={"run_id": run_id})
        return self.engines.queue_input(run, self._snapshot(run.agent_id, run.version), text)

    def cancel(self, who: Principal, session_id: str, run_id: str,
               reason: str = "") -> RunView:
        found = self._own_run(who, session_id, run_id)
        return self._cancel(found.value, who, reason or f"cancelled by {who.user_id}")

    def _cancel(self, run: Run, who: Principal, reason: str) -> RunView:
        summary = self.tracker.summary(run.run_id)
        if run.status in ENDED_STATES or (summary is not None
                                          and summary.status in ENDED_STATES):
            raise Conflict(f"run {run.run_id} already ended ({run.status})",
                           code="run_ended", details={"run_id": run.run_id})
        self._cancelling.add(run.run_id)  # no reader sees it interrupted in between
        try:
            self.launcher.stop(run.run_id)
            self.engines.cancel(run, self._snapshot(run.agent_id, run.version), reason[:500])
            self.tracker.sync(run.session_id, runs=[run.run_id])
            self.tracker.stopped(run.session_id, run.run_id, absent=(
                "cancelled", {"code": "run_cancelled", "message": reason[:500]}))
        finally:
            self._cancelling.discard(run.run_id)
        self.tracker.event(run.run_id, "run.cancel_requested", {"run_id": run.run_id,
                                                                "by": who.user_id})
        after = self.store.runs.get(run.session_id, run.run_id)
        return self._view(after.value if after else run, detail=False)

    # -- operators -----------------------------------------------------------------------

    def space_runs(self, who: Principal, space_id: str,
                   status: RunState | None = None, limit: int = 200) -> list[RunIndex]:
        member_of(self.store, who, space_id, "admin")
        return self.store.runs.by_status(space_id, status, limit=limit)

    def operator_cancel(self, who: Principal, space_id: str, run_id: str,
                        reason: str = "") -> RunView:
        found = self._space_run(who, space_id, run_id)
        view = self._cancel(found.value, who, reason or f"cancelled by operator {who.user_id}")
        return operator_view(view)

    def operator_resume(self, who: Principal, space_id: str, run_id: str, *,
                        max_tokens: int | None = None, max_cost: float | None = None,
                        note: str = "") -> RunView:
        """An operator (admin) resumes any run of the space, raising its budget."""
        found = self._space_run(who, space_id, run_id)
        snapshot = self._snapshot(found.value.agent_id, found.value.version)
        raised = budget_raise(self.store, self.checkpoints, who, found.value, snapshot,
                              max_tokens=max_tokens, max_cost=max_cost, note=note)
        run = self._take_lease(found, doing="resumed")
        self._launch(RunJob("resume", run, snapshot, raise_budget=raised))
        return operator_view(self._view(run, detail=False))

    def _space_run(self, who: Principal, space_id: str, run_id: str) -> Versioned[Run]:
        member_of(self.store, who, space_id, "admin")
        check_id(run_id, "run", "run")
        found = self.store.runs.find(run_id)
        if found is None or found.value.space_id != space_id:
            raise NotFound(f"run {run_id} not found", code="run_not_found")
        return found

    def recover(self) -> int:
        """After a restart: runs that held their session but that nothing here drives
        become interrupted (started) or failed (never started). Returns how many."""
        count = 0
        for run_id, session_id in self.store.runs.active():
            if not self.launcher.driving(run_id):
                self.tracker.sync(session_id, runs=[run_id])
                self.tracker.stopped(session_id, run_id, absent=(
                    "failed", {"code": "server_stopped",
                               "message": "the server stopped before the run started"}))
                count += 1
        return count

    # -- reading -------------------------------------------------------------------------

    def messages(self, who: Principal, session_id: str, *, after: int = 0, limit: int = 100,
                 instance: str | None = None) -> MessagePage:
        own_session(self.store, who, session_id)
        if after < 0 or not 1 <= limit <= 200:
            raise Invalid("after >= 0 and 1 <= limit <= 200", code="invalid_field",
                          details={"fields": [{"field": "after" if after < 0 else "limit",
                                               "message": "out of range"}]})
        if instance is not None and not INSTANCE.fullmatch(instance):
            raise Invalid("instance: main or a child instance id", code="invalid_field",
                          details={"fields": [{"field": "instance", "message": "invalid"}]})
        records = self.store.streams.records(session_id, after, limit, instance=instance)
        bodies = self._bodies(records)
        items: list[MessageItem] = []
        size = 0
        for record in records:
            if record.note is not None:
                message, visible = dict(record.note["message"]), None
            else:
                body = bodies.get((record.run_id, record.instance, record.src or 0), {})
                message = dict(body.get("message") or {})
                visible = body.get("visible") or None
            message, cut = cap_message(self.tracker.redactor.scrub(message))
            size += len(str(message.get("content") or ""))
            items.append(MessageItem(seq=record.seq, run_id=record.run_id,
                                     instance=record.instance, kind=record.kind,
                                     message=message, truncated=cut,
                                     visible=self.tracker.redactor.scrub(visible)
                                     if visible else None, at=record.at))
            if size > PAGE_CHARS:
                break
        return MessagePage(items=items, next_after=items[-1].seq if items else after)

    def _bodies(self, records: Iterable[Any]) -> dict[tuple[str, str, int], dict[str, Any]]:
        ranges: dict[tuple[str, str], list[int]] = {}
        for record in records:
            if record.src is not None:
                ranges.setdefault((record.run_id, record.instance), []).append(record.src)
        out: dict[tuple[str, str, int], dict[str, Any]] = {}
        for (run_id, instance), seqs in ranges.items():
            low, high = min(seqs), max(seqs)
            for entry in self.checkpoints.read(run_id, f"src:{instance}", low - 1,
                                               high - low + 1):
                out[(run_id, instance, entry.seq)] = entry.body
        return out

    def events(self, who: Principal, session_id: str, run_id: str, *, after: int = 0,
               wait: float = 0.0, limit: int = 200) -> EventPage:
        """The run's events after ``after``; with ``wait``, up to that many seconds for one
        — unless the run has stopped and let go (nothing follows until its way out is
        taken: answered at once, ``done`` with the status and the ``way_out``). Stopped is
        every state but queued and running: blocked, interrupted (nothing drives it),
        completed, failed, cancelled."""
        self._own_run(who, session_id, run_id)
        check_event_cursor(after, wait, limit)
        deadline = time.monotonic() + wait
        while True:
            found = self.store.events.read(run_id, after=after, limit=limit)
            run = self.store.runs.get(session_id, run_id)
            assert run is not None
            view = self._view(run.value, detail=False)
            # settled once the driver let go (its last sync and status event are written)
            settled = view.status not in MOVING_STATES and not view.driven
            remaining = deadline - time.monotonic()
            if found or settled or remaining <= 0:
                break
            self.tracker.wait(min(remaining, 0.5))
        items = [EventItem(seq=e.seq, type=e.type, at=e.at, data=e.data) for e in found]
        next_after = items[-1].seq if items else after
        # done once settled and nothing follows this page
        done = settled and len(found) < limit and \
            not self.store.events.read(run_id, after=next_after, limit=1)
        return EventPage(items=items, next_after=next_after, status=view.status, done=done,
                         way_out=view.way_out if done else None)
