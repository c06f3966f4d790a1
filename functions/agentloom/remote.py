"""The CLI's remote mode: ``agentloom --api URL [--token T] COMMAND`` talks to a
deployment (``agentloom serve`` or the AWS API) through the typed client.

    agentloom --api URL ask SESSION "question" [--idempotency-key K] [--no-follow]
    agentloom --api URL run --session SESSION "question"      (the same as ask)
    agentloom --api URL resume SESSION RUN [--retry-unknown-models] [--confirm-hooks]
        [--raise-tokens N] [--raise-cost X] [--by NAME]
    agentloom --api URL resolve SESSION RUN [--send-again | --ran ... ] [--note TEXT]
    agentloom --api URL cancel SESSION RUN [--reason TEXT]
    agentloom --api URL messages SESSION [--after N] [--limit N] [--instance I] [--all]
    agentloom --api URL events SESSION RUN [--after N] [--follow]   (long-polls)
    agentloom --api URL show SESSION RUN                          (the run as JSON)

The token comes from ``--token`` or ``$AGENTLOOM_TOKEN``. ``ask``, ``resume`` and
``resolve`` follow the run's events until it stops (``--no-follow``: print the run and
return). Exit status: 0 done (a completed run), 3 the run stopped without completing
(blocked, failed, cancelled, interrupted: its way out is printed), 2 an error, printed
as ``error (code): message``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentloom.local.operator import VERDICT_FLAGS, VERDICT_HELP

if TYPE_CHECKING:  # the client (httpx, pydantic) is imported when --api is used
    from agentloom.api.client import Client
    from agentloom.platform.views import EventItem, RunView

TOKEN_ENV = "AGENTLOOM_TOKEN"
STOPPED = 3


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agentloom --api URL", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    ask = sub.add_parser("ask", help="ask a question in a session (a new run)")
    ask.add_argument("session")
    ask.add_argument("question")
    run = sub.add_parser("run", help="the same as ask, with --session")
    run.add_argument("--session", required=True)
    run.add_argument("question")
    for command in (ask, run):
        command.add_argument("--idempotency-key", help="a retried ask returns the same run")
        command.add_argument("--no-follow", action="store_true")
    resume = sub.add_parser("resume", help="continue a stopped run")
    resume.add_argument("session")
    resume.add_argument("run_id")
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
    resolve = sub.add_parser("resolve", help="what is unknown; with a verdict, record it")
    resolve.add_argument("session")
    resolve.add_argument("run_id")
    verdict = resolve.add_mutually_exclusive_group()
    for kind, flag in VERDICT_FLAGS.items():
        verdict.add_argument(flag, dest="verdict", action="store_const", const=kind,
                             help=VERDICT_HELP[kind])
    resolve.add_argument("--output", help="with --ran: what it produced")
    resolve.add_argument("--exit-code", type=int, help="with --ran: its exit code")
    resolve.add_argument("--note", default="")
    resolve.add_argument("--no-continue", action="store_true",
                         help="record the verdict only; resume later")
    resolve.add_argument("--no-follow", action="store_true")
    cancel = sub.add_parser("cancel", help="cancel a run")
    cancel.add_argument("session")
    cancel.add_argument("run_id")
    cancel.add_argument("--reason", default="")
    messages = sub.add_parser("messages", help="the session's records, one per line")
    messages.add_argument("session")
    messages.add_argument("--after", type=int, default=0)
    messages.add_argument("--limit", type=int, default=100)
    messages.add_argument("--instance")
    messages.add_argument("--all", action="store_true", help="every page, not one")
    events = sub.add_parser("events", help="a run's events, one per line")
    events.add_argument("session")
    events.add_argument("run_id")
    events.add_argument("--after", type=int, default=0)
    events.add_argument("--follow", action="store_true",
                        help="long-poll until the run stopped")
    events.add_argument("--wait", type=float, default=20.0,
                        help="seconds per long poll with --follow (at most 20)")
    show = sub.add_parser("show", help="the run: status, way out, answer, usage (JSON)")
    show.add_argument("session")
    show.add_argument("run_id")
    return p


def _say(line: str) -> None:
    print(line, flush=True)


def _event_line(event: EventItem) -> str:
    return f"{event.seq:>4} {event.type} {json.dumps(event.data, ensure_ascii=False)}"


def _outcome(view: RunView) -> int:
    if view.status == "completed":
        if view.answer is not None:
            _say(view.answer)
        return 0
    way_out = f"; way out: {view.way_out}" if view.way_out else ""
    error = f" ({view.error.get('code')}: {view.error.get('message')})" if view.error else ""
    _say(f"run {view.run_id} {view.status}{error}{way_out}")
    if view.unknown:
        _say(f"unknown: {json.dumps(view.unknown, ensure_ascii=False)}")
    return 0 if view.status in ("queued", "running") else STOPPED


def _follow(client: Client, session: str, run_id: str, *, after: int = 0,
            wait: float = 20.0) -> int:
    for event in client.follow(session, run_id, after=after, wait=wait):
        _say(_event_line(event))
    return _outcome(client.run(session, run_id))


def _after_start(client: Client, args: argparse.Namespace, session: str, run_id: str,
                 after: int = 0) -> int:
    if args.no_follow:
        _say(f"run {run_id}")
        return 0
    return _follow(client, session, run_id, after=after)


def _scan(client: Client, session: str, run_id: str) -> int:
    """The run's last event seq (a resume or resolve follows only what comes next)."""
    after = 0
    while True:
        page = client.events(session, run_id, after=after)
        if not page.items:
            return after
        after = page.next_after


