"""``agentloom serve``: the HTTP API on 127.0.0.1 with the embedded stores and a local
worker that drives runs. Also ``python -m agentloom.api.serve``: both parse the options
defined once in ``agentloom.api.serve_options`` and call ``execute``.

    serve [--home DIR] [--host 127.0.0.1] [--port 8765] [--hook-root DIR]...
          [--key-env NAME]... [--allow-loopback-tools] [--model-factory MODULE:FUNCTION]
    serve [...] --login USER                  serve, and print a console login link for USER
    serve login --user NAME [--home DIR]      a one-time console login link (running server)
    serve bootstrap --user NAME [--space NAME] [--home DIR]   a space, its owner, a token
    serve token --user NAME [--label TEXT] [--ttl-days N] [--home DIR]   another token
    serve token --user NAME --list | --revoke TOKEN_ID [--home DIR]   list or revoke
    serve openapi                                             print the OpenAPI document

State lives in ``--home`` (default ``$AGENTLOOM_HOME`` or ``./.agentloom``), the same
directory the CLI uses; a serving process holds the home's ``serve.lock`` (a second
server on it is refused; the CLI names this server's API for the runs it drives:
``agentloom.local.served``). Tokens are printed once and stored as their sha256 only.
Model keys come from the server's environment: an agent's ``model.api_key_ref`` may name
only the variables ``--key-env`` allows (default ``OPENAI_API_KEY``, ``DEEPSEEK_API_KEY``).
``--model-factory`` names trusted Python that builds each run's model gateway from its
snapshot (a scripted model for demos and tests).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentloom.api.app import build_app
from agentloom.api.console_login import ConsoleLogins, login_link
from agentloom.api.serve_options import parser
from agentloom.api.server import ApiServer, check_loopback
from agentloom.local.capabilities import embedded_capabilities
from agentloom.local.embedded import EmbeddedPlatform
from agentloom.local.served import ServerLock, serving
from agentloom.platform.agents import DEFAULT_KEY_REFS, DraftRules
from agentloom.platform.errors import PlatformError
from agentloom.platform.identity import BearerTokens, Principal
from agentloom.platform.launcher import ModelFactory
from agentloom_runtime.errors import AgentLoomError, ConfigError

DEFAULT_HOME = ".agentloom"


def _home(args: argparse.Namespace) -> Path:
    given = getattr(args, "sub_home", None) or getattr(args, "home", None)
    return Path(given or os.environ.get("AGENTLOOM_HOME") or DEFAULT_HOME)


def load_factory(spec: str) -> ModelFactory:
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ConfigError(f"--model-factory: expected MODULE:FUNCTION, not {spec!r}")
    try:
        factory = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"--model-factory {spec}: {err}") from None
    if not callable(factory):
        raise ConfigError(f"--model-factory {spec} is not callable")
    return factory  # type: ignore[no-any-return]


def open_platform(args: argparse.Namespace) -> EmbeddedPlatform:
    rules = DraftRules(
        key_refs=frozenset(args.key_env) if args.key_env is not None else DEFAULT_KEY_REFS,
        hook_roots=tuple(Path(d).resolve() for d in args.hook_root))
    factory = load_factory(args.model_factory) if args.model_factory else None
    home = _home(args)
    tools = embedded_capabilities(home, allow_loopback=bool(getattr(args,
                                                                     "allow_loopback_tools",
                                                                     False)))
    return EmbeddedPlatform.open(home, model_factory=factory, rules=rules, capabilities=tools)


def bootstrap(platform: EmbeddedPlatform, user: str, space_name: str) -> dict[str, Any]:
    who = Principal(user, "token")
    space = platform.admin.create_space(who, space_name)
    token, secret = platform.tokens.issue(user, label="bootstrap")
    return {"user": user, "space_id": space.space_id, "token_id": token.token_id,
            "token": secret}


def console_link(platform: EmbeddedPlatform, url: str, user: str) -> str:
    """A one-time console login link for ``user``; a user in no space gets one of their
    own first, so the console opens on something they can use."""
    who = Principal(user, "token")
    if not platform.admin.spaces(who):
        platform.admin.create_space(who, f"{user}'s space")
    return login_link(platform.tokens, url, user)


def login_command(platform: EmbeddedPlatform, args: argparse.Namespace) -> dict[str, Any]:
    server = serving(_home(args))
    if server is None or not server.url:
        raise ConfigError(f"no server is running on {_home(args)}: start "
                          f"'bin/agentloom serve', or 'bin/agentloom serve --login "
                          f"{args.user}' to serve and print the link at once")
    return {"user": args.user, "login_link": console_link(platform, server.url, args.user),
            "expires_in_seconds": 600}


def token_command(tokens: BearerTokens, args: argparse.Namespace) -> Any:
    """``serve token``: issue a token (printed once), ``--list`` the user's tokens, or
    ``--revoke`` one of them."""
    if args.revoke:
        revoked = tokens.revoke(args.user, args.revoke)
        return {"user": args.user, "token_id": revoked.token_id, "revoked": True}
    if args.list:
        return [t.model_dump(mode="json", exclude={"secret_sha256", "format"})
                for t in tokens.tokens(args.user)]
    days = args.ttl_days
    if days is not None and not (math.isfinite(days) and days > 0):
        raise ConfigError(f"--ttl-days must be a positive number of days, not {days:g}; "
                          f"omit it for a token that does not expire (revoke it with "
                          f"--revoke TOKEN_ID)")
    token, secret = tokens.issue(args.user, label=args.label,
                                 ttl_seconds=None if days is None else days * 86400)
    return {"user": args.user, "token_id": token.token_id, "token": secret,
            "expires_at": token.expires_at}


def serve(args: argparse.Namespace, *, ready: threading.Event | None = None) -> int:
    check_loopback(args.host)
    lock = ServerLock.acquire(_home(args))  # one server per home
    try:
        return _serve(args, lock, ready)
    finally:
        lock.release()


def _serve(args: argparse.Namespace, lock: ServerLock,
           ready: threading.Event | None) -> int:
    platform = open_platform(args)
    try:
        recovered = platform.sessions.recover()
        platform.sessions.teardown.sweep()  # deletes a crash left unfinished
        app = build_app(platform.admin, platform.sessions, platform.tokens)
        server = ApiServer(app, platform.sessions, host=args.host, port=args.port,
                           logins=ConsoleLogins(platform.tokens))
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            if threading.current_thread() is threading.main_thread():
                signal.signal(sig, lambda *_: stop.set())
        server.start()
        lock.announce(server.url)  # the CLI names it (agentloom.local.served)
        print(f"agentloom serve: {server.url}/api/v1 (state in {platform.home}; "
              f"{recovered} interrupted run(s) found)", flush=True)
        print(f"console: {server.url}/ (a login link: bin/agentloom serve login --user NAME)",
              flush=True)
        if getattr(args, "login", None):
            print(f"console login link for {args.login} (one use, 10 minutes): "
                  f"{console_link(platform, server.url, args.login)}", flush=True)
        if ready is not None:
            ready.set()
        stop.wait()
        server.close()
        return 0
    finally:
        platform.close()


def execute(args: argparse.Namespace) -> int:
    """Serve, or run the subcommand ``args.serve_command``, with arguments parsed by
    ``serve_options`` (``main`` here, or the CLI's ``serve`` command)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    command = getattr(args, "serve_command", None)
    try:
        if command == "openapi":
            from agentloom.api.openapi import render

            sys.stdout.write(render())
            return 0
        if command in ("bootstrap", "token", "login"):
            platform = open_platform(args)
            try:
                if command == "bootstrap":
                    out = bootstrap(platform, args.user, args.space)
                elif command == "login":
                    out = login_command(platform, args)
                else:
                    out = token_command(platform.tokens, args)
            finally:
                platform.close()
            print(json.dumps(out, indent=2))
            return 0
        return serve(args)
    except (AgentLoomError, PlatformError) as err:
        print(f"agentloom serve: {err.message}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    return execute(parser().parse_args(list(argv) if argv is not None else None))


if __name__ == "__main__":
    raise SystemExit(main())
