"""``agentloom``: run agents on this machine (embedded mode), or talk to a deployment.

    agentloom run --agent AGENT.yaml "question"     run an agent, show the transcript
        (--question-file PATH, - for stdin; at most 100,000 characters; --session ID)
    agentloom resume RUN_ID                         continue a stopped or killed run
        [--retry-unknown-models] [--confirm-hooks]  (an ended run: its outcome)
    agentloom resolve RUN_ID                        what is unknown, and the verdicts
                                                    (a killed run: no resume first)
    agentloom resolve RUN_ID --ran | --did-not-run | --run-again
                                                    a tool or command of unknown outcome
    agentloom resolve RUN_ID --send-again | --treat-as-failed
                                                    a model request of unknown outcome
    agentloom cancel RUN_ID [--reason TEXT]         cancel a run, whoever drives it
    agentloom show RUN_ID                           transcript, tokens and cost per step,
                                                    status and way out
    agentloom sessions                              the CLI's sessions
    agentloom runs [--session ID]                   runs: status, tokens, cost
    agentloom session create --agent AGENT.yaml [--session ID] [--title TEXT]
    agentloom serve [--port N] [...]                the HTTP API on 127.0.0.1 (serve --help)
    agentloom --api URL [--token T] COMMAND         a deployment (`--api URL --help`)

``--json`` (before or after the command): one JSON document on stdout instead of the
transcript, for scripts. ``--version`` prints the version.

State lives in ``--home`` or ``$AGENTLOOM_HOME`` (default ``./.agentloom``): the SQLite
checkpoint store and the workspaces. A real model is used when ``OPENAI_API_KEY`` (with
optional ``OPENAI_BASE_URL``) or ``DEEPSEEK_API_KEY`` is set, or with ``--provider``;
otherwise the example's scripted demo model, clearly labelled. Hooks bound in the agent
file run code from the hook packages it lists (``hook_packages:``). The commands printed
for you to type next name the program as you invoked it, with ``--home`` or ``--api`` when
you gave them. Exit status: 0 completed, 3 stopped (the transcript prints the next
command; failed and cancelled are final), 2 an error, 130 / 143 interrupted (SIGINT /
SIGTERM: the run can be resumed). docs/operations.md tells what each stopped state means.

The package: ``_parser`` (the embedded command line), ``_local`` (its commands),
``_remote`` (``--api``), ``_output`` (transcript, ``--json``, tables), ``_commands`` (the
printed command lines), ``_store`` (the platform-store reads). Only what parsing needs
is imported here; the app, the engine and the HTTP client are imported by the commands.
"""

from __future__ import annotations

import argparse
import sys

from ._commands import Way, program
from ._output import LINES, Transcript

__all__ = ["LINES", "Transcript", "main"]


def _serve(args: argparse.Namespace) -> int:
    """``agentloom serve …``: the platform's HTTP API (docs/api.md), the same state dir."""
    from agentloom.api.serve import execute

    return execute(args)


def main(argv: list[str] | None = None) -> int:
    from ._parser import first_look, parser

    words = list(sys.argv[1:] if argv is None else argv)
    given = first_look(words)
    way = Way(program(), home=given.home, api=given.api)
    if given.api:
        from ._remote import main as remote

        return remote(given.rest, given.api, given.token, way)
    args = parser(way.program, __doc__).parse_args(words)
    if args.command == "serve":
        return _serve(args)
    from agentloom.cold_start import paused_collector

    with paused_collector():  # what a local command runs on, ~600 modules, imported once
        from agentloom.local import app  # noqa: F401

        from ._local import main as local
    return local(args, way)
