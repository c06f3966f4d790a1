"""The embedded mode's commands: run, resume, resolve, cancel and show a run; list the
CLI's sessions and runs; create a session for an agent file. Each command is a
coroutine on one ``Ctx``; the app, the engine and the models are imported here, when a
command runs (``import agentloom.cli`` stays fast).

With ``--json`` the transcript is not printed and each command prints one document at
the end: a run (``run_document``: status, way out, answer, what is unknown, usage,
``cost`` with tokens and cost per step, the ``next`` commands) or ``{"items": [...]}``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom.local import inputs, operator
from agentloom.local.report import verdict_lines
from agentloom_runtime.errors import AgentLoomError, ConfigError

from . import _output, _store
from ._commands import Way
from ._output import Output, Transcript
from ._parser import DEFAULT_HOME, verdict_output
from ._served import refuse_if_served

if TYPE_CHECKING:
    from agentloom.local.app import LocalApp, RunReport
    from agentloom_runtime.contracts import StepResult, Verdict
    from agentloom_runtime.engine import RunSummary
    from agentloom_runtime.snapshot import AgentSnapshot

READERS = ("show", "sessions", "runs")  # they only read: a full disk still opens
NOT_SHOWN = {"driver"}  # a session's lease holder: the platform's business (as in the API)
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass
class Ctx:
    app: LocalApp
    args: argparse.Namespace
    say: Output
    way: Way
    json: bool

    def done(self, doc: dict[str, Any], code: int = 0) -> int:
        if self.json:
            self.say.document(doc)
        return code


def _operator_name() -> str:
    import getpass

    try:
        return os.environ.get("USER") or getpass.getuser()
    except (OSError, KeyError):
        return "operator"


def _verdict(args: argparse.Namespace) -> Verdict | None:
    from agentloom_runtime.contracts import Verdict, exit_code_problem

    gives_output = args.output is not None or args.output_file is not None \
        or args.exit_code is not None
    if args.verdict != "ran" and gives_output:
        raise ConfigError("--output, --output-file and --exit-code go with --ran",
                          details={"code": "usage"})
    if args.verdict is None:
        return None
    if (problem := exit_code_problem(args.exit_code)) is not None:  # before anything
        raise ConfigError(problem, details={"code": "invalid_exit_code"})
    return Verdict(kind=args.verdict, by=args.by or _operator_name(), note=args.note,
                   output=verdict_output(args.output, args.output_file),
                   exit_code=args.exit_code)


def _open_store(app: LocalApp, *, new: bool) -> None:
    """The state directory is checked (and, for ``run``, created) before any use."""
    import sqlite3

    (inputs.check_new_home if new else inputs.check_existing_home)(app.home)
    try:
        app.store  # noqa: B018 - opens (and for a new home creates) the database
    except (OSError, sqlite3.Error) as err:
        raise inputs.storage_error(app.home, err) from None


def _exit(result: StepResult | None, say: Output) -> int:
    if result is not None and result.status == "cancelled":  # by another process
        say(f"■ cancelled (run {result.run_id} was cancelled while this process drove it)")
    return 0 if result is None or result.status == "completed" else 3


# ------------------------------------------------------------------ a run as a document


async def run_document(ctx: Ctx, run_id: str, *, report: RunReport | None = None,
                       transcript: bool = False, answer: bool = True) -> dict[str, Any]:
    """The run as ``--json`` prints it: the API's run view's fields where they apply
    (``report``: ``LocalApp.inspect``'s, when it is at hand)."""
    app, way = ctx.app, ctx.way
    report = report or await app.inspect(run_id)
    run = report.run
    stored = _store.run(app.tracker.store, run_id)
    cost = app.tracker.run_cost(run_id)
    error = run.error
    doc: dict[str, Any] = {
        "run_id": run_id, "session_id": run.labels.get("session", "cli"),
        "agent_id": stored.agent_id if stored else None,
        "version": stored.version if stored else None,
        "status": "interrupted" if report.driver == "gone" else run.status,
        "engine_status": run.status, "driver": report.driver, "execution": run.execution,
        "instances": list(run.instances),
        "error": {"code": error["code"], "message": way.reword(error["message"])}
        if error else None,
        "way_out": report.way_out, "reason": run.reason, "answer": None,
        "unknown": report.unknown.to_dict() if report.unknown else None, "note": report.note,
        "usage": stored.usage.model_dump(mode="json") if stored else None,
        "cost": cost.model_dump(mode="json") if cost else None,
        "created_at": stored.created_at if stored else None,
        "updated_at": stored.updated_at if stored else None,
        "next": way.next_commands(run_id, report.way_out,
                                  code=error["code"] if error else None,
                                  unknown=report.unknown)}
    if answer and run.status == "completed":
        doc["answer"], doc["note"] = await _answer(app, run_id)
    if transcript:
        doc["transcript"] = report.lines
        doc["verdicts"] = report.verdicts
    return doc


async def _answer(app: LocalApp, run_id: str) -> tuple[str | None, str | None]:
    try:
        snapshot, gateway, _ = operator.restored(app, run_id)
        outcome = await app.outcome(run_id, snapshot, gateway)
    except AgentLoomError as err:  # e.g. its hook package changed since
        return None, f"its answer cannot be read here: {err.message}"
    return (outcome.answer if outcome is not None else None), None


# ------------------------------------------------------------------ commands on a run


async def _run(ctx: Ctx) -> int:
    from agentloom.local.models import choose_model
    from agentloom_runtime.snapshot import load_agent_file

    app, args = ctx.app, ctx.args
    question = inputs.question(args.question, args.question_file)  # before anything else
    snapshot = load_agent_file(args.agent)
    app.hooks(snapshot)  # the hook packages load, before a run exists
    choice = choose_model(snapshot, provider=args.provider, model=args.model,
                          base_url=args.base_url, demo_script=args.demo_script,
                          agent_path=Path(args.agent))
    _open_store(app, new=True)
    ctx.say(choice.banner)
    result = await app.run(choice.snapshot, choice.gateway, question,
                           session=args.session, pause=args.pause)
    code = _exit(result, ctx.say)
    return ctx.done(await run_document(ctx, result.run_id), code) if ctx.json else code


async def _resume(ctx: Ctx) -> int:
    app, args = ctx.app, ctx.args
    _open_store(app, new=False)
    summary = app.summary(args.run_id)
    snapshot, gateway, banner = operator.restored(app, args.run_id)
    if summary.way_out == "new_question":  # it ended: say how, resume nothing
        return await _ended(ctx, summary, snapshot, gateway)
    refuse_if_served(app, args, ctx.way)  # a served session's run: the server drives it
    ctx.say(banner)
    raised = None
    if args.raise_tokens is not None or args.raise_cost is not None:
        from agentloom_runtime.engine import RaiseBudget

        raised = RaiseBudget(by=args.by or _operator_name(), max_tokens=args.raise_tokens,
                             max_cost=args.raise_cost)
    result = await app.resume(args.run_id, snapshot, gateway,
                              retry_unknown_models=args.retry_unknown_models,
                              confirm_hooks=args.confirm_hooks, pause=args.pause,
                              raise_budget=raised)
    code = _exit(result, ctx.say)
    return ctx.done(await run_document(ctx, args.run_id), code) if ctx.json else code


async def _ended(ctx: Ctx, summary: RunSummary, snapshot: AgentSnapshot, gateway: Any) -> int:
    """A completed run prints its answer (exit 0); a failed or cancelled one says so and
    names the way out, a new question (exit 3)."""
    run_id, code = summary.run_id, 0 if summary.status == "completed" else 3
    if ctx.json:
        return ctx.done(await run_document(ctx, run_id), code)
    outcome, note = None, None
    try:
        outcome = await ctx.app.outcome(run_id, snapshot, gateway)
    except AgentLoomError as err:  # e.g. its hook package changed since
        note = f"its answer cannot be read here ({err.message}); `{ctx.way.show(run_id)}` " \
               "prints its records"
    for line in operator.ended_lines(summary, outcome, prefix=ctx.way.prefix, note=note):
        ctx.say(line)
    return code


async def _resolve(ctx: Ctx) -> int:
    app, args, way = ctx.app, ctx.args, ctx.way
    verdict = _verdict(args)
    _open_store(app, new=False)
    refuse_if_served(app, args, way)  # a served session's run: the server drives it
    if verdict is None:  # what is unknown (a killed run is first brought to its block)
        await operator.describe(app, args.run_id, ctx.say, prefix=way.prefix)
        return ctx.done(await run_document(ctx, args.run_id)) if ctx.json else 0
    snapshot, gateway, banner = operator.restored(app, args.run_id)
    ctx.say(banner)
    try:
        done = await app.resolve(args.run_id, snapshot, gateway, verdict,
                                 drive_on=not args.no_continue, pause=args.pause)
    except ConfigError as err:
        raise operator.reworded(err, prefix=way.prefix, run_id=args.run_id) from None
    code = 0
    if done.ended is not None:  # the verdict ended it (--treat-as-failed)
        ctx.say(f"■ {done.status}" + (f": {done.ended.reason}" if done.ended.reason else ""))
        for command in way.next_commands(args.run_id, done.way_out):
            ctx.say(f"  next: {command}")
        code = 0 if done.status == "completed" else 3
    elif done.result is None:
        ctx.say(f"not continued; continue with `{way.resume(args.run_id)}`")
    else:
        code = _exit(done.result, ctx.say)
    if not ctx.json:
        return code
    doc = await run_document(ctx, args.run_id)
    return ctx.done({**doc, "resolved": done.unknown.to_dict(), "verdict": verdict.kind},
                    code)


async def _cancel(ctx: Ctx) -> int:
    app, args = ctx.app, ctx.args
    _open_store(app, new=False)
    snapshot, gateway, _ = operator.restored(app, args.run_id)
    summary = await app.cancel(args.run_id, snapshot, gateway, reason=args.reason)
    ctx.say(f"■ {summary.status}: {args.reason}")
    for command in ctx.way.next_commands(args.run_id, summary.way_out):
        ctx.say(f"  next: {command}")
    return ctx.done(await run_document(ctx, args.run_id)) if ctx.json else 0


async def _show(ctx: Ctx) -> int:
    """The run's records and status, who drives it, what is unknown, its tokens and cost
    per step, and the exact next command."""
    _open_store(ctx.app, new=False)
    report = await ctx.app.inspect(ctx.args.run_id)
    doc = await run_document(ctx, ctx.args.run_id, report=report, transcript=True,
                             answer=ctx.json)
    if ctx.json:
        return ctx.done(doc)
    say, way = ctx.say, ctx.way
    for line in [*report.lines, *verdict_lines(report.verdicts)]:
        say(line)
    error = doc["error"]
    say(f"status: {report.run.status}" + (f" ({error['code']}: {error['message']})"
                                          if error else ""))
    if report.driver is not None:
        say(operator.DRIVERS.get(report.driver, str(report.driver)))
    if report.unknown is not None:
        for line in operator.unknown_lines(report.unknown, prefix=way.prefix,
                                           run_id=ctx.args.run_id):
            say(line)
    elif report.note:
        say(report.note)
    for line in _output.cost_lines(doc["cost"]):
        say(line)
    for command in doc["next"]:
        say(f"next: {command}")
    return 0


# ------------------------------------------------------------------ listings and creation


async def _sessions(ctx: Ctx) -> int:
    _open_store(ctx.app, new=False)
    store = ctx.app.tracker.store
    items = [_output.session_document(s.model_dump(mode="json", exclude=NOT_SHOWN),
                                      [r.model_dump(mode="json")
                                       for r in _store.runs(store, s.session_id)])
             for s in _store.sessions(store)]
    if not ctx.json:
        for line in _output.session_rows(items):
            ctx.say(line)
    return ctx.done({"items": items})


async def _runs(ctx: Ctx) -> int:
    _open_store(ctx.app, new=False)
    store = ctx.app.tracker.store
    wanted = ctx.args.session
    if wanted is not None and _store.session(store, wanted) is None:
        raise ConfigError(f"no session {wanted!r} in {ctx.app.home}",
                          details={"code": "session_not_found"})
    chosen = [wanted] if wanted is not None else \
        [s.session_id for s in _store.sessions(store)]
    items = [await _run_item(ctx, run.model_dump(mode="json"))
             for session in chosen for run in _store.runs(store, session)]
    if not ctx.json:
        for line in _output.run_rows(items):
            ctx.say(line)
    return ctx.done({"items": items})


async def _run_item(ctx: Ctx, run: dict[str, Any]) -> dict[str, Any]:
    """A run of the listing: the stored record, its status as ``show`` tells it (an
    engine run nobody drives is ``interrupted``) and its tokens and cost."""
    run_id = run["run_id"]
    summary = ctx.app.tracker.summary(run_id)
    if summary is not None:
        run["status"] = summary.status
        if summary.status == "running":
            report = await ctx.app.inspect(run_id)
            run["status"] = "interrupted" if report.driver == "gone" else "running"
    cost = ctx.app.tracker.run_cost(run_id, steps=0)
    run["cost"] = cost.model_dump(mode="json", exclude={"steps"}) if cost else None
    return run


async def _session_create(ctx: Ctx) -> int:
    from agentloom.platform.store import WriteConflict
    from agentloom_runtime.snapshot import load_agent_file

    app, args = ctx.app, ctx.args
    snapshot = load_agent_file(args.agent)
    app.hooks(snapshot)  # as `run` does: a file whose hooks cannot load is refused now
    session_id = args.session or f"s-{uuid.uuid4().hex[:12]}"
    if not SESSION_ID.fullmatch(session_id):
        raise ConfigError(f"session id {session_id!r}: letters, digits, '_', '.' and '-' "
                          "(at most 64, starting with a letter or digit)",
                          details={"code": "invalid_input"})
    _open_store(app, new=True)
    try:
        made = _store.create_session(app.tracker.store, session_id,
                                     space_id=snapshot.space_id, agent_id=snapshot.agent_id,
                                     version=snapshot.version, title=args.title)
    except WriteConflict:
        raise ConfigError(f"session {session_id!r} already exists in {app.home}",
                          details={"code": "session_exists"}) from None
    ask = ctx.way.command("run", "--agent", args.agent, "--session", session_id)
    ctx.say(f"session {session_id} (agent {snapshot.agent_id} v{snapshot.version})")
    ctx.say(f'  next: {ask} "a question"')
    return ctx.done({**made.model_dump(mode="json", exclude=NOT_SHOWN),
                     "next": [f'{ask} "a question"']})


async def _agent_create(ctx: Ctx) -> int:
    raise ConfigError("embedded, an agent is its file: ask with `"
                      f"{ctx.way.command('run', '--agent', ctx.args.file)} \"a question\"` "
                      "(`session create --agent FILE` makes a session for it); `agent "
                      "create` creates an agent on a deployment (`--api URL`)",
                      details={"code": "deployment_only"})


COMMANDS: dict[str, Callable[[Ctx], Coroutine[Any, Any, int]]] = {
    "run": _run, "resume": _resume, "resolve": _resolve, "cancel": _cancel, "show": _show,
    "sessions": _sessions, "runs": _runs, "session create": _session_create,
    "agent create": _agent_create}


# ------------------------------------------------------------------ the process


class _Interrupts:
    """SIGTERM cancels the command like SIGINT does; either way the message names the
    real run id to resume."""

    def __init__(self, transcript: Transcript, *, as_json: bool) -> None:
        self.transcript = transcript
        self.as_json = as_json
        self.signal: str | None = None

    async def guard(self, work: Coroutine[Any, Any, int]) -> int:
        import asyncio
        import signal

        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def terminate() -> None:
            self.signal = "SIGTERM"
            task.cancel()

        loop.add_signal_handler(signal.SIGTERM, terminate)
        try:
            return await work
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    def report(self, name: str) -> int:
        run_id = self.transcript.run_id
        resume = self.transcript.way.resume(run_id) if run_id else None
        where = f"continue with `{resume}`" if resume else "no run had started"
        with contextlib.suppress(OSError):
            print(f"\ninterrupted ({name}): {where}", file=sys.stderr, flush=True)
        if self.as_json:
            Output().document({"run_id": run_id, "status": "interrupted", "signal": name,
                               "next": [resume] if resume else []})
        return 130 if name == "SIGINT" else 143


def _error(err: AgentLoomError, way: Way, *, as_json: bool, home: Path,
           run_id: str | None) -> int:
    code = err.details.get("code") if isinstance(err.details.get("code"), str) else err.code
    message = way.reword(err.message)
    given = err.details.get("next")
    commands = [str(c) for c in given] if isinstance(given, list) else []
    if code == "no_space" and run_id is not None:  # the run stopped at its last commit
        message += f"; free space on the disk that holds {home}, then continue the run"
        if err.details.get("request_id"):  # it ran: its outcome is the operator's to tell
            message += (" (it stops on this command for a verdict: `"
                        f"{way.prefix} resolve {run_id} --ran` with what it printed, "
                        "--did-not-run or --run-again)")
        commands = [way.resume(run_id)]
    return _output.error(str(code), message, as_json=as_json, next_commands=commands)


def main(args: argparse.Namespace, way: Way) -> int:
    import asyncio

    from agentloom.local.app import LocalApp

    home = Path(args.home or os.environ.get("AGENTLOOM_HOME") or DEFAULT_HOME)
    as_json = bool(args.json)
    transcript = Transcript(way=way, resolving=args.command == "resolve", quiet=as_json)
    if args.command in ("resume", "resolve"):
        transcript.run_id = args.run_id
    interrupts = _Interrupts(transcript, as_json=as_json)
    app = LocalApp(home, emit=transcript, reader=args.command in READERS)
    command = COMMANDS[" ".join(filter(None, (args.command, getattr(args, "action", None))))]
    try:
        return asyncio.run(interrupts.guard(command(Ctx(app, args, transcript.say, way,
                                                        as_json))))
    except AgentLoomError as err:
        return _error(err, way, as_json=as_json, home=home, run_id=transcript.run_id)
    except KeyboardInterrupt:
        return interrupts.report("SIGINT")
    except asyncio.CancelledError:
        if interrupts.signal is None:
            raise
        return interrupts.report(interrupts.signal)
    except BrokenPipeError:  # `show … | head`: the reader has all it wanted
        _output.silence_stdout()
        return 0
    finally:
        app.close()
