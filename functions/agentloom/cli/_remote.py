"""The CLI against a deployment: ``agentloom --api URL [--token T] COMMAND`` talks to
``agentloom serve`` or the AWS API through the typed client (``agentloom.api.client``).

    agentloom --api URL ask SESSION "question" [--idempotency-key K] [--no-follow]
        (--question-file PATH, - for stdin)
    agentloom --api URL run --session SESSION "question"      (the same as ask)
    agentloom --api URL resume SESSION RUN [--retry-unknown-models] [--confirm-hooks]
        [--raise-tokens N] [--raise-cost X] [--by NAME]
    agentloom --api URL resolve SESSION RUN [--send-again | --ran ... ] [--note TEXT]
    agentloom --api URL cancel SESSION RUN [--reason TEXT]
    agentloom --api URL show SESSION RUN        status, answer, tokens and cost per step
    agentloom --api URL replay SESSION RUN [--version N | --draft]   replay a stopped run
        from its recording: the same records (exit 0), or where another version diverges
        and the diff of the requests (exit 3); nothing is executed again
    agentloom --api URL messages SESSION [--after N] [--limit N] [--instance I] [--all]
    agentloom --api URL events SESSION RUN [--after N] [--follow]   (long-polls)
    agentloom --api URL spaces | sessions [--space S] | runs SESSION
    agentloom --api URL runs --space S [--status S]   the space's runs: user, status,
        tokens, cost (admins and owners; no content)
    agentloom --api URL agent create FILE [--space S] [--name N] [--draft]
    agentloom --api URL session create [--space S] (--agent ID [--version N] |
        --agent-file FILE) [--title TEXT]
    agentloom --api URL session delete SESSION   the session, its runs and its sandbox
        resources (its owner or a space admin; 409 run_active while a run holds it)

The token comes from ``--token`` or ``$AGENTLOOM_TOKEN`` (printed commands leave it out:
export it so they work as typed). ``--space`` may be left out by a member of one space.
``ask``, ``resume`` and ``resolve`` follow the run's events until it stops
(``--no-follow``: print the run id and return). ``--json``: one JSON document on stdout
(a run: the API's run view with the ``next`` commands; a listing: ``{"items": [...]}``).
Exit status: 0 done (a completed run), 3 the run stopped without completing (blocked,
failed, cancelled, interrupted: its way out is printed), 2 an error, printed as
``error (code): message``.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom.local import inputs, operator
from agentloom_runtime.contracts import exit_code_problem
from agentloom_runtime.errors import AgentLoomError, ConfigError

from . import _output
from ._commands import Way
from ._output import Output
from ._parser import remote_parser, verdict_output

if TYPE_CHECKING:  # the client (httpx, pydantic) is imported when --api is used
    from agentloom.api.client import Client
    from agentloom.platform.views import EventItem, RunView
    from agentloom_runtime.contracts import UnknownOperation

TOKEN_ENV = "AGENTLOOM_TOKEN"
STOPPED = 3


@dataclass
class Ctx:
    client: Client
    args: argparse.Namespace
    say: Output
    way: Way
    json: bool

    def done(self, doc: dict[str, Any], code: int = 0) -> int:
        if self.json:
            self.say.document(doc)
        return code


# ------------------------------------------------------------------ a run


def _unknown(view: RunView) -> UnknownOperation | None:
    from agentloom_runtime.contracts import UnknownOperation

    if not view.unknown:
        return None
    return UnknownOperation(**{**view.unknown, "verdicts": tuple(view.unknown["verdicts"])})


def _next(ctx: Ctx, view: RunView) -> list[str]:
    return ctx.way.next_commands(view.run_id, view.way_out, session=view.session_id,
                                 code=view.error.get("code") if view.error else None,
                                 unknown=_unknown(view))


def _doc(ctx: Ctx, view: RunView) -> dict[str, Any]:
    doc = view.model_dump(mode="json")
    if view.error:
        doc["error"] = {**view.error, "message": ctx.way.reword(
            view.error.get("message", ""), session=view.session_id)}
    return {**doc, "next": _next(ctx, view)}


def _event_line(event: EventItem) -> str:
    return f"{event.seq:>4} {event.type} {json.dumps(event.data, ensure_ascii=False)}"


def _error_text(ctx: Ctx, view: RunView) -> str:
    if not view.error:
        return ""
    message = ctx.way.reword(view.error.get("message", ""), session=view.session_id)
    return f" ({view.error.get('code')}: {message})"


def _outcome(ctx: Ctx, view: RunView) -> int:
    code = 0 if view.status in ("completed", "queued", "running") else STOPPED
    if ctx.json:
        return ctx.done(_doc(ctx, view), code)
    if view.status == "completed":
        if view.answer is not None:
            ctx.say(view.answer)
        return 0
    way_out = f"; way out: {view.way_out}" if view.way_out else ""
    ctx.say(f"run {view.run_id} {view.status}{_error_text(ctx, view)}{way_out}")
    if view.unknown:
        ctx.say(f"unknown: {json.dumps(view.unknown, ensure_ascii=False)}")
    for command in _next(ctx, view):
        ctx.say(f"next: {command}")
    return code


def _after_start(ctx: Ctx, session: str, run_id: str, after: int = 0) -> int:
    if ctx.args.no_follow:
        if ctx.json:
            return ctx.done(_doc(ctx, ctx.client.run(session, run_id)))
        ctx.say(f"run {run_id}")
        return 0
    for event in ctx.client.follow(session, run_id, after=after):
        ctx.say(_event_line(event))
    return _outcome(ctx, ctx.client.run(session, run_id))


def _scan(client: Client, session: str, run_id: str) -> int:
    """The run's last event seq (a resume or resolve follows only what comes next)."""
    after = 0
    while True:
        page = client.events(session, run_id, after=after)
        if not page.items:
            return after
        after = page.next_after


