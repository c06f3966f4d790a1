"""A run of one of ``agentloom serve``'s sessions, asked of the embedded CLI while that
server uses the home (``agentloom.local.served``): ``resume`` and ``resolve`` would drive
it in this process, beside the server that drives its session's runs (with the server's
model connections, event log and workers). They are refused with the API command that
does the same through the server (``next: agentloom --api URL …``); the CLI's own
sessions, reading (``show``, ``runs``, ``sessions``) and ``cancel`` are unaffected.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from agentloom.local import operator
from agentloom.local.served import serving
from agentloom_runtime.errors import ConfigError

from . import _store
from ._commands import Way

if TYPE_CHECKING:
    from agentloom.local.app import LocalApp


def refuse_if_served(app: LocalApp, args: argparse.Namespace, way: Way) -> None:
    """``ConfigError`` (code ``home_served``, ``next``: the API command) when a server
    uses the home and ``args.run_id`` belongs to one of its sessions."""
    server = serving(app.home)
    if server is None:
        return
    from agentloom.local.app import LOCAL_USER

    run = _store.run(app.tracker.store, args.run_id)
    if run is None or run.user_id == LOCAL_USER:
        return  # the CLI's own run: this process drives it, as without a server
    api = Way(way.program, api=server.url) if server.url else None
    command = api.command(*_words(args, run.session_id)) if api is not None else None
    raise ConfigError(
        f"run {args.run_id} belongs to session {run.session_id!r} of {server.describe()}, "
        f"which uses {app.home} and drives that session's runs; {args.command} it through "
        f"the server's API (the token in $AGENTLOOM_TOKEN: `agentloom serve token --user "
        f"{run.user_id}` makes one), or stop the server first",
        details={"code": "home_served", "pid": server.pid, "url": server.url,
                 "next": [command] if command else []})


def _words(args: argparse.Namespace, session: str) -> list[str]:
    """The remote command's words for what was asked (``agentloom --api URL --help``)."""
    words = [args.command, session, args.run_id]
    if args.command == "resume":
        words += ["--retry-unknown-models"] if args.retry_unknown_models else []
        words += ["--confirm-hooks"] if args.confirm_hooks else []
        words += _given(args, ("raise_tokens", "--raise-tokens"),
                        ("raise_cost", "--raise-cost"), ("by", "--by"))
        return words
    if args.verdict is not None:
        words.append(operator.VERDICT_FLAGS[args.verdict])
    words += _given(args, ("output", "--output"), ("output_file", "--output-file"),
                    ("exit_code", "--exit-code"), ("note", "--note"))
    return words + (["--no-continue"] if args.no_continue else [])


def _given(args: argparse.Namespace, *options: tuple[str, str]) -> list[str]:
    words: list[str] = []
    for name, flag in options:
        value = getattr(args, name, None)
        if value not in (None, ""):
            words += [flag, str(value)]
    return words
