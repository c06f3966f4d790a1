"""The embedded application: SQLite checkpoints, a local workspace root, the local
sandbox, the agent's trusted hooks and the local driver — one machine, no cloud.

A question (``run``) takes the session's lease (refused while another run of the session
is active, or when the session belongs to another agent), opens the run in the
session's record stream, builds its history from that stream, then starts and drives
it; the lease is given back when the driver stops (``agentloom.local.runs``, the run
driver ``agentloom serve`` uses too). The stream is the platform's, in the platform
store on the same SQLite file: each step's session records, usage and the run's
reusable view are written in the step's own checkpoint transaction (``SessionCommits``),
so nothing is synced after a step and a crash cannot separate them. A session holding
the earlier CLI stream (written before) is refused with a way on (``old_stream``).
``resume`` and ``resolve`` take the lease for the run they continue; a run that already
ended is not resumed (its result is returned as it is). Known provider keys are redacted
from projected history and from every event before the host's ``emit`` sees it.

Every engine gets the hook registry for its agent (``hooks``: by default the trusted
handlers of the hook packages the agent file lists, ``operator.hook_registry``).

``resolve`` records an operator's verdict on the operation of unknown outcome that blocks
a run. A run that was killed is still stored as ``running``; once the session lease
proves its driver gone, ``resolve`` (and ``examine``) start the new execution a resume
would and take its first step, which re-examines the operation that was in flight and
blocks on it at once when its outcome is unknown — so a verdict needs one command.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from agentloom.capabilities import RunScope
from agentloom.local.runs import RunDriver, stopped_step
from agentloom.models.gateway import gateway_for
from agentloom.platform.domain import Run
from agentloom.platform.host import HookLoader, RunHost, hook_registry
from agentloom.platform.launcher import RunJob
from agentloom.platform.lease import Driver, this_process
from agentloom.platform.redaction import Redactor
from agentloom.platform.tracker import RunTracker
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.context.history import RunHistory
from agentloom_runtime.contracts import (
    RunOutcome,
    RunStatus,
    StepResult,
    UnknownOperation,
    Verdict,
)
from agentloom_runtime.engine import Engine, RunSummary, cancel_run, read_run
from agentloom_runtime.errors import CheckpointConflict, ConfigError, PersistenceError
from agentloom_runtime.events import Emit, Topic
from agentloom_runtime.snapshot import AgentSnapshot, parse_snapshot

from .embedded import local_host
from .home import DATABASE as DATABASE  # the home's names, where callers import them
from .home import KEY_FILE as KEY_FILE
from .home import Home, open_home
from .home import open_checkpoint_store as open_checkpoint_store
from .report import Resolution as Resolution
from .report import RunReport as RunReport
from .report import status_lines as status_lines
from .report import verdict_lines as verdict_lines
from .sessions import LOCAL_USER as LOCAL_USER
from .sessions import CliSessions, old_stream
from .workspaces import LocalWorkspaces

CANCEL_ATTEMPTS = 5
ENDED = ("completed", "failed", "cancelled")


def _nothing_to_resolve(run_id: str, status: RunStatus, way_out: str | None,
                        why: str) -> ConfigError:
    return ConfigError(f"run {run_id} {why}; there is nothing to resolve",
                       details={"code": "nothing_to_resolve", "run_id": run_id,
                                "status": status, "way_out": way_out})


def _why_nothing(before: RunSummary, engine: Engine) -> str:
    """Why a run has no unknown outcome to resolve (``before``: as it was stored)."""
    error = engine.error
    if engine.status == "running" and before.in_flight:
        return ("was interrupted, and the outcome of what it was doing is known (the new "
                "execution settled it)")
    if engine.status == "running":
        return "was interrupted between steps (nothing was in flight)"
    code = f" ({error['code']})" if error else ""
    return f"is {engine.status}{code}, not blocked on an unknown outcome"


@dataclass
class _Driving:
    """An engine on a run whose session lease this process holds."""

    engine: Engine
    workspaces: LocalWorkspaces
    driver: RunDriver
    session: str

    async def step(self) -> StepResult:
        """One step (a command it asks for is left for the next drive to run)."""
        return await self.engine.step()

    async def drive(self, pause: float) -> StepResult:
        return await self.driver.drive(self.engine, self.session,
                                       runner=self.workspaces.runner(), pause=pause)


class LocalApp:
    """``home`` holds the database and the workspaces; ``emit`` sees every engine event
    (redacted); ``hooks`` gives the trusted handlers for an agent's hook bindings (by
    default loaded from the hook packages its agent file lists; ``lambda _: registry``
    for a fixed registry); ``reader``: this process only reads the home."""

    def __init__(self, home: Path, *, emit: Emit | None = None,
                 hooks: HookLoader = hook_registry, reader: bool = False) -> None:
        self.home = home
        self.emit = emit
        self.hooks = hooks
        self.reader = reader  # only reads: a full disk still opens (open_home)
        self.redactor = Redactor.from_environment()
        self._home: Home | None = None
        self._host: RunHost | None = None

    def _opened(self) -> Home:
        if self._home is None:
            self._home = open_home(self.home, self.redactor, reader=self.reader)
        return self._home

    @property
    def store(self) -> SqliteCheckpointStore:
        return self._opened().checkpoints

    @property
    def tracker(self) -> RunTracker:
        """The session streams: the platform store on the same file, its companion
        attached to the checkpoint store (one transaction per step)."""
        return self._opened().tracker

    def close(self) -> None:
        if self._home is not None:
            self._home.close()

    def sessions(self) -> CliSessions:
        """The session lease, worded for the CLI (``agentloom.local.sessions``)."""
        return CliSessions(self.tracker)

    def driver(self) -> RunDriver:
        return RunDriver(self.tracker)

    # -- a session's stream ------------------------------------------------------------------

    def records(self, session: str) -> list[dict[str, Any]]:
        """The session's main records in session order (messages read from the runs,
        credentials redacted)."""
        return self.tracker.records(session)

    def runs(self, session: str) -> list[str]:
        """The session's runs, in the order they were asked."""
        runs = self.tracker.store.runs.of_session(session)
        return [r.run_id for r in sorted(runs, key=lambda r: (r.created_at, r.run_id))]

    def history(self, session: str) -> RunHistory:
        """What a new question of the session would inherit."""
        return self.tracker.history(session)

    def open_run(self, session: str, run_id: str, snapshot: AgentSnapshot,
                 driver: Driver | None = None) -> Run:
        """Open ``run_id`` in the session's stream holding the session's lease (``driver``:
        the process that drives it, this one by default), before its first commit."""
        if old_stream(self.store, session):
            raise _old_stream(session, self.home)
        return self.sessions().open(session, run_id, snapshot, driver or this_process())

    def meta(self, run_id: str) -> dict[str, Any]:
        entries = self.store.read(run_id, "meta", 0, 1)
        if not entries:
            raise ConfigError(f"run {run_id} does not exist in {self.home}")
        return entries[0].body

    def summary(self, run_id: str) -> RunSummary:
        summary = read_run(self.store, run_id)
        if summary is None:
            raise ConfigError(f"run {run_id} does not exist in {self.home}")
        return summary

    def _emit(self, topic: Topic, data: Mapping[str, Any]) -> None:
        if self.emit is not None:
            self.emit(topic, self.redactor.scrub(data))

    def host(self) -> RunHost:
        """The run host on this home (``agentloom.local.embedded.local_host``, as
        ``serve``'s, with the same capability set: an agent file's Skills, MCP tools and
        knowledge bases are those of the home), its events to ``emit``; each engine gets
        the CLI's chosen model."""
        if self._host is None:
            from .capabilities import embedded_capabilities

            self._host = local_host(self.home, self.tracker, gateway_for,
                                    embedded_capabilities(self.home),
                                    events=lambda run_id: self._emit, hooks=self.hooks)
        return self._host

    def engine(self, snapshot: AgentSnapshot, gateway: Any, *, session: str,
               run_id: str | None = None,
               new_run: str | None = None) -> tuple[Engine, LocalWorkspaces]:
        """An engine for ``snapshot`` with its hooks (attached to ``run_id`` if given;
        ``new_run``: the id a new run will start with, for its observer)."""
        scope = RunScope(space_id=snapshot.space_id, agent_id=snapshot.agent_id,
                         version=snapshot.version, session_id=session,
                         run_id=run_id or new_run or "unstarted")
        engine, workspaces = self.host().engine(scope, snapshot, attach=run_id is not None,
                                                model=gateway)
        assert isinstance(workspaces, LocalWorkspaces)
        return engine, workspaces

    # -- questions, resumes, verdicts, cancellations ---------------------------------------

    async def run(self, snapshot: AgentSnapshot, gateway: Any, question: str, *,
                  session: str = "cli", pause: float = 0.0) -> StepResult:
        self.redactor.add(os.environ.get(snapshot.model.api_key_ref or "", ""))
        driver = self.driver()
        run_id = uuid.uuid4().hex
        run = self.open_run(session, run_id, snapshot)  # the run and its lease, at once
        try:
            engine, workspaces = self.engine(snapshot, gateway, session=session,
                                             new_run=run_id)
            try:
                await self.host().begin(engine, RunJob("ask", run, snapshot,
                                                       question=question))
                return await driver.drive(engine, session, runner=workspaces.runner(),
                                          pause=pause)
            finally:
                await engine.close()
        finally:
            driver.stopped(session, run_id)

    async def resume(self, run_id: str, snapshot: AgentSnapshot, gateway: Any, *,
                     retry_unknown_models: bool = False, confirm_hooks: bool = False,
                     pause: float = 0.0, raise_budget: Any = None) -> StepResult:
        """A new execution of a stopped or interrupted run, driven until it stops. A run
        that already ended (completed, failed, cancelled) is returned as it is."""
        summary = self.summary(run_id)
        if summary.status in ENDED:
            return stopped_step(summary)
        async with self._driving(run_id, snapshot, gateway) as run:
            await run.engine.begin_execution(retry_unknown_models=retry_unknown_models,
                                             confirm_hooks=confirm_hooks,
                                             raise_budget=raise_budget)
            return await run.drive(pause)

    async def resolve(self, run_id: str, snapshot: AgentSnapshot, gateway: Any,
                      verdict: Verdict, *, drive_on: bool = True,
                      pause: float = 0.0) -> Resolution:
        """Record ``verdict`` on the unknown outcome that blocks the run (one durable
        record: who, when, what), then drive the run on unless ``drive_on`` is False. A
        killed run is first brought to where it blocks (see the module docstring).
        ``ConfigError`` (details ``code``): ``nothing_to_resolve`` (with ``status`` and
        ``way_out``), ``verdict_not_applicable`` (with ``verdicts``)."""
        summary = self.summary(run_id)
        if summary.status in ENDED:
            raise _nothing_to_resolve(run_id, summary.status, "new_question",
                                      f"is {summary.status}")
        async with self._driving(run_id, snapshot, gateway) as run:
            engine = run.engine
            if engine.status == "running":  # killed: this process took the lease over
                await self._reach_block(run, summary)
            unknown = engine.unknown()
            if unknown is None:
                raise _nothing_to_resolve(run_id, engine.status,
                                          engine.way_out() or "resume",
                                          _why_nothing(summary, engine))
            if verdict.kind not in unknown.verdicts:
                raise ConfigError(
                    f"verdict {verdict.kind!r} does not apply to a {unknown.kind} of "
                    f"unknown outcome; one of {', '.join(unknown.verdicts)} does",
                    details={"code": "verdict_not_applicable", "verdict": verdict.kind,
                             "kind": unknown.kind, "verdicts": list(unknown.verdicts)})
            await engine.resolve(verdict)  # the host sees it (run.resolved)
            if engine.status != "running":  # the verdict ended it (treat_as_failed)
                return Resolution(unknown, engine.status, engine.outcome(),
                                  engine.way_out(), None)
            result = await run.drive(pause) if drive_on else None
            return Resolution(unknown, engine.status, None, engine.way_out(), result)

    async def examine(self, run_id: str, snapshot: AgentSnapshot,
                      gateway: Any) -> RunReport:
        """``inspect``, after bringing a killed run whose operation was in flight to where
        it blocks (a new execution and its first step, as ``resolve`` does): what is
        unknown about it can then be read."""
        report = await self.inspect(run_id, gateway=gateway)
        if report.driver == "gone" and report.run.in_flight:
            with contextlib.suppress(CheckpointConflict):  # someone else moved it on
                async with self._driving(run_id, snapshot, gateway) as run:
                    if run.engine.status == "running":
                        await self._reach_block(run, report.run)
            report = await self.inspect(run_id, gateway=gateway)
        return report

    async def outcome(self, run_id: str, snapshot: AgentSnapshot,
                      gateway: Any) -> RunOutcome | None:
        """How the run ended (its answer, its reason); None while it has not."""
        session = self.summary(run_id).labels.get("session", "cli")
        engine, _ = self.engine(snapshot, gateway, run_id=run_id, session=session)
        try:
            return engine.outcome()
        finally:
            await engine.close()

    @staticmethod
    async def _reach_block(run: _Driving, summary: RunSummary) -> None:
        """A killed run with an operation in flight: a new execution, and the step that
        re-examines that operation (it blocks at once when its outcome is unknown). With
        nothing in flight nothing is taken: there is nothing unknown to reach."""
        if summary.in_flight is None:
            return
        await run.engine.begin_execution()
        await run.step()

    async def cancel(self, run_id: str, snapshot: AgentSnapshot, gateway: Any, *,
                     reason: str = "cancelled by the user") -> RunSummary:
        """Cancel a run, whoever drives it (its driver stops at its next step); the
        session's next question sees a status record of it."""
        session = self.summary(run_id).labels.get("session", "cli")
        cancel_run(self.store, run_id, reason, attempts=CANCEL_ATTEMPTS)  # no binding check
        self.tracker.stopped(session, run_id)  # its status record rode in the commit
        return self.summary(run_id)

    @contextlib.asynccontextmanager
    async def _driving(self, run_id: str, snapshot: AgentSnapshot,
                       gateway: Any) -> AsyncIterator[_Driving]:
        """The session's lease for the run (refused while a live driver holds it; taken
        over when its driver is provably gone), then an engine attached to it."""
        session = self.summary(run_id).labels.get("session", "cli")
        if old_stream(self.store, session):
            raise _old_stream(session, self.home)
        driver = self.driver()
        self.sessions().take(session, run_id, this_process())
        try:
            engine, workspaces = self.engine(snapshot, gateway, run_id=run_id,
                                             session=session)
            try:
                yield _Driving(engine, workspaces, driver, session)
            finally:
                await engine.close()
        finally:
            driver.stopped(session, run_id)

    # -- reading a run ---------------------------------------------------------------------

    async def inspect(self, run_id: str, *, gateway: Any = None) -> RunReport:
        """The run's status, error, driver, what is unknown and the way out, with its
        transcript (credentials redacted). Reading what is unknown attaches an engine:
        with ``gateway``, or the model the run was started with (``restore_model``)."""
        summary = self.summary(run_id)
        meta = self.meta(run_id)
        snapshot = parse_snapshot(meta["snapshot"])
        self.redactor.add(os.environ.get(snapshot.model.api_key_ref or "", ""))
        lines = [line for instance in summary.instances for line in self._lines(run_id,
                                                                                instance)]
        way_out, driver = summary.way_out, None
        if summary.status == "running":
            lease = self.sessions().state(summary.labels.get("session", "cli"))
            driver = lease.liveness if lease.run_id == run_id else "gone"
            way_out = "resume" if driver == "gone" else None
        unknown, note = None, None
        if way_out == "resolve":
            unknown, note = await self._unknown(run_id, snapshot, meta, summary, gateway)
        verdicts = [self.redactor.scrub(dict(e.body))
                    for e in self.store.read(run_id, "verdicts")]
        return RunReport(run=summary, way_out=way_out, driver=driver, unknown=unknown,
                         note=note, lines=lines, verdicts=verdicts)

    async def _unknown(self, run_id: str, snapshot: AgentSnapshot, meta: Mapping[str, Any],
                       summary: RunSummary, gateway: Any
                       ) -> tuple[UnknownOperation | None, str | None]:
        from .models import restore_model

        try:
            if gateway is None:
                gateway = restore_model(snapshot, meta["bindings"]["model"]).gateway
            engine, _ = self.engine(snapshot, gateway, run_id=run_id,
                                    session=summary.labels.get("session", "cli"))
        except (ConfigError, PersistenceError) as err:  # e.g. its capabilities, disk full
            return None, f"what is unknown cannot be read here: {err.message}"
        except sqlite3.Error as err:
            return None, f"what is unknown cannot be read here: {err}"
        try:
            unknown = engine.unknown()
        finally:
            await engine.close()
        if unknown is None:
            return None, None
        scrub = self.redactor.scrub
        return dataclasses.replace(
            unknown, arguments=scrub(unknown.arguments), command=scrub(unknown.command),
            host=scrub(unknown.host)), None

    def _lines(self, run_id: str, instance: str) -> list[str]:
        out = []
        for entry in self.store.read(run_id, f"src:{instance}"):
            message = entry.body["message"]
            text = message.get("content") or ""
            if message.get("tool_calls"):
                text += " → " + ", ".join(
                    f"{c['function']['name']}({c['function']['arguments']})"
                    for c in message["tool_calls"])
            out.append(self.redactor.text(f"[{instance} #{entry.seq} {entry.body['kind']}] "
                                          f"{text}"))
        return out

    def show(self, run_id: str, out: TextIO, *, gateway: Any = None) -> RunReport:
        """Print ``inspect``'s report: the transcript, then the status lines."""
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop()
            raise ConfigError("show() runs its own event loop; in async code use "
                              "`await app.inspect(run_id)` and `status_lines(report)`")
        report = asyncio.run(self.inspect(run_id, gateway=gateway))
        for line in [*report.lines, *verdict_lines(report.verdicts), *status_lines(report)]:
            print(self.redactor.text(line), file=out)
        return report


def _old_stream(session: str, home: Path) -> ConfigError:
    return ConfigError(
        f"session {session!r} in {home} holds the session stream of an earlier version "
        "of the CLI (before session records were written in each run's commit); it is "
        "not migrated: ask in a new session (`agentloom run --session NEW ...`), or use "
        "the earlier version to continue it",
        details={"code": "session_stream_outdated", "session": session})
