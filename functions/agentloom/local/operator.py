"""The operator's side of embedded runs (issue 9: every failure has a way out).

- **Hooks.** An agent's ``hooks:`` bindings run trusted code from the hook packages its
  ``hook_packages:`` lists (folders or zip files); ``hook_registry`` loads them and
  ``CliApp`` hands the registry to every engine it builds, for new runs and resumes.
- **Resume** with the execution options of the CLI (``--retry-unknown-models``,
  ``--confirm-hooks``).
- **Resolve**: what is unknown about a blocked run (``unknown_lines``), and an
  operator's verdict on it (``CliApp.resolve``), after which the run is driven on.
- **Ways out**: the exact next command for every stopped state (``next_commands``),
  printed by the transcript when a run stops and by ``show``.

Words shown to a person name the CLI's own commands and flags, never SDK parameters.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agentloom_runtime.contracts import StepResult, UnknownOperation, Verdict
from agentloom_runtime.engine import Engine, create_engine
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.hooks import HookRegistry, load_hook_package
from agentloom_runtime.snapshot import AgentSnapshot, parse_snapshot

from .app import LocalApp
from .models import restore_model
from .workspaces import LocalWorkspaces

Say = Callable[[str], None]
Drive = Callable[[float], Awaitable[StepResult]]

VERDICT_FLAGS = {"ran": "--ran", "did_not_run": "--did-not-run", "run_again": "--run-again",
                 "send_again": "--send-again", "treat_as_failed": "--treat-as-failed"}
VERDICT_HELP = {
    "ran": "it ran: the model is told so (add --output TEXT / --output-file PATH and "
           "--exit-code N for what it produced)",
    "did_not_run": "it did not run: the model is told the call failed and nothing happened",
    "run_again": "run it again now (explicit, logged; its effects may happen twice)",
    "send_again": "send the model request again (it may be billed twice)",
    "treat_as_failed": "treat the model call as failed (the run or sub-agent fails)",
}
TOOL_VERDICTS = ("ran", "did_not_run", "run_again")
MODEL_VERDICTS = ("send_again", "treat_as_failed")
DRIVERS = {
    "alive": "driven by a live process on this host: wait for it to stop",
    "unverifiable": "driven by a process that cannot be checked from this host: wait for "
                    "it, or stop it there",
    "gone": "interrupted: no process drives it",
}
HOST_LABELS = {
    "marker": "execution marker", "state": "marker state", "started_at": "marker written",
    "host_matches": "written on this host", "owner_alive": "owner process alive",
    "sandbox_alive": "sandbox processes alive", "blocking": "blocks writes and commands",
    "exit_seen": "result file present",
}


# ------------------------------------------------------------------ hooks


def hook_registry(snapshot: AgentSnapshot) -> HookRegistry | None:
    """The trusted handlers of the agent's hook bindings, loaded from its hook packages
    (None when the agent binds no hooks and lists no packages)."""
    if not snapshot.hooks and not snapshot.hook_packages:
        return None
    bound = sorted({f"{b.hook_id}@{b.version}" for b in snapshot.hooks})
    if not snapshot.hook_packages:
        raise ConfigError(f"the agent binds hooks ({', '.join(bound)}) but lists no "
                          "hook_packages that provide them; add `hook_packages: [PATH]` "
                          "(a folder or zip file with a hooks.yaml) to the agent file")
    registry = HookRegistry()
    for path in snapshot.hook_packages:
        if not Path(path).exists():
            raise ConfigError(f"hook package {path} does not exist (hook_packages in the "
                              "agent file; a relative path is relative to that file)")
        load_hook_package(path, registry)
    missing = [f"{b.hook_id}@{b.version}" for b in snapshot.hooks
               if (b.hook_id, b.version) not in registry]
    if missing:
        provided = sorted(f"{d.hook_id}@{d.version}" for d in registry)
        raise ConfigError(f"no hook package provides {', '.join(sorted(set(missing)))}; "
                          f"the packages provide: {', '.join(provided) or 'nothing'}")
    return registry


# ------------------------------------------------------------------ the app


def restored(app: LocalApp, run_id: str) -> tuple[AgentSnapshot, Any, str]:
    """The snapshot a run started with, the same model, and its banner."""
    meta = app.meta(run_id)
    snapshot = parse_snapshot(meta["snapshot"])
    choice = restore_model(snapshot, meta["bindings"]["model"])
    return snapshot, choice.gateway, choice.banner


class CliApp(LocalApp):
    """``LocalApp`` with the operator's additions: engines get the agent's hook registry,
    ``resume`` takes ``confirm_hooks``, and ``resolve`` records a verdict.

    Stopgap until ``LocalApp`` has these itself: ``engine`` and ``resume`` are the base
    methods plus one argument each, and ``resolve`` is driven like ``resume`` (through
    the base's lease and sync helpers)."""

    def engine(self, snapshot: AgentSnapshot, gateway: Any, *, session: str,
               run_id: str | None = None) -> tuple[Engine, LocalWorkspaces]:
        registry = hook_registry(snapshot)
        self.redactor.add(os.environ.get(snapshot.model.api_key_ref or "", ""))
        workspaces = LocalWorkspaces(self.home / "workspaces", snapshot, session)
        engine = create_engine(snapshot, workspace=workspaces.for_instance, emit=self._emit,
                               save=self.store, checkpoint=run_id, model_gateway=gateway,
                               tools=workspaces.tools(),
                               workspace_provider=workspaces.provider,
                               commands=workspaces.commands, services=workspaces.services(),
                               hook_registry=registry)
        workspaces.bind(engine)
        return engine, workspaces

    async def resume(self, run_id: str, snapshot: AgentSnapshot, gateway: Any, *,
                     retry_unknown_models: bool = False, confirm_hooks: bool = False,
                     pause: float = 0.0) -> StepResult:
        async with self._driving(run_id, snapshot, gateway) as (engine, drive):
            await engine.begin_execution(retry_unknown_models=retry_unknown_models,
                                         confirm_hooks=confirm_hooks)
            return await drive(pause)

    async def resolve(self, run_id: str, snapshot: AgentSnapshot, gateway: Any,
                      verdict: Verdict, *, say: Say, prefix: str = "agentloom",
                      drive_on: bool = True, pause: float = 0.0) -> StepResult | None:
        """Record ``verdict`` on the unknown outcome that blocks the run (one durable
        record: who, when, what), then drive the run on unless ``drive_on`` is False."""
        async with self._driving(run_id, snapshot, gateway) as (engine, drive):
            applicable(engine, run_id, verdict, prefix)
            await engine.resolve(verdict)  # the transcript shows it (run.resolved)
            if engine.status != "running":  # the verdict ended it (--treat-as-failed)
                outcome = engine.outcome()
                say(f"■ {engine.status}" + (f": {outcome.reason}" if outcome and
                                            outcome.reason else ""))
                for command in next_commands(prefix, run_id, engine.way_out()):
                    say(f"  next: {command}")
            if not drive_on:
                say(f"not continued; continue with `{prefix} resume {run_id}`")
                return None
            return await drive(pause)

    @asynccontextmanager
    async def _driving(self, run_id: str, snapshot: AgentSnapshot,
                       gateway: Any) -> AsyncIterator[tuple[Engine, Drive]]:
        """An engine on the run with the session's lease held, and the function that
        drives it (syncing the session after every step)."""
        session = self._summary(run_id).labels.get("session", "cli")
        sessions = self.sessions()
        engine, workspaces = self.engine(snapshot, gateway, run_id=run_id, session=session)
        try:
            if engine.way_out() == "new_question":
                raise ConfigError(f"run {run_id} is {engine.status}; it cannot be resumed "
                                  "— ask a new question", details={"code": "run_finished"})
            lease = sessions.acquire(session, run_id, new=False)
            try:
                yield engine, lambda pause: self._drive(engine, workspaces, sessions,
                                                        session, pause)
            finally:
                self._finish(sessions, session, run_id, lease)
        finally:
            await engine.close()


def applicable(engine: Engine, run_id: str, verdict: Verdict | None,
               prefix: str) -> UnknownOperation:
    """What is unknown, refusing a run that is not blocked on one or a verdict that does
    not apply to it."""
    unknown = engine.unknown()
    if unknown is None:
        raise ConfigError(
            f"run {run_id} is not blocked on an unknown outcome (status {engine.status}); "
            "nothing to resolve. " + _next_sentence(prefix, run_id, engine.way_out()),
            details={"code": "nothing_to_resolve"})
    if verdict is not None and verdict.kind not in unknown.verdicts:
        flags = " | ".join(VERDICT_FLAGS[v] for v in unknown.verdicts)
        raise ConfigError(f"{VERDICT_FLAGS[verdict.kind]} does not apply to a "
                          f"{unknown.kind} of unknown outcome; use {flags}",
                          details={"code": "verdict_not_applicable"})
    return unknown


# ------------------------------------------------------------------ what a person reads


def _what(unknown: UnknownOperation) -> str:
    if unknown.kind == "model":
        return f"model request {unknown.operation_id} ({unknown.purpose or 'action'})"
    return f"{unknown.kind} {unknown.tool} ({unknown.request_id})"


def _when(started_at: float | None) -> str:
    if not started_at:
        return "unknown"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started_at))
    return f"{stamp} ({max(0, int(time.time() - started_at))} s ago)"


