"""What the CLI shows of a run: ``RunReport`` (``inspect`` / ``show``), ``Resolution``
(``resolve``), the operators' verdicts and the status lines printed after a transcript."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentloom.local.operator import VERDICT_FLAGS
from agentloom.platform.lease import Liveness
from agentloom_runtime.contracts import RunOutcome, RunStatus, StepResult, UnknownOperation
from agentloom_runtime.engine import RunSummary


@dataclass(frozen=True)
class RunReport:
    """What ``inspect`` / ``show`` know about a run: its summary, who drives it when it
    is running (``driver``: alive / gone = interrupted / unverifiable), what is unknown
    when it is blocked on an operation of unknown outcome, and the way out."""

    run: RunSummary
    way_out: str | None  # resume, resolve, confirm_hooks, raise_budget, change_model,
    # new_question; None while driven
    driver: Liveness | None = None
    unknown: UnknownOperation | None = None
    note: str | None = None  # why ``unknown`` could not be read
    lines: list[str] = field(default_factory=list)  # the transcript
    verdicts: list[dict[str, Any]] = field(default_factory=list)  # the operators' log


@dataclass(frozen=True)
class Resolution:
    """What ``resolve`` did: the operation the verdict settled, the run's status after
    it (and after driving on), how the verdict ended the run if it did
    (``treat_as_failed``), and the last step when the run was driven on."""

    unknown: UnknownOperation
    status: RunStatus
    ended: RunOutcome | None  # the verdict itself ended the run
    way_out: str | None
    result: StepResult | None  # None: not driven on (``drive_on=False``) or ended


def verdict_lines(verdicts: Iterable[Mapping[str, Any]]) -> list[str]:
    """The operators' verdicts on the run (its ``verdicts`` log), one line each, in the
    CLI's words: what was decided, by whom, when, on which operation, and the note. A
    ``--run-again`` or ``--send-again`` leaves no record of its own in the transcript."""
    lines = []
    for v in verdicts:
        kind = str(v.get("verdict"))
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(v.get("at") or 0)))
        target = v.get("request_id") or v.get("operation_id")
        line = (f"[verdict] {VERDICT_FLAGS.get(kind, kind)} by {v.get('by')} at {stamp} on "
                f"{v.get('kind')} {target} (execution {v.get('execution')})")
        if v.get("exit_code") is not None:
            line += f" · exit code {v['exit_code']}"
        if v.get("note"):
            line += f": {v['note']}"
        lines.append(line)
    return lines


def status_lines(report: RunReport) -> list[str]:
    run = report.run
    error = run.error
    lines = [f"status: {run.status}" + (f" ({error['code']}: {error['message']})"
                                        if error else "")]
    if report.driver == "alive":
        lines.append("driven by a live process on this host")
    elif report.driver == "unverifiable":
        lines.append("driven by a process that cannot be checked from this host")
    elif report.driver == "gone":
        lines.append("interrupted: no process drives it")
    unknown = report.unknown
    if unknown is not None:
        what = f"tool {unknown.tool}" if unknown.tool else f"model call ({unknown.purpose})"
        lines.append(f"unknown: {what}, operation {unknown.operation_id} on instance "
                     f"{unknown.instance}, {unknown.attempts} attempt(s)")
        if unknown.arguments:
            lines.append(f"  arguments: {unknown.arguments}")
        if unknown.command:
            lines.append(f"  command: {dict(unknown.command)}")
        if unknown.host:
            lines.append(f"  host: {dict(unknown.host)}")
        lines.append(f"  verdicts: {', '.join(unknown.verdicts)}")
    elif report.note:
        lines.append(report.note)
    if report.way_out:
        lines.append(f"way out: {report.way_out}")
    return lines