def _ask(ctx: Ctx) -> int:
    args = ctx.args
    question = inputs.question(args.question, args.question_file)
    out = ctx.client.ask_full(args.session, question, idempotency_key=args.idempotency_key)
    if not out.created:
        ctx.say(f"(the same ask as before: run {out.run.run_id})")
    return _after_start(ctx, args.session, out.run.run_id)


def _resume(ctx: Ctx) -> int:
    args = ctx.args
    after = _scan(ctx.client, args.session, args.run_id)
    ctx.client.resume(args.session, args.run_id,
                      retry_unknown_models=args.retry_unknown_models,
                      confirm_hooks=args.confirm_hooks, raise_tokens=args.raise_tokens,
                      raise_cost=args.raise_cost, note=f"by {args.by}" if args.by else "")
    return _after_start(ctx, args.session, args.run_id, after)


def _resolve(ctx: Ctx) -> int:
    args, client, way = ctx.args, ctx.client, ctx.way
    if args.verdict is None:
        view = client.run(args.session, args.run_id)
        unknown = _unknown(view)
        if unknown is None:
            commands = _next(ctx, view)
            raise ConfigError(f"run {view.run_id} is {view.status}, not blocked on an "
                              "unknown outcome; nothing to resolve"
                              + (f". Next: `{commands[0].split('   (')[0]}`" if commands
                                 else ""), details={"code": "nothing_to_resolve"})
        for line in operator.unknown_lines(unknown, prefix=way.prefix,
                                           run_id=way.run_ref(args.run_id, args.session)):
            ctx.say(line)
        return ctx.done(_doc(ctx, view))
    if args.verdict != "ran" and (args.output is not None or args.output_file is not None
                                  or args.exit_code is not None):
        raise ConfigError("--output, --output-file and --exit-code go with --ran",
                          details={"code": "usage"})
    if (problem := exit_code_problem(args.exit_code)) is not None:  # before sending
        raise ConfigError(problem, details={"code": "invalid_exit_code"})
    after = _scan(client, args.session, args.run_id)
    client.resolve(args.session, args.run_id, args.verdict, note=args.note,
                   output=verdict_output(args.output, args.output_file),
                   exit_code=args.exit_code, drive_on=not args.no_continue)
    if args.no_continue:
        ctx.say(f"verdict recorded on run {args.run_id}; continue with "
                f"`{way.resume(args.run_id, args.session)}`")
        return ctx.done(_doc(ctx, client.run(args.session, args.run_id))) if ctx.json else 0
    return _after_start(ctx, args.session, args.run_id, after)


def _cancel(ctx: Ctx) -> int:
    view = ctx.client.cancel(ctx.args.session, ctx.args.run_id, ctx.args.reason)
    ctx.say(f"run {view.run_id} {view.status}")
    for command in _next(ctx, view):
        ctx.say(f"  next: {command}")
    return ctx.done(_doc(ctx, view))


def _replay(ctx: Ctx) -> int:
    args = ctx.args
    report = ctx.client.replay(args.session, args.run_id, version=args.version,
                               draft=args.draft)
    with_ = "its own version" if report["version"] == "recorded" else \
        "the draft" if report["version"] == "draft" else f"version {report['version']}"
    records = report["records"]
    at = report["diverged_at"]
    if at is None:
        ctx.say(f"replay of run {args.run_id} (v{report['recorded_version']}) with {with_}: "
                f"{'identical' if report['identical'] else 'different records'} after "
                f"{report['steps']} steps ({report['ended']})")
    else:
        ctx.say(f"replay of run {args.run_id} (v{report['recorded_version']}) with {with_}: "
                f"diverged at step {at['step']} (model call {at['model_call']}): "
                f"{at['message']}")
        for part, diff in at.get("diff", {}).items():
            ctx.say(f"  {part}:")
            for line in (diff if isinstance(diff, str) else json.dumps(diff)).splitlines():
                ctx.say(f"    {line}")
    ctx.say(f"records: {records['recorded']} recorded, {records['replayed']} replayed, "
            f"{'equal' if records['equal'] else 'not equal'}")
    return ctx.done(report, 0 if report["identical"] else 3)