def execute(client: Client, args: argparse.Namespace) -> int:  # noqa: C901
    command = args.command
    if command in ("ask", "run"):
        session = args.session
        out = client.ask_full(session, args.question, idempotency_key=args.idempotency_key)
        if not out.created:
            _say(f"(the same ask as before: run {out.run.run_id})")
        return _after_start(client, args, session, out.run.run_id)
    if command == "resume":
        after = _scan(client, args.session, args.run_id)
        client.resume(args.session, args.run_id,
                      retry_unknown_models=args.retry_unknown_models,
                      confirm_hooks=args.confirm_hooks, raise_tokens=args.raise_tokens,
                      raise_cost=args.raise_cost, note=f"by {args.by}" if args.by else "")
        return _after_start(client, args, args.session, args.run_id, after)
    if command == "resolve":
        if args.verdict is None:
            view = client.run(args.session, args.run_id)
            _say(view.model_dump_json(indent=2, include={"run_id", "status", "way_out",
                                                         "unknown", "pending"}))
            return 0
        after = _scan(client, args.session, args.run_id)
        client.resolve(args.session, args.run_id, args.verdict, note=args.note,
                       output=args.output, exit_code=args.exit_code,
                       drive_on=not args.no_continue)
        if args.no_continue:
            _say(f"verdict recorded on run {args.run_id}; resume it to continue")
            return 0
        return _after_start(client, args, args.session, args.run_id, after)
    if command == "cancel":
        view = client.cancel(args.session, args.run_id, args.reason)
        _say(f"run {view.run_id} {view.status}")
        return 0
    if command == "messages":
        after = args.after
        while True:
            page = client.messages(args.session, after=after, limit=args.limit,
                                   instance=args.instance)
            for item in page.items:
                _say(json.dumps(item.model_dump(mode="json"), ensure_ascii=False))
            if not args.all or not page.items:
                return 0
            after = page.next_after
    if command == "events":
        if args.follow:
            for event in client.follow(args.session, args.run_id, after=args.after,
                                       wait=args.wait):
                _say(_event_line(event))
            return 0
        for event in client.events(args.session, args.run_id, after=args.after).items:
            _say(_event_line(event))
        return 0
    assert command == "show"
    _say(client.run(args.session, args.run_id).model_dump_json(indent=2))
    return 0


def _error(code: str, message: str) -> int:
    with contextlib.suppress(OSError):
        print(f"error ({code}): {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str], api: str, token: str | None = None) -> int:
    args = parser().parse_args(list(argv))
    token = token or os.environ.get(TOKEN_ENV) or None
    import httpx

    from agentloom.api.client import ApiError, Client

    try:
        with Client(api, token) as client:
            return execute(client, args)
    except ApiError as err:
        return _error(err.code, err.message)
    except httpx.HTTPError as err:
        return _error("unreachable", f"{api}: {type(err).__name__}: {err}")
    except KeyboardInterrupt:
        return _error("interrupted", "stopped following; the run goes on (see events)")
    except BrokenPipeError:
        return 0


def handled(argv: Sequence[str] | None) -> int | None:
    """``agentloom --api URL [--token T] …``: the remote mode's exit status, or None
    when the command line names no ``--api`` (the embedded CLI goes on)."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--api")
    pre.add_argument("--token")
    pre.add_argument("--home")
    known, rest = pre.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    if not known.api:
        return None
    return main(rest, known.api, known.token)