def _host_lines(host: dict[str, Any]) -> list[str]:
    lines = []
    for key, value in host.items():
        if key in ("request_id", "result") or value is None:
            continue
        shown = _when(value) if key == "started_at" and isinstance(value, int | float) \
            else ("yes" if value is True else "no" if value is False else str(value))
        lines.append(f"    {HOST_LABELS.get(key, key)}: {shown}")
    if host.get("result"):
        lines.append("    a saved result exists (it is recorded on resume)")
    return lines


def unknown_lines(unknown: UnknownOperation, *, prefix: str, run_id: str) -> list[str]:
    """What is unknown, what the host knows, and each verdict with its command."""
    lines = [f"unknown outcome: {_what(unknown)} in {unknown.instance}",
             f"  started: {_when(unknown.started_at)} (attempt {unknown.attempts})"]
    if unknown.command:
        shown = unknown.command.get("command") or unknown.command.get("argv")
        lines.append(f"  command: {shown} (cwd {unknown.command.get('cwd') or '.'}, "
                     f"timeout {unknown.command.get('timeout_s')} s)")
    elif unknown.arguments is not None:
        lines.append(f"  arguments: {unknown.arguments}")
    if unknown.host:
        lines += ["  what the host knows:", *_host_lines(dict(unknown.host))]
    if unknown.kind == "model":
        lines.append("  the request was sent; no response was saved")
    else:
        lines.append("  it may or may not have run: inspect the workspace, then record "
                     "what happened")
    lines.append("verdicts:")
    for kind in unknown.verdicts:
        extra = " [--output TEXT | --output-file PATH] [--exit-code N]" if kind == "ran" \
            else ""
        lines.append(f"  {prefix} resolve {run_id} {VERDICT_FLAGS[kind]}{extra}")
        lines.append(f"      {VERDICT_HELP[kind]}")
    lines.append("  (each takes --note TEXT and --by NAME; --no-continue records only)")
    return lines