def _show(ctx: Ctx) -> int:
    view = ctx.client.run(ctx.args.session, ctx.args.run_id)
    if ctx.json:
        return ctx.done(_doc(ctx, view))
    say = ctx.say
    say(f"run {view.run_id} · session {view.session_id} · agent {view.agent_id} "
        f"v{view.version} · {_output.when(view.created_at)}")
    say(f"status: {view.status}{_error_text(ctx, view)}"
        + (" (driven)" if view.driven else ""))
    if view.reason:
        say(f"reason: {view.reason}")
    unknown = _unknown(view)
    if unknown is not None:
        for line in operator.unknown_lines(unknown, prefix=ctx.way.prefix,
                                           run_id=ctx.way.run_ref(view.run_id,
                                                                  view.session_id)):
            say(line)
    elif view.note:
        say(view.note)
    for line in _output.cost_lines(view.cost.model_dump(mode="json") if view.cost else None):
        say(line)
    if view.answer is not None:
        say("answer:")
        say(view.answer)
    for command in _next(ctx, view):
        say(f"next: {command}")
    return 0


# ------------------------------------------------------------------ reading and creating


def _messages(ctx: Ctx) -> int:
    args, after, items = ctx.args, ctx.args.after, []
    while True:
        page = ctx.client.messages(args.session, after=after, limit=args.limit,
                                   instance=args.instance)
        for item in page.items:
            items.append(item.model_dump(mode="json"))
            ctx.say(json.dumps(items[-1], ensure_ascii=False))
        after = page.next_after
        if not args.all or not page.items:
            return ctx.done({"items": items, "next_after": after})


def _events(ctx: Ctx) -> int:
    args = ctx.args
    found = ctx.client.follow(args.session, args.run_id, after=args.after, wait=args.wait) \
        if args.follow else ctx.client.events(args.session, args.run_id,
                                              after=args.after).items
    items = []
    for event in found:
        items.append(event.model_dump(mode="json"))
        ctx.say(_event_line(event))
    return ctx.done({"items": items})


def _spaces(ctx: Ctx) -> int:
    found = ctx.client.spaces()
    items = [s.model_dump(mode="json") for s in found]
    rows = [[s.space.space_id, s.space.name, s.role] for s in found]
    for line in _output.table(("SPACE", "NAME", "ROLE"), rows) if rows else ["no spaces"]:
        ctx.say(line)
    return ctx.done({"items": items})


def _space(ctx: Ctx, given: str | None) -> str:
    """``--space``, or the one space the user is a member of."""
    if given:
        return given
    found = [s.space.space_id for s in ctx.client.spaces()]
    if len(found) == 1:
        return found[0]
    raise ConfigError("give --space SPACE_ID (you are a member of "
                      f"{', '.join(found) if found else 'no space'})",
                      details={"code": "space_required"})


def _sessions(ctx: Ctx) -> int:
    client = ctx.client
    spaces = [ctx.args.space] if ctx.args.space else \
        [s.space.space_id for s in client.spaces()]
    items = [_output.session_document(s.model_dump(mode="json"),
                                      [r.model_dump(mode="json")
                                       for r in client.runs(s.session_id)])
             for space in spaces for s in client.sessions(space)]
    for line in _output.session_rows(items):
        ctx.say(line)
    return ctx.done({"items": items})


def _runs(ctx: Ctx) -> int:
    args = ctx.args
    if args.space is not None:
        return _space_runs(ctx, args.space)
    if args.session is None or args.status is not None:
        raise ConfigError("give a SESSION, or --space SPACE_ID [--status S] for the "
                          "space's runs", details={"code": "session_required"})
    session = args.session
    views = [ctx.client.run(session, r.run_id) for r in ctx.client.runs(session)]
    items = [_doc(ctx, v) for v in sorted(views, key=lambda v: (v.created_at, v.run_id))]
    for line in _output.run_rows(items):
        ctx.say(line)
    return ctx.done({"items": items})


