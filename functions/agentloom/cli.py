"""``agentloom``: run agents on this machine (embedded mode).

    agentloom run --agent AGENT.yaml "question"     run an agent, show the transcript
        (--question-file PATH, - for stdin; at most 100,000 characters)
    agentloom resume RUN_ID                         continue a stopped or killed run
        [--retry-unknown-models] [--confirm-hooks]  (an ended run: its outcome)
    agentloom resolve RUN_ID                        what is unknown, and the verdicts
                                                    (a killed run: no resume first)
    agentloom resolve RUN_ID --ran | --did-not-run | --run-again
                                                    a tool or command of unknown outcome
    agentloom resolve RUN_ID --send-again | --treat-as-failed
                                                    a model request of unknown outcome
    agentloom cancel RUN_ID [--reason TEXT]         cancel a run, whoever drives it
    agentloom show RUN_ID                           a run's transcript and its way out

State lives in ``$AGENTLOOM_HOME`` (default ``./.agentloom``): the SQLite checkpoint
store and the workspaces. A real model is used when ``OPENAI_API_KEY`` (with optional
``OPENAI_BASE_URL``) or ``DEEPSEEK_API_KEY`` is set, or with ``--provider``; otherwise the
example's scripted demo model, clearly labelled. Hooks bound in the agent file run code
from the hook packages it lists (``hook_packages:``). Exit status: 0 completed, 3 stopped
(the transcript prints the next command; failed and cancelled are final), 2 an error,
130 / 143 interrupted (SIGINT / SIGTERM: the run can be resumed). docs/operations.md
tells what each stopped state means.
"""

from __future__ import annotations

# Only what parsing and the transcript need is imported here (``agentloom --help`` and
# ``import agentloom.cli`` stay fast); the app, the engine, the models and the hook
# machinery are imported by the command functions that use them.
import argparse
import contextlib
import json
import os
import shlex
import sys
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom_runtime.errors import AgentLoomError, ConfigError
from agentloom_runtime.events import Topic

from .local import inputs, operator

if TYPE_CHECKING:
    from agentloom_runtime.contracts import StepResult, Verdict, VerdictKind
    from agentloom_runtime.engine import RunSummary
    from agentloom_runtime.snapshot import AgentSnapshot

    from .local.app import LocalApp

_TEXT_LIMIT = 400
DEFAULT_HOME = ".agentloom"


def _short(text: Any, limit: int = _TEXT_LIMIT) -> str:
    value = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    value = value.replace("\n", " ⏎ ")
    return value if len(value) <= limit else value[:limit] + " …"


class Output:
    """Lines to stdout that go quiet when the reader goes away (``| head``): the run
    goes on, nothing is printed about it."""

    def __init__(self, out: Any = None) -> None:
        self.out = out if out is not None else sys.stdout

    def __call__(self, line: str) -> None:
        if self.out is None:
            return
        try:
            print(line, file=self.out, flush=True)
        except BrokenPipeError:
            self.out = None
            _silence_stdout()


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


class Transcript:
    """Prints engine events as a readable transcript; remembers the current run id (the
    resume command printed on SIGINT / SIGTERM names it)."""

    def __init__(self, out: Any = None, *, prefix: str = "agentloom",
                 resolving: bool = False) -> None:
        self.say = Output(out)
        self.prefix = prefix
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
        render = _LINES.get(topic)
        if render is None:
            return None
        who = "" if d.get("instance", "main") == "main" else f"[{d['instance']}] "
        return who + render(d)

    def _stopped(self, d: Mapping[str, Any]) -> str:
        line = f"■ {d['status']} ({d['code']}): {d['message']}"
        if self.resolving and d.get("way_out") == "resolve":
            return line
        for command in operator.next_commands(self.prefix, str(d["run_id"]),
                                              d.get("way_out"), code=d.get("code")):
            line += f"\n  next: {command}"
        return line


def _result_line(d: Mapping[str, Any]) -> str:
    """Tool results as a person reads them; command results as exit code and output."""
    text = d.get("result")
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        value = text
    if isinstance(value, dict) and "exit_code" in value and "stdout_head" in value:
        out = (value.get("stdout_head") or "") + (value.get("stdout_tail") or "")
        err = (value.get("stderr_head") or "") + (value.get("stderr_tail") or "")
        text = f"exit {value['exit_code']}" + (" (timed out)" if value.get("timed_out") else "")
        text += f" · {_short(out.strip(), 160)}" if out.strip() else ""
        text += f" · stderr: {_short(err.strip(), 120)}" if err.strip() else ""
        return f"  ← {d['name']} [{d['status']}] {text}"
    return f"  ← {d['name']} [{d['status']}] {_short(text, 200)}"