def next_commands(prefix: str, run_id: str, way_out: str | None, *, code: str | None = None,
                  unknown: UnknownOperation | None = None) -> list[str]:
    """The exact commands that move a stopped run on (empty while running). ``code`` (the
    stop's error code) tells a model request from a tool when ``unknown`` is not at hand."""
    if way_out == "resume":
        return [f"{prefix} resume {run_id}"]
    if way_out == "confirm_hooks":
        return [f"{prefix} resume {run_id} --confirm-hooks"]
    if way_out == "new_question":
        return [f'{prefix} run --agent AGENT.yaml "a new question"']
    if way_out != "resolve":
        return []
    model = unknown.kind == "model" if unknown is not None else code == "model_outcome_unknown"
    kinds = unknown.verdicts if unknown is not None else MODEL_VERDICTS if model \
        else TOOL_VERDICTS
    found = [f"{prefix} resolve {run_id}   (shows what is unknown and what the host knows)",
             f"{prefix} resolve {run_id} {' | '.join(VERDICT_FLAGS[k] for k in kinds)}"]
    if model:
        found.append(f"{prefix} resume {run_id} --retry-unknown-models   (= --send-again)")
    return found


def _next_sentence(prefix: str, run_id: str, way_out: str | None) -> str:
    commands = next_commands(prefix, run_id, way_out)
    return f"Next: `{commands[0].split('   (')[0]}`" if commands else ""


async def describe(app: LocalApp, run_id: str, say: Say, *, prefix: str) -> None:
    """``resolve`` without a verdict: what is unknown, what the host knows, the verdicts."""
    report = await app.inspect(run_id)
    if report.unknown is None:
        way_out = report.way_out
        raise ConfigError(
            f"run {run_id} is not blocked on an unknown outcome (status "
            f"{report.run.status}); nothing to resolve. "
            + (report.note + ". " if report.note else "")
            + _next_sentence(prefix, run_id, way_out), details={"code": "nothing_to_resolve"})
    for line in unknown_lines(report.unknown, prefix=prefix, run_id=run_id):
        say(line)


async def show(app: LocalApp, run_id: str, say: Say, *, prefix: str = "agentloom") -> None:
    """The run's source records and status, who drives it, what is unknown, and the
    exact next command."""
    report = await app.inspect(run_id)
    for line in report.lines:
        say(line)
    run = report.run
    error = run.error
    say(f"status: {run.status}" + (f" ({error['code']}: {error['message']})" if error
                                   else ""))
    if report.driver is not None:
        say(DRIVERS.get(report.driver, str(report.driver)))
    if report.unknown is not None:
        for line in unknown_lines(report.unknown, prefix=prefix, run_id=run_id):
            say(line)
    elif report.note:
        say(report.note)
    for command in next_commands(prefix, run_id, report.way_out,
                                 code=error["code"] if error else None,
                                 unknown=report.unknown):
        say(f"next: {command}")
