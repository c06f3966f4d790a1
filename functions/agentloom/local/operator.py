"""The operator's side of embedded runs (issue 9: every failure has a way out).

- **Resolve**: what is unknown about a blocked run (``unknown_lines``, ``describe``), and
  the CLI's words for a verdict the app refused (``reworded``).
- **Ways out**: the exact next command for every stopped state (``next_commands``),
  printed by the transcript when a run stops, by ``show`` and by ``ended_lines``; a
  model the provider does not have (``change_model``) names the setting to fix, not a
  resume that would ask for it again.

Words shown to a person name the CLI's own commands and flags, never SDK parameters.
Importing this module is cheap (the CLI's parser uses its tables): the engine, the hook
loader and the models are imported where they are used.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentloom_runtime.errors import ConfigError

if TYPE_CHECKING:
    from agentloom_runtime.contracts import RunOutcome, UnknownOperation
    from agentloom_runtime.engine import RunSummary
    from agentloom_runtime.snapshot import AgentSnapshot

    from .app import LocalApp

Say = Callable[[str], None]

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
CHANGE_MODEL = ("after fixing model.model or model.base_url in the agent file, or with "
                "--model NAME: the provider has no such model, and this run keeps the one it "
                "started with")
HOST_LABELS = {
    "marker": "execution marker", "state": "marker state", "started_at": "marker written",
    "host_matches": "written on this host", "owner_alive": "owner process alive",
    "sandbox_alive": "sandbox processes alive", "blocking": "blocks writes and commands",
    "exit_seen": "result file present",
}


# ------------------------------------------------------------------ the app


def restored(app: LocalApp, run_id: str) -> tuple[AgentSnapshot, Any, str]:
    """The snapshot a run started with, the same model, and its banner."""
    from agentloom_runtime.snapshot import parse_snapshot

    from .models import restore_model

    meta = app.meta(run_id)
    snapshot = parse_snapshot(meta["snapshot"])
    choice = restore_model(snapshot, meta["bindings"]["model"])
    return snapshot, choice.gateway, choice.banner


def reworded(err: ConfigError, *, prefix: str, run_id: str) -> ConfigError:
    """A refusal of ``LocalApp.resolve`` in the CLI's words (its flags, the next
    command); any other error as it is."""
    details = err.details
    code = details.get("code")
    if code == "verdict_not_applicable":
        flags = " | ".join(VERDICT_FLAGS[v] for v in details["verdicts"])
        return ConfigError(f"{VERDICT_FLAGS[details['verdict']]} does not apply to a "
                           f"{details['kind']} of unknown outcome; use {flags}",
                           details=details)
    if code == "nothing_to_resolve":
        return ConfigError(f"{err.message}. "
                           + _next_sentence(prefix, run_id, details.get("way_out")),
                           details=details)
    return err


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
    if way_out == "change_model":  # the run keeps its model: a resume asks for it again
        return [f'{prefix} run --agent AGENT.yaml "the question again"   ({CHANGE_MODEL})']
    if way_out == "raise_budget":
        return [f"{prefix} resume {run_id} --raise-tokens N | --raise-cost X   (at least "
                "the figure the stop names; see show)"]
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
    """``resolve`` without a verdict: what is unknown, what the host knows, the verdicts.
    A killed run is brought to where it blocks first (``LocalApp.examine``)."""
    snapshot, gateway, _ = restored(app, run_id)
    report = await app.examine(run_id, snapshot, gateway)
    if report.unknown is None:
        driven = f", {DRIVERS[report.driver]}" if report.driver in ("alive",
                                                                   "unverifiable") else ""
        raise ConfigError(
            f"run {run_id} is not blocked on an unknown outcome (status "
            f"{report.run.status}{driven}); nothing to resolve. "
            + (report.note + ". " if report.note else "")
            + _next_sentence(prefix, run_id, report.way_out),
            details={"code": "nothing_to_resolve"})
    for line in unknown_lines(report.unknown, prefix=prefix, run_id=run_id):
        say(line)


def ended_lines(summary: RunSummary, outcome: RunOutcome | None, *, prefix: str,
                note: str | None = None) -> list[str]:
    """``resume`` of a run that already ended: its outcome, and the way out when it did
    not complete (a new question)."""
    run_id = summary.run_id
    reason = (outcome.reason if outcome is not None else "") or summary.reason
    if summary.status == "completed":
        lines = [f"■ completed (run {run_id} had already completed; nothing to resume)"]
        if outcome is not None:
            return [*lines, "", outcome.answer or ""]
        return [*lines, note or f"its answer: `{prefix} show {run_id}`"]
    error = summary.error
    if reason or not error:
        stop = f"■ {summary.status}" + (f": {reason}" if reason else "")
    elif summary.status == "cancelled":
        stop = f"■ cancelled: {error['message']}"
    else:
        stop = f"■ {summary.status} ({error['code']}): {error['message']}"
    lines = [f"{stop} (run {run_id} ended; it cannot be resumed)"]
    return lines + [f"  next: {c}" for c in next_commands(prefix, run_id, "new_question")]


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