def _model_line(d: Mapping[str, Any]) -> str:
    calls = d.get("tool_calls") or []
    return f"model → {', '.join(calls)}" if calls else f"model: {_short(d.get('content'))}"


_LINES: dict[Topic, Callable[[Mapping[str, Any]], str]] = {
    "run.started": lambda d: f"▶ run {d['run_id']}\n  task: {_short(d['task'])}",
    "run.resumed": lambda d: f"▶ resuming run {d['run_id']} (execution {d['execution']})",
    "run.resolved": lambda d: "✓ verdict "
    f"{operator.VERDICT_FLAGS.get(d['verdict'], d['verdict'])} recorded (by {d['by']})",
    "model.completed": _model_line,
    "tool.started": lambda d: f"  tool {d['name']} {_short(d.get('arguments'), 200)}",
    "tool.completed": _result_line,
    "review.decided": lambda d: f"review: {d['decision']} {_short(d.get('reason'), 200)}",
    "context.compacted": lambda d: "context compacted",
    "subagent.started": lambda d: f"  delegated to {d['instance']} ({d['template']})",
    "run.finished": lambda d: f"■ {d['status']}\n\n{d.get('answer') or ''}",
}


# ------------------------------------------------------------------ arguments


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agentloom", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", help="state directory (default: $AGENTLOOM_HOME or "
                                  f"./{DEFAULT_HOME}); only `run` creates it")
    p.add_argument("--api", metavar="URL", help="talk to a deployment instead (agentloom "
                   "serve or AWS): ask/run, resume, resolve, cancel, messages, events, "
                   "show; `agentloom --api URL --help` for its commands")
    p.add_argument("--token", help="with --api: a bearer token (default $AGENTLOOM_TOKEN)")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run an agent on a question")
    run.add_argument("--agent", required=True, help="agent YAML file")
    run.add_argument("question", nargs="?",
                     help=f"the question (at most {inputs.MAX_QUESTION_CHARS:,} characters)")
    run.add_argument("--question-file", metavar="PATH",
                     help="read the question from a UTF-8 file (- for stdin)")
    run.add_argument("--provider", choices=["openai", "deepseek", "demo"],
                     help="default: from OPENAI_API_KEY / DEEPSEEK_API_KEY, else demo")
    run.add_argument("--model", help="model name for a real provider")
    run.add_argument("--base-url", help="OpenAI-compatible base URL")
    run.add_argument("--demo-script", help="scripted replies for the demo model "
                     "(default: demo-script.yaml beside the agent file)")
    run.add_argument("--session", default="cli", help="session id (workspace scope)")
    run.add_argument("--pause", type=float, default=0.0,
                     help="seconds to wait between steps (to watch, or to interrupt)")
    resume = sub.add_parser("resume", help="continue a stopped or interrupted run "
                            "(a fresh call and iteration budget)")
    resume.add_argument("run_id")
    resume.add_argument("--retry-unknown-models", action="store_true",
                        help="re-send a model request whose response was never saved "
                             "(it may be billed twice)")
    resume.add_argument("--confirm-hooks", action="store_true",
                        help="run again a hook that was interrupted while it ran and is "
                             "not replay-safe (check its effects first)")
    resume.add_argument("--raise-tokens", type=int, metavar="N",
                        help="a run blocked by its token budget: the new max_tokens")
    resume.add_argument("--raise-cost", type=float, metavar="X",
                        help="a run blocked by its cost budget: the new max_cost")
    resume.add_argument("--by", help="who raises the budget (default: $USER)")
    resume.add_argument("--pause", type=float, default=0.0)
    _resolve_parser(sub)
    cancel = sub.add_parser("cancel", help="cancel a run, whoever drives it (its driver "
                            "stops at its next step)")
    cancel.add_argument("run_id")
    cancel.add_argument("--reason", default="cancelled by the operator")
    show = sub.add_parser("show", help="print a run's transcript, status and way out")
    show.add_argument("run_id")
    serve = sub.add_parser("serve", add_help=False,
                           help="the HTTP API on 127.0.0.1 (see `agentloom serve --help`)")
    serve.add_argument("serve_args", nargs=argparse.REMAINDER)
    return p


