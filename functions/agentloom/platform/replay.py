"""Replaying a run (``agentloom_runtime.replay``) for its session's creator.

``RunReplays.replay`` reads the run's recording from the checkpoint store (read only),
then replays it on a throwaway in-memory engine whose model and tools answer from the
recording: no model provider, workspace, command sandbox, MCP server or knowledge base
is reached, and nothing of the run or its session changes.

- Without ``version``/``draft``: the run's own snapshot (its meta record), so the replay
  reproduces the run's records; ``identical`` says it did, text for text.
- With ``version`` (another published version of the same agent) or ``draft`` (the
  agent's draft; admins only, as reading the draft is): a replay of the run's own
  version first (its requests are the reference), then the chosen one, compared model
  request by model request: ``diverged_at`` is the first step whose request differs,
  with a diff per part (system prompt, messages, tools, options, purpose).

Refused: a run not found (404 ``run_not_found``), a run still queued, running or driven
(409 ``run_running``: its records are still growing), a run that never started (409
``run_not_started``). What the report shows of records passes through the redactor, as
every session projection does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentloom.platform.access import check_id, own_session
from agentloom.platform.agents import freeze, snapshot_of
from agentloom.platform.domain import Run
from agentloom.platform.errors import Conflict, Invalid, NotFound
from agentloom.platform.host import run_sync
from agentloom.platform.identity import Principal
from agentloom_runtime.replay import Recording, ReplayReport, evaluate, replay_run
from agentloom_runtime.snapshot import AgentSnapshot

if TYPE_CHECKING:
    from agentloom.platform.admin import AdminService
    from agentloom.platform.sessions import SessionService

STOPPED = ("blocked", "completed", "failed", "cancelled")


@dataclass(frozen=True)
class ReplayChoice:
    """What to replay the run with: its own version (neither), another published
    ``version`` of its agent, or the agent's ``draft``."""

    version: int | None = None
    draft: bool = False


class RunReplays:
    def __init__(self, admin: AdminService, sessions: SessionService) -> None:
        self.admin = admin
        self.sessions = sessions

    def replay(self, who: Principal, session_id: str, run_id: str,
               choice: ReplayChoice = ReplayChoice()) -> dict[str, Any]:
        svc = self.sessions
        own_session(svc.store, who, session_id)
        check_id(run_id, "run", "run")
        found = svc.store.runs.get(session_id, run_id)
        if found is None:
            raise NotFound(f"run {run_id} not found", code="run_not_found")
        run = found.value
        if choice.version is not None and choice.draft:
            raise Invalid("give version or draft, not both", code="replay_choice_invalid")
        self._check_stopped(run)
        recording = Recording.read(svc.checkpoints, run_id)
        own = snapshot_of(recording.snapshot) if recording.snapshot else \
            snapshot_of(self._version(who, run, run.version).snapshot)
        other = self._other(who, run, choice)
        engines = svc.engines
        own_tools, own_hooks = engines.replay_parts(run, own)
        if other is None:
            report = run_sync(replay_run(recording, own, tools=own_tools,
                                         hook_registry=own_hooks))
            return self._out(run, recording, report, None, "recorded")
        other_tools, other_hooks = engines.replay_parts(run, other)
        baseline, judged = run_sync(evaluate(
            recording, own, other, own_tools=own_tools, other_tools=other_tools,
            own_hooks=own_hooks, other_hooks=other_hooks))
        return self._out(run, recording, judged, baseline,
                         "draft" if choice.draft else other.version)

    def _check_stopped(self, run: Run) -> None:
        svc = self.sessions
        summary = svc.tracker.summary(run.run_id)
        if summary is None and run.status not in ("queued", "running"):
            raise Conflict(f"run {run.run_id} never started: there is nothing to replay",
                           code="run_not_started", details={"run_id": run.run_id})
        if svc.launcher.driving(run.run_id) or summary is None \
                or summary.status not in STOPPED:
            raise Conflict(f"run {run.run_id} has not stopped (it is queued, running or "
                           "was interrupted while running): its records are still to come; "
                           "replay it once it has stopped", code="run_running",
                           details={"run_id": run.run_id, "status": run.status})

    def _version(self, who: Principal, run: Run, version: int) -> Any:
        return self.admin.version(who, run.space_id, run.agent_id, version)

    def _other(self, who: Principal, run: Run, choice: ReplayChoice) -> AgentSnapshot | None:
        if choice.draft:
            draft = self.admin.draft(who, run.space_id, run.agent_id)
            agent = self.sessions.store.agents.get(run.space_id, run.agent_id)
            latest = agent.value.latest_version if agent is not None else run.version
            data, _ = freeze(draft.config, space_id=run.space_id, agent_id=run.agent_id,
                             version=(latest or 0) + 1)
            return snapshot_of(data)
        if choice.version is None:
            return None
        return snapshot_of(self._version(who, run, choice.version).snapshot)

    def _out(self, run: Run, recording: Recording, report: ReplayReport,
             baseline: ReplayReport | None, version: int | str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run_id": run.run_id, "recorded_version": run.version, "version": version,
            **report.to_dict(), "start_recorded": recording.start_recorded,
            "baseline": baseline.to_dict() if baseline is not None else None}
        scrubbed: dict[str, Any] = self.sessions.tracker.redactor.scrub(out)
        return scrubbed
