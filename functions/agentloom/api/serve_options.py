"""The options of ``agentloom serve``, defined once: ``python -m agentloom.api.serve``
builds its parser from them (``parser``) and the CLI adds the same arguments to its
``serve`` command (``add_arguments``). Importing this module loads only argparse, so
``agentloom --help`` stays fast.

``--home`` (here and on the subcommands) has no default: a value given before ``serve``
on the CLI's command line (``agentloom --home DIR serve``) is kept, not overwritten.
The subcommand is ``args.serve_command`` (None: serve).
"""

from __future__ import annotations

import argparse

DEFAULT_PORT = 8765
HOME_HELP = "state directory (default: $AGENTLOOM_HOME or ./.agentloom)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Every option and subcommand of ``serve``, added to ``p``."""
    p.add_argument("--home", default=argparse.SUPPRESS, help=HOME_HELP)
    p.add_argument("--host", default="127.0.0.1", help="a loopback address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"default {DEFAULT_PORT}; 0 = any free port")
    p.add_argument("--hook-root", action="append", default=[], metavar="DIR",
                   help="a folder whose hook packages agents may bind (repeatable)")
    p.add_argument("--key-env", action="append", default=None, metavar="NAME",
                   help="an environment variable agents may name as their model key "
                        "(repeatable; default OPENAI_API_KEY, DEEPSEEK_API_KEY)")
    p.add_argument("--allow-loopback-tools", action="store_true",
                   help="let MCP servers and embeddings endpoints on 127.0.0.1 be reached "
                        "(local development)")
    p.add_argument("--model-factory", metavar="MODULE:FUNCTION",
                   help="trusted Python building each run's model gateway from its snapshot "
                        "(agentloom.api.demo:echo: a labelled demo model)")
    p.add_argument("--login", metavar="USER",
                   help="print a one-time console login link for USER once serving (a space "
                        "is made for a user who has none)")
    sub = p.add_subparsers(dest="serve_command",
                           metavar="{bootstrap,token,login,openapi,run}")
    boot = sub.add_parser("bootstrap", help="create a space, its owner and a token")
    boot.add_argument("--user", required=True)
    boot.add_argument("--space", default="My space")
    boot.add_argument("--home", dest="sub_home", default=argparse.SUPPRESS, help=HOME_HELP)
    token = sub.add_parser("token", help="create a bearer token for a user")
    token.add_argument("--user", required=True)
    token.add_argument("--label", default="")
    token.add_argument("--ttl-days", type=float, default=None,
                       help="days until it expires, > 0 (default: it does not expire)")
    token.add_argument("--list", action="store_true", help="list the user's tokens")
    token.add_argument("--revoke", metavar="TOKEN_ID", help="revoke one of the user's tokens")
    token.add_argument("--home", dest="sub_home", default=argparse.SUPPRESS, help=HOME_HELP)
    login = sub.add_parser("login", help="a one-time console login link for a user of the "
                                         "running server")
    login.add_argument("--user", required=True)
    login.add_argument("--home", dest="sub_home", default=argparse.SUPPRESS, help=HOME_HELP)
    sub.add_parser("openapi", help="print the OpenAPI document")
    run = sub.add_parser("run", help="serve (the default)")
    run.add_argument("--home", dest="sub_home", default=argparse.SUPPRESS, help=HOME_HELP)


DESCRIPTION = "The AgentLoom HTTP API on this machine (embedded stores, a local run worker)."


def parser(prog: str = "agentloom serve") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    add_arguments(p)
    return p