def _resolve_parser(sub: Any) -> None:
    r = sub.add_parser(
        "resolve", help="record what happened to an operation of unknown outcome",
        description="Without a verdict: show what is unknown and which verdicts apply. "
        "With one: record it (who, when, what) and continue the run.")
    r.add_argument("run_id")
    verdict = r.add_mutually_exclusive_group()
    for kind, flag in operator.VERDICT_FLAGS.items():
        verdict.add_argument(flag, dest="verdict", action="store_const", const=kind,
                             help=operator.VERDICT_HELP[kind])
    given = r.add_mutually_exclusive_group()
    given.add_argument("--output", metavar="TEXT", help="with --ran: what it produced")
    given.add_argument("--output-file", metavar="PATH",
                       help="with --ran: read what it produced from a file (- for stdin)")
    r.add_argument("--exit-code", type=int, metavar="N", help="with --ran: its exit code")
    r.add_argument("--note", default="", help="why, for the record")
    r.add_argument("--by", help="who decides (default: $USER)")
    r.add_argument("--no-continue", action="store_true",
                   help="record the verdict only; continue later with `resume`")
    r.add_argument("--pause", type=float, default=0.0)


def _verdict(args: argparse.Namespace) -> Verdict | None:
    from agentloom_runtime.contracts import Verdict

    kind: VerdictKind | None = args.verdict
    gives_output = args.output is not None or args.output_file is not None \
        or args.exit_code is not None
    if kind != "ran" and gives_output:
        raise ConfigError("--output, --output-file and --exit-code go with --ran",
                          details={"code": "usage"})
    if kind is None:
        return None
    output = args.output
    if args.output_file is not None:
        output = inputs.read_text(args.output_file, what="output file",
                                  limit=inputs.MAX_OUTPUT_CHARS)
    elif output is not None:
        inputs.check_length(output, what="output", limit=inputs.MAX_OUTPUT_CHARS)
    return Verdict(kind=kind, by=args.by or _operator_name(), note=args.note,
                   output=output, exit_code=args.exit_code)


def _operator_name() -> str:
    import getpass

    try:
        return os.environ.get("USER") or getpass.getuser()
    except (OSError, KeyError):
        return "operator"


# ------------------------------------------------------------------ commands


def _exit(result: StepResult | None, say: Output) -> int:
    if result is not None and result.status == "cancelled":  # by another process
        say(f"■ cancelled (run {result.run_id} was cancelled while this process drove it)")
    return 0 if result is None or result.status == "completed" else 3


async def _run(app: LocalApp, args: argparse.Namespace, say: Output) -> int:
    from agentloom_runtime.snapshot import load_agent_file

    from .local.models import choose_model

    question = inputs.question(args.question, args.question_file)  # before anything else
    snapshot = load_agent_file(args.agent)
    app.hooks(snapshot)  # the hook packages load, before a run exists
    choice = choose_model(snapshot, provider=args.provider, model=args.model,
                          base_url=args.base_url, demo_script=args.demo_script,
                          agent_path=Path(args.agent))
    _open_store(app, new=True)
    say(choice.banner)
    result = await app.run(choice.snapshot, choice.gateway, question,
                           session=args.session, pause=args.pause)
    return _exit(result, say)


async def _resume(app: LocalApp, args: argparse.Namespace, say: Output) -> int:
    _open_store(app, new=False)
    summary = app.summary(args.run_id)
    snapshot, gateway, banner = operator.restored(app, args.run_id)
    if summary.way_out == "new_question":  # it ended: say how, resume nothing
        return await _ended(app, summary, snapshot, gateway, args, say)
    say(banner)
    raised = None
    if args.raise_tokens is not None or args.raise_cost is not None:
        from agentloom_runtime.engine import RaiseBudget

        raised = RaiseBudget(by=args.by or os.environ.get("USER") or "operator",
                             max_tokens=args.raise_tokens, max_cost=args.raise_cost)
    return _exit(await app.resume(args.run_id, snapshot, gateway,
                                  retry_unknown_models=args.retry_unknown_models,
                                  confirm_hooks=args.confirm_hooks, pause=args.pause,
                                  raise_budget=raised),
                 say)


async def _ended(app: LocalApp, summary: RunSummary, snapshot: AgentSnapshot, gateway: Any,
                 args: argparse.Namespace, say: Output) -> int:
    """A completed run prints its answer (exit 0); a failed or cancelled one says so and
    names the way out, a new question (exit 3)."""
    outcome, note = None, None
    try:
        outcome = await app.outcome(args.run_id, snapshot, gateway)
    except AgentLoomError as err:  # e.g. its hook package changed since
        note = f"its answer cannot be read here ({err.message}); `{args.prefix} show " \
               f"{args.run_id}` prints its records"
    for line in operator.ended_lines(summary, outcome, prefix=args.prefix, note=note):
        say(line)
    return 0 if summary.status == "completed" else 3


