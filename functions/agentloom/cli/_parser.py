"""The command line of the embedded CLI (``agentloom [--home DIR] COMMAND``), the options
every mode shares (``--json``, ``--version``), and the first look at a command line that
tells the embedded mode from a deployment (``--api URL``).

``serve`` takes exactly the options of ``python -m agentloom.api.serve``: both add them
from ``agentloom.api.serve_options``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentloom.api import serve_options
from agentloom.local import inputs, operator

DEFAULT_HOME = ".agentloom"
# agentloom.platform.domain.RUN_STATES, without importing the platform (the CLI starts fast)
RUN_STATES = ("queued", "running", "blocked", "completed", "failed", "cancelled",
              "interrupted")
JSON_HELP = "print one JSON document on stdout (for scripts) instead of the transcript"


def version_line() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"agentloom {version('agentloom')}"
    except PackageNotFoundError:  # pragma: no cover (run from a tree never installed)
        return "agentloom (version unknown: not installed)"


class _Version(argparse.Action):
    """``--version``: the installed distribution's version, read when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **_: object) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                         nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(version_line())
        parser.exit()


def add_common(p: argparse.ArgumentParser) -> None:
    """The options of both modes' top level."""
    p.add_argument("--version", action=_Version)
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def json_flag() -> argparse.ArgumentParser:
    """``--json`` after a command too (no default: one before the command is kept)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=JSON_HELP)
    return p


@dataclass(frozen=True)
class Given:
    """What the first look found: ``--api``, ``--token``, ``--home`` and the rest."""

    api: str | None
    token: str | None
    home: str | None
    rest: list[str] = field(default_factory=list)


def first_look(argv: Sequence[str]) -> Given:
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--api")
    pre.add_argument("--token")
    pre.add_argument("--home")
    known, rest = pre.parse_known_args(list(argv))
    return Given(known.api, known.token, known.home, rest)


def parser(prog: str = "agentloom", description: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", help="state directory (default: $AGENTLOOM_HOME or "
                                  f"./{DEFAULT_HOME}); only `run` creates it")
    p.add_argument("--api", metavar="URL", help="talk to a deployment instead (agentloom "
                   "serve or AWS); `--api URL --help` for its commands")
    p.add_argument("--token", help="with --api: a bearer token (default $AGENTLOOM_TOKEN)")
    add_common(p)
    sub = p.add_subparsers(dest="command", required=True)
    j = [json_flag()]
    _run_parser(sub, j)
    _resume_parser(sub, j)
    _resolve_parser(sub, j)
    cancel = sub.add_parser("cancel", parents=j, help="cancel a run, whoever drives it "
                            "(its driver stops at its next step)")
    cancel.add_argument("run_id")
    cancel.add_argument("--reason", default="cancelled by the operator")
    show = sub.add_parser("show", parents=j, help="a run's transcript, status, tokens and "
                          "cost per step, and its way out")
    show.add_argument("run_id")
    sub.add_parser("sessions", parents=j, help="the CLI's sessions in this state directory")
    runs = sub.add_parser("runs", parents=j, help="runs with their status, tokens and cost")
    runs.add_argument("--session", help="only this session's runs")
    _create_parsers(sub, j)
    serve = sub.add_parser("serve", help="the HTTP API on 127.0.0.1 (`serve --help`)",
                           description=serve_options.DESCRIPTION)
    serve_options.add_arguments(serve)
    return p


def _run_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                j: list[argparse.ArgumentParser]) -> None:
    run = sub.add_parser("run", parents=j, help="run an agent on a question")
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


def _resume_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                   j: list[argparse.ArgumentParser]) -> None:
    resume = sub.add_parser("resume", parents=j, help="continue a stopped or interrupted "
                            "run (a fresh call and iteration budget)")
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


def _resolve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                    j: list[argparse.ArgumentParser]) -> None:
    r = sub.add_parser(
        "resolve", parents=j, help="record what happened to an operation of unknown outcome",
        description="Without a verdict: show what is unknown and which verdicts apply. "
        "With one: record it (who, when, what) and continue the run.")
    r.add_argument("run_id")
    add_verdicts(r)
    r.add_argument("--by", help="who decides (default: $USER)")
    r.add_argument("--no-continue", action="store_true",
                   help="record the verdict only; continue later with `resume`")
    r.add_argument("--pause", type=float, default=0.0)


def add_verdicts(r: argparse.ArgumentParser) -> None:
    """The verdict flags and what ``--ran`` says it produced (both modes)."""
    verdict = r.add_mutually_exclusive_group()
    for kind, flag in operator.VERDICT_FLAGS.items():
        verdict.add_argument(flag, dest="verdict", action="store_const", const=kind,
                             help=operator.VERDICT_HELP[kind])
    given = r.add_mutually_exclusive_group()
    given.add_argument("--output", metavar="TEXT", help="with --ran: what it produced")
    given.add_argument("--output-file", metavar="PATH",
                       help="with --ran: read what it produced from a file (- for stdin)")
    r.add_argument("--exit-code", type=int, metavar="N",
                   help="with --ran: its exit status (0..255; -1..-64: killed by that signal)")
    r.add_argument("--note", default="", help="why, for the record")


def _create_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                    j: list[argparse.ArgumentParser]) -> None:
    session = sub.add_parser("session", help="create a session bound to an agent file")
    ss = session.add_subparsers(dest="action", required=True)
    create = ss.add_parser("create", parents=j, help="a new session for the agent file's "
                           "agent (its runs share history and the main/ workspace)")
    create.add_argument("--agent", required=True, help="agent YAML file")
    create.add_argument("--session", help="its id (default: a new one)")
    create.add_argument("--title", default="")
    agent = sub.add_parser("agent", help="with --api: create an agent from a file")
    sa = agent.add_subparsers(dest="action", required=True)
    made = sa.add_parser("create", parents=j, help="with --api only: embedded, an agent is "
                         "its file (`run --agent FILE`)")
    made.add_argument("file")


def verdict_output(output: str | None, output_file: str | None) -> str | None:
    """What ``--ran`` says the operation produced, read and checked."""
    if output_file is not None:
        return inputs.read_text(output_file, what="output file", limit=inputs.MAX_OUTPUT_CHARS)
    if output is not None:
        inputs.check_length(output, what="output", limit=inputs.MAX_OUTPUT_CHARS)
    return output


# ------------------------------------------------------------------ --api URL


def remote_parser(prog: str = "agentloom") -> argparse.ArgumentParser:
    """The command line of ``agentloom --api URL`` (``_remote``)."""
    from . import _remote

    p = argparse.ArgumentParser(prog=f"{prog} --api URL", description=_remote.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(p)
    sub = p.add_subparsers(dest="command", required=True)
    j = [json_flag()]
    ask = sub.add_parser("ask", parents=j, help="ask a question in a session (a new run)")
    ask.add_argument("session")
    run = sub.add_parser("run", parents=j, help="the same as ask, with --session")
    run.add_argument("--session", required=True)
    for command in (ask, run):
        command.add_argument("question", nargs="?")
        command.add_argument("--question-file", metavar="PATH",
                             help="read the question from a UTF-8 file (- for stdin)")
        command.add_argument("--idempotency-key", help="a retried ask returns the same run")
        command.add_argument("--no-follow", action="store_true")
    resume = sub.add_parser("resume", parents=j, help="continue a stopped run")
    _run_args(resume)
    resume.add_argument("--retry-unknown-models", action="store_true")
    resume.add_argument("--confirm-hooks", action="store_true")
    resume.add_argument("--raise-tokens", type=int, metavar="N",
                        help="a run blocked by its token budget: the new max_tokens "
                             "(space admins and owners)")
    resume.add_argument("--raise-cost", type=float, metavar="X",
                        help="a run blocked by its cost budget: the new max_cost")
    resume.add_argument("--by", help="kept in the raise's note; the deployment records "
                        "the raise under your identity")
    resume.add_argument("--no-follow", action="store_true")
    resolve = sub.add_parser("resolve", parents=j,
                             help="what is unknown; with a verdict, record it")
    _run_args(resolve)
    add_verdicts(resolve)
    resolve.add_argument("--no-continue", action="store_true",
                         help="record the verdict only; resume later")
    resolve.add_argument("--no-follow", action="store_true")
    cancel = sub.add_parser("cancel", parents=j, help="cancel a run")
    _run_args(cancel)
    cancel.add_argument("--reason", default="")
    _run_args(sub.add_parser("show", parents=j, help="the run: status, way out, answer, "
                             "tokens and cost per step"))
    replay = sub.add_parser("replay", parents=j, help="replay a stopped run from its "
                            "recording (nothing is executed again)")
    _run_args(replay)
    other = replay.add_mutually_exclusive_group()
    other.add_argument("--version", type=int, help="evaluate this published version of "
                       "the agent against the recorded run")
    other.add_argument("--draft", action="store_true", help="evaluate the agent's draft "
                       "(space admins and owners)")
    _reading_parsers(sub, j)
    return p


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("session")
    p.add_argument("run_id")


def _reading_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                     j: list[argparse.ArgumentParser]) -> None:
    messages = sub.add_parser("messages", parents=j, help="the session's records, one per "
                              "line")
    messages.add_argument("session")
    messages.add_argument("--after", type=int, default=0)
    messages.add_argument("--limit", type=int, default=100)
    messages.add_argument("--instance")
    messages.add_argument("--all", action="store_true", help="every page, not one")
    events = sub.add_parser("events", parents=j, help="a run's events, one per line")
    _run_args(events)
    events.add_argument("--after", type=int, default=0)
    events.add_argument("--follow", action="store_true",
                        help="long-poll until the run stopped")
    events.add_argument("--wait", type=float, default=20.0,
                        help="seconds per long poll with --follow (at most 20)")
    sub.add_parser("spaces", parents=j, help="your spaces and your role in each")
    sessions = sub.add_parser("sessions", parents=j, help="your sessions, their runs and "
                              "tokens")
    sessions.add_argument("--space", help="one space (default: all of yours)")
    runs = sub.add_parser("runs", parents=j, help="a session's runs: status, tokens, cost; "
                          "with --space, every run of the space (admins: no content)")
    runs.add_argument("session", nargs="?")
    runs.add_argument("--space", help="the space's run index instead of a session's runs "
                      "(space admins and owners)")
    runs.add_argument("--status", choices=RUN_STATES, help="with --space: only runs in "
                      "this status")
    agent = sub.add_parser("agent", help="create an agent from a file")
    made = agent.add_subparsers(dest="action", required=True).add_parser(
        "create", parents=j, help="an agent from an agent YAML file, published")
    made.add_argument("file")
    made.add_argument("--space")
    made.add_argument("--name", help="default: the file's name field")
    made.add_argument("--draft", action="store_true", help="save the draft, publish nothing")
    session = sub.add_parser("session", help="create or delete a session")
    session_actions = session.add_subparsers(dest="action", required=True)
    new = session_actions.add_parser("create", parents=j,
                                     help="a session with a published agent")
    new.add_argument("--space")
    which = new.add_mutually_exclusive_group(required=True)
    which.add_argument("--agent", metavar="AGENT_ID")
    which.add_argument("--agent-file", metavar="FILE",
                       help="create the agent from this file and publish it first")
    new.add_argument("--version", type=int, help="default: the latest published")
    new.add_argument("--title", default="")
    gone = session_actions.add_parser("delete", parents=j, help="delete a session, its "
                                      "runs and its sandbox resources (owner or admin)")
    gone.add_argument("session")
