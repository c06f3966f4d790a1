"""What the CLI prints: lines that go quiet when the reader goes away, the transcript of
engine events, one JSON document (``--json``), tables for listings, and usage and cost.

With ``--json`` a command prints exactly one JSON document on stdout and nothing else
there (the transcript is not printed); an error is ``{"error": {"code", "message"}}``
on stdout as well as ``error (code): message`` on stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentloom.local import operator
from agentloom_runtime.events import Topic

from ._commands import Way

_TEXT_LIMIT = 400
ERROR_LIMIT = 2_000  # a refusal's message is its advice: shown whole


def short(text: Any, limit: int = _TEXT_LIMIT) -> str:
    value = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    value = value.replace("\n", " ⏎ ")
    return value if len(value) <= limit else value[:limit] + " …"


class Output:
    """Lines to stdout that go quiet when the reader goes away (``| head``): the run
    goes on, nothing is printed about it. ``quiet``: nothing is printed (``--json``)."""

    def __init__(self, out: Any = None, *, quiet: bool = False) -> None:
        self.out = out if out is not None else sys.stdout
        self.quiet = quiet

    def __call__(self, line: str) -> None:
        if not self.quiet:
            self.write(line)

    def write(self, line: str) -> None:
        if self.out is None:
            return
        try:
            print(line, file=self.out, flush=True)
        except BrokenPipeError:
            self.out = None
            silence_stdout()

    def document(self, doc: Mapping[str, Any]) -> None:
        """The one JSON document of ``--json``."""
        self.write(json.dumps(doc, indent=2, ensure_ascii=False, default=str))


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def error(code: str, message: str, *, as_json: bool = False,
          next_commands: Sequence[str] = ()) -> int:
    """An error as the CLI reports it: exit status 2; ``next_commands``: what moves the
    stopped work on (``next: …`` lines, ``"next"`` with ``--json``)."""
    with contextlib.suppress(OSError):
        print(f"error ({code}): {message}", file=sys.stderr)
        for command in next_commands:
            print(f"  next: {command}", file=sys.stderr)
    if as_json:
        doc: dict[str, Any] = {"error": {"code": code, "message": message}}
        if next_commands:
            doc["next"] = list(next_commands)
        Output().document(doc)
    return 2


# ------------------------------------------------------------------ the transcript


class Transcript:
    """Prints engine events as a readable transcript; remembers the current run id (the
    resume command printed on SIGINT / SIGTERM names it)."""

    def __init__(self, out: Any = None, *, way: Way | None = None, resolving: bool = False,
                 quiet: bool = False) -> None:
        self.say = Output(out, quiet=quiet)
        self.way = way or Way()
        self.run_id: str | None = None
        # ``resolve`` itself: a stop on the unknown outcome it is about to settle (or to
        # describe) names no resolve commands, until a verdict is recorded
        self.resolving = resolving

    def __call__(self, topic: Topic, data: Mapping[str, Any]) -> None:
        if topic in ("run.started", "run.resumed") and data.get("run_id"):
            self.run_id = str(data["run_id"])
        if topic == "run.resolved":
            self.resolving = False
        line = self._line(topic, data)
        if line:
            self.say(line)

    def _line(self, topic: Topic, d: Mapping[str, Any]) -> str | None:
        if topic == "model.completed" and d.get("purpose") != "action":
            return None  # reviews and summaries show through their own events
        if topic == "run.stopped":
            return self._stopped(d)
        render = LINES.get(topic)
        if render is None:
            return None
        who = "" if d.get("instance", "main") == "main" else f"[{d['instance']}] "
        return who + render(d)

    def _stopped(self, d: Mapping[str, Any]) -> str:
        line = f"■ {d['status']} ({d['code']}): {self.way.reword(str(d['message']))}"
        if self.resolving and d.get("way_out") == "resolve":
            return line
        for command in self.way.next_commands(str(d["run_id"]), d.get("way_out"),
                                              code=d.get("code")):
            line += f"\n  next: {command}"
        return line


def _result_line(d: Mapping[str, Any]) -> str:
    """Tool results as a person reads them: command results as exit code (or why there is
    none) and output; a refusal as its code and whole message (its advice is never cut)."""
    text = d.get("result")
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        value = text
    if isinstance(value, dict) and "exit_code" in value and "stdout_head" in value:
        out = (value.get("stdout_head") or "") + (value.get("stdout_tail") or "")
        err = (value.get("stderr_head") or "") + (value.get("stderr_tail") or "")
        text = _exit_text(value)
        text += f" · {short(out.strip(), 160)}" if out.strip() else ""
        text += f" · stderr: {short(err.strip(), 120)}" if err.strip() else ""
        return f"  ← {d['name']} [{d['status']}] {text}"
    error = value.get("error") if isinstance(value, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        code = f"{error['code']}: " if error.get("code") else ""
        return f"  ← {d['name']} [{d['status']}] {code}{short(error['message'], ERROR_LIMIT)}"
    return f"  ← {d['name']} [{d['status']}] {short(text, 200)}"


def _exit_text(result: Mapping[str, Any]) -> str:
    """``exit N``, or why a command has no exit code: stopped (Ctrl-C, a cancel, a
    timeout: by which signal) or never started (the runner's error)."""
    code = result.get("exit_code")
    if code is not None:
        return f"exit {code}" + (" (timed out)" if result.get("timed_out") else "")
    reason = "timed out" if result.get("timed_out") else \
        STOPPED.get(str(result.get("error")), str(result.get("error") or "ended"))
    number = result.get("signal")
    if isinstance(number, int) and not isinstance(number, bool):
        try:
            reason += f", killed by {signal.Signals(number).name}"
        except ValueError:
            reason += f", killed by signal {number}"
    return f"no exit code: {reason}"


STOPPED = {"cancelled": "stopped when the run was interrupted or cancelled",
           "skill_unavailable": "never started (a skill it needs is not on this host)",
           "disk_quota_exceeded": "stopped at the workspace's disk quota"}


def _model_line(d: Mapping[str, Any]) -> str:
    calls = d.get("tool_calls") or []
    return f"model → {', '.join(calls)}" if calls else f"model: {short(d.get('content'))}"


LINES: dict[Topic, Callable[[Mapping[str, Any]], str]] = {
    "run.started": lambda d: f"▶ run {d['run_id']}\n  task: {short(d['task'])}",
    "run.resumed": lambda d: f"▶ resuming run {d['run_id']} (execution {d['execution']})",
    "run.resolved": lambda d: "✓ verdict "
    f"{operator.VERDICT_FLAGS.get(d['verdict'], d['verdict'])} recorded (by {d['by']})",
    "model.completed": _model_line,
    "tool.started": lambda d: f"  tool {d['name']} {short(d.get('arguments'), 200)}",
    "tool.completed": _result_line,
    "review.decided": lambda d: f"review: {d['decision']} {short(d.get('reason'), 200)}",
    "context.compacted": lambda d: "context compacted",
    "subagent.started": lambda d: f"  delegated to {d['instance']} ({d['template']})",
    "run.finished": lambda d: f"■ {d['status']}\n\n{d.get('answer') or ''}",
}


# ------------------------------------------------------------------ listings and cost


def when(stamp: float | None) -> str:
    if not stamp:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def money(cost: float | None) -> str:
    """A cost in the model connection's currency; ``-`` when it has no prices."""
    return "-" if cost is None else f"{cost:.6f}".rstrip("0").rstrip(".") or "0"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Columns padded to their widest cell (numbers right-aligned)."""
    cells = [[str(c) for c in headers], *([str(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [all(_number(row[i]) for row in cells[1:])
               and any(row[i] != "-" for row in cells[1:]) for i in range(len(headers))]
    return ["  ".join(c.rjust(w) if n else c.ljust(w)
                      for c, w, n in zip(row, widths, numeric, strict=True)).rstrip()
            for row in cells]


def _number(cell: str) -> bool:
    return cell == "-" or cell.replace(",", "").replace(".", "", 1).isdigit()


def cost_lines(cost: Mapping[str, Any] | None) -> list[str]:
    """Tokens and cost of a run (``RunCost`` as JSON), then one line per model call."""
    if not cost:
        return ["usage: none recorded"]
    priced = cost.get("cost")
    lines = [f"usage: {cost['calls']} model call(s), {cost['total_tokens']:,} tokens "
             f"({cost['input_tokens']:,} in, {cost['output_tokens']:,} out), "
             + (f"cost {money(priced)}" if priced is not None
                else "no cost (the model connection has no prices)")]
    steps = cost.get("steps") or []
    if not steps:
        return lines
    shown = cost.get("steps_total", len(steps))
    lines.append("steps:" if shown == len(steps) else
                 f"steps (the latest {len(steps)} of {shown}):")
    rows = [[s["op_id"], s["purpose"], s["instance"], f"{s['input_tokens']:,}",
             f"{s['output_tokens']:,}", f"{s['total_tokens']:,}", money(s.get("cost"))]
            for s in steps]
    lines += ["  " + line for line in table(("STEP", "PURPOSE", "INSTANCE", "IN", "OUT",
                                              "TOKENS", "COST"), rows)]
    return lines


def run_rows(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """Runs as a table: status, tokens and cost (items: run documents)."""
    if not items:
        return ["no runs"]
    rows = [[r["run_id"], r.get("session_id") or "-", r["status"],
             (r.get("usage") or {}).get("calls", 0),
             f"{(r.get('usage') or {}).get('total_tokens', 0):,}",
             money((r.get("cost") or {}).get("cost")), when(r.get("created_at"))]
            for r in items]
    return table(("RUN", "SESSION", "STATUS", "CALLS", "TOKENS", "COST", "CREATED"), rows)


def space_run_rows(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """A space's run index as a table (items: ``RunIndex`` as JSON): who, status, tokens
    and cost; ``?`` where an entry was indexed before the index carried usage."""
    if not items:
        return ["no runs"]
    rows = []
    for r in items:
        usage = r.get("usage")
        rows.append([r["run_id"], r["user_id"], f"{r['agent_id']} v{r['version']}",
                     r["status"], usage["calls"] if usage else "?",
                     f"{usage['total_tokens']:,}" if usage else "?",
                     money(usage.get("cost")) if usage else "?", when(r.get("updated_at")),
                     r.get("error_code") or ""])
    return table(("RUN", "USER", "AGENT", "STATUS", "CALLS", "TOKENS", "COST", "UPDATED",
                  "ERROR"), rows)


def session_rows(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """Sessions as a table (items: session documents, with ``last_status`` and the
    ``usage`` summed over their runs)."""
    if not items:
        return ["no sessions"]
    rows = [[s["session_id"], f"{s['agent_id']} v{s['version']}", s.get("runs", 0),
             s.get("last_status") or "-", f"{(s.get('usage') or {}).get('total_tokens', 0):,}",
             s.get("active_run") or "-", when(s.get("created_at")), s.get("title") or ""]
            for s in items]
    return table(("SESSION", "AGENT", "RUNS", "LAST STATUS", "TOKENS", "ACTIVE RUN",
                  "CREATED", "TITLE"), rows)


def session_document(session: Mapping[str, Any],
                     runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A session (as stored or as the API returns it) with what its runs add up to:
    the status of the latest, and their usage summed (``runs``: Run records as JSON)."""
    ordered = sorted(runs, key=lambda r: (r.get("created_at") or 0, r["run_id"]))
    usage = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    for run in ordered:
        for key in usage:
            usage[key] += int((run.get("usage") or {}).get(key, 0))
    return {**session, "runs": len(ordered),
            "last_status": ordered[-1]["status"] if ordered else None, "usage": usage}