async def _resolve(app: LocalApp, args: argparse.Namespace, say: Output) -> int:
    verdict = _verdict(args)
    _open_store(app, new=False)
    if verdict is None:
        await operator.describe(app, args.run_id, say, prefix=args.prefix)
        return 0
    snapshot, gateway, banner = operator.restored(app, args.run_id)
    say(banner)
    try:
        done = await app.resolve(args.run_id, snapshot, gateway, verdict,
                                 drive_on=not args.no_continue, pause=args.pause)
    except ConfigError as err:
        raise operator.reworded(err, prefix=args.prefix, run_id=args.run_id) from None
    if done.ended is not None:  # the verdict ended it (--treat-as-failed)
        say(f"■ {done.status}" + (f": {done.ended.reason}" if done.ended.reason else ""))
        for command in operator.next_commands(args.prefix, args.run_id, done.way_out):
            say(f"  next: {command}")
        return 0 if done.status == "completed" else 3
    if done.result is None:
        say(f"not continued; continue with `{args.prefix} resume {args.run_id}`")
        return 0
    return _exit(done.result, say)


async def _cancel(app: LocalApp, args: argparse.Namespace, say: Output) -> int:
    _open_store(app, new=False)
    snapshot, gateway, _ = operator.restored(app, args.run_id)
    summary = await app.cancel(args.run_id, snapshot, gateway, reason=args.reason)
    say(f"■ {summary.status}: {args.reason}")
    for command in operator.next_commands(args.prefix, args.run_id, summary.way_out):
        say(f"  next: {command}")
    return 0


async def _show(app: LocalApp, args: argparse.Namespace, say: Output) -> int:
    _open_store(app, new=False)
    await operator.show(app, args.run_id, say, prefix=args.prefix)
    return 0


_COMMANDS: dict[str, Callable[[LocalApp, argparse.Namespace, Output],
                              Coroutine[Any, Any, int]]] = {
    "run": _run, "resume": _resume, "resolve": _resolve, "cancel": _cancel, "show": _show}


def _open_store(app: LocalApp, *, new: bool) -> None:
    """The state directory is checked (and, for ``run``, created) before any use."""
    import sqlite3

    (inputs.check_new_home if new else inputs.check_existing_home)(app.home)
    try:
        app.store  # noqa: B018 - opens (and for a new home creates) the database
    except (OSError, sqlite3.Error) as err:
        raise inputs.storage_error(app.home, err) from None


class _Interrupts:
    """SIGTERM cancels the command like SIGINT does; either way the message names the
    real run id to resume."""

    def __init__(self, transcript: Transcript) -> None:
        self.transcript = transcript
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
        where = (f"continue with `{self.transcript.prefix} resume {run_id}`" if run_id
                 else "no run had started")
        with contextlib.suppress(OSError):
            print(f"\ninterrupted ({name}): {where}", file=sys.stderr, flush=True)
        return 130 if name == "SIGINT" else 143


def _home(args: argparse.Namespace) -> tuple[Path, str]:
    """The state directory, and the command prefix that names it when it is not the
    default (so a printed next command is exact)."""
    default = os.environ.get("AGENTLOOM_HOME") or DEFAULT_HOME
    home = args.home or default
    prefix = "agentloom" if home == default else f"agentloom --home {shlex.quote(home)}"
    return Path(home), prefix


def _error(err: AgentLoomError) -> int:
    code = err.details.get("code") if isinstance(err.details.get("code"), str) else err.code
    with contextlib.suppress(OSError):
        print(f"error ({code}): {err.message}", file=sys.stderr)
    return 2


def _serve(args: argparse.Namespace) -> int:
    """``agentloom serve …``: the platform's HTTP API (docs/api.md), same state dir."""
    from agentloom.api.serve import main as serve_main

    forwarded = list(args.serve_args)
    if args.home and "--home" not in forwarded:
        forwarded = ["--home", args.home, *forwarded]
    return int(serve_main(forwarded) or 0)


def main(argv: list[str] | None = None) -> int:
    from .remote import handled

    remote = handled(argv)
    if remote is not None:
        return remote
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    import asyncio

    from .local.app import LocalApp

    home, args.prefix = _home(args)
    transcript = Transcript(prefix=args.prefix, resolving=args.command == "resolve")
    if args.command in ("resume", "resolve"):
        transcript.run_id = args.run_id
    interrupts = _Interrupts(transcript)
    app = LocalApp(home, emit=transcript)
    try:
        return asyncio.run(interrupts.guard(_COMMANDS[args.command](app, args,
                                                                    transcript.say)))
    except AgentLoomError as err:
        return _error(err)
    except KeyboardInterrupt:
        return interrupts.report("SIGINT")
    except asyncio.CancelledError:
        if interrupts.signal is None:
            raise
        return interrupts.report(interrupts.signal)
    except BrokenPipeError:  # `show … | head`: the reader has all it wanted
        _silence_stdout()
        return 0
    finally:
        app.close()


if __name__ == "__main__":
    sys.exit(main())