def _space_runs(ctx: Ctx, space: str) -> int:
    """The space's run index (admins and owners): status, user, tokens and cost of
    every run, read from the index (no session content)."""
    if ctx.args.session is not None:
        raise ConfigError("give a SESSION or --space, not both",
                          details={"code": "invalid_arguments"})
    found = ctx.client.space_runs(space, status=ctx.args.status)
    items = [r.model_dump(mode="json") for r in found]
    for line in _output.space_run_rows(items):
        ctx.say(line)
    return ctx.done({"items": items})


def agent_config(path: str) -> dict[str, Any]:
    """An agent YAML file as a draft's configuration: without the fields the platform
    sets; relative ``hook_packages`` relative to the file, as ``run --agent`` reads them."""
    import yaml

    from agentloom.platform.agents import PLATFORM_FIELDS

    file = Path(path)
    text = inputs.read_text(path, what="agent file", limit=1_000_000, pipes=False)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{file} is not valid YAML: {err}",
                          details={"code": "invalid_snapshot"}) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: expected a mapping of agent fields",
                          details={"code": "invalid_snapshot"})
    config = {k: v for k, v in data.items() if k not in PLATFORM_FIELDS}
    packages = config.get("hook_packages")
    if isinstance(packages, list):
        base = file.resolve().parent
        config["hook_packages"] = [str(base / str(p)) for p in packages]
    return config


def _create_agent(ctx: Ctx, path: str, space: str, *, name: str | None,
                  publish: bool) -> tuple[dict[str, Any], int | None]:
    config = agent_config(path)
    label = name or str(config.get("name") or Path(path).stem)
    made = ctx.client.create_agent(space, label, config)
    agent = made.agent.model_dump(mode="json")
    if not publish:
        return agent, None
    return agent, ctx.client.publish(space, made.agent.agent_id).version.version


def _agent_create(ctx: Ctx) -> int:
    args = ctx.args
    space = _space(ctx, args.space)
    agent, version = _create_agent(ctx, args.file, space, name=args.name,
                                   publish=not args.draft)
    agent_id = agent["agent_id"]
    ctx.say(f"agent {agent_id} ({agent['name']}) in space {space}"
            + (f", version {version} published" if version else ", draft saved"))
    following = [ctx.way.command("session", "create", "--space", space, "--agent", agent_id)]
    for command in following if version else []:
        ctx.say(f"  next: {command}")
    return ctx.done({"agent": agent, "version": version,
                     "next": following if version else []})


def _session_create(ctx: Ctx) -> int:
    args = ctx.args
    space = _space(ctx, args.space)
    agent_id, version = args.agent, args.version
    if args.agent_file is not None:
        agent, version = _create_agent(ctx, args.agent_file, space, name=None, publish=True)
        agent_id = agent["agent_id"]
        ctx.say(f"agent {agent_id} ({agent['name']}), version {version} published")
    made = ctx.client.create_session(space, agent_id, version, args.title)
    ask = f'{ctx.way.command("ask", made.session_id)} "a question"'
    ctx.say(f"session {made.session_id} (agent {made.agent_id} v{made.version})")
    ctx.say(f"  next: {ask}")
    return ctx.done({**made.model_dump(mode="json"), "next": [ask]})


def _session_delete(ctx: Ctx) -> int:
    ctx.client.delete_session(ctx.args.session)
    ctx.say(f"session {ctx.args.session} deleted")
    return ctx.done({"session_id": ctx.args.session, "deleted": True})


COMMANDS = {"ask": _ask, "run": _ask, "resume": _resume, "resolve": _resolve,
            "cancel": _cancel, "show": _show, "replay": _replay, "messages": _messages,
            "events": _events,
            "spaces": _spaces, "sessions": _sessions, "runs": _runs,
            "agent create": _agent_create, "session create": _session_create,
            "session delete": _session_delete}


def main(argv: Sequence[str], api: str, token: str | None, way: Way) -> int:
    args = remote_parser(way.program).parse_args(list(argv))
    token = token or os.environ.get(TOKEN_ENV) or None
    as_json = bool(args.json)
    import httpx

    from agentloom.api.client import ApiError, Client

    command = COMMANDS[" ".join(filter(None, (args.command, getattr(args, "action", None))))]
    try:
        with Client(api, token) as client:
            return command(Ctx(client, args, Output(quiet=as_json), way, as_json))
    except ApiError as err:
        return _output.error(err.code, way.reword(err.message), as_json=as_json)
    except AgentLoomError as err:
        code = err.details.get("code")
        return _output.error(str(code if isinstance(code, str) else err.code), err.message,
                             as_json=as_json)
    except httpx.HTTPError as err:
        return _output.error("unreachable", f"{api}: {type(err).__name__}: {err}",
                             as_json=as_json)
    except KeyboardInterrupt:
        return _output.error("interrupted", "stopped following; the run goes on (see "
                             "events)", as_json=as_json)
    except BrokenPipeError:
        _output.silence_stdout()
        return 0
