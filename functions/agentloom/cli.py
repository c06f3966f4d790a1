"""``agentloom``: run agents on this machine (embedded mode).

    agentloom run --agent AGENT.yaml "question"     run an agent, show the transcript
    agentloom resume RUN_ID                         continue a stopped or killed run
    agentloom show RUN_ID                           print a run's transcript

State lives in ``$AGENTLOOM_HOME`` (default ``./.agentloom``): the SQLite checkpoint
store and the workspaces. A real model is used when ``OPENAI_API_KEY`` (with optional
``OPENAI_BASE_URL``) or ``DEEPSEEK_API_KEY`` is set, or with ``--provider``; otherwise the
example's scripted demo model, clearly labelled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentloom_runtime.errors import AgentLoomError
from agentloom_runtime.snapshot import AgentSnapshot, load_agent_file, parse_snapshot

from .local.app import LocalApp
from .local.models import ModelChoice, choose_model, restore_model

_TEXT_LIMIT = 400


def _short(text: Any, limit: int = _TEXT_LIMIT) -> str:
    value = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    value = value.replace("\n", " ⏎ ")
    return value if len(value) <= limit else value[:limit] + " …"


class Transcript:
    """Prints engine events as a readable transcript."""

    def __init__(self, out: Any = sys.stdout) -> None:
        self.out = out

    def __call__(self, topic: str, data: Mapping[str, Any]) -> None:
        line = self._line(topic, data)
        if line and self.out is not None:
            try:
                print(line, file=self.out, flush=True)
            except BrokenPipeError:  # the reader went away (| head): the run goes on
                self.out = None

    @staticmethod
    def _line(topic: str, d: Mapping[str, Any]) -> str | None:
        if topic == "model.completed" and d.get("purpose") != "action":
            return None  # reviews and summaries show through their own events
        render = _LINES.get(topic)
        if render is None:
            return None
        who = "" if d.get("instance", "main") == "main" else f"[{d['instance']}] "
        return who + render(d)


def _result_line(d: Mapping[str, Any]) -> str:
    """Tool results as a person reads them; command results as exit code and output."""
    text = d.get("result")
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        value = text
    if isinstance(value, dict) and "exit_code" in value:
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


_LINES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "run.started": lambda d: f"▶ run {d['run_id']}\n  task: {_short(d['task'])}",
    "run.resumed": lambda d: f"▶ resuming run {d['run_id']} (execution {d['execution']})",
    "model.completed": _model_line,
    "tool.started": lambda d: f"  tool {d['name']} {_short(d.get('arguments'), 200)}",
    "tool.completed": _result_line,
    "review.decided": lambda d: f"review: {d['decision']} {_short(d.get('reason'), 200)}",
    "context.compacted": lambda d: "context compacted",
    "subagent.started": lambda d: f"  delegated to {d['instance']} ({d['template']})",
    "run.finished": lambda d: f"■ {d['status']}\n\n{d.get('answer') or ''}",
    "run.stopped": lambda d: f"■ {d['status']} ({d['code']}): {d['message']}",
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agentloom", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", default=os.environ.get("AGENTLOOM_HOME", ".agentloom"),
                   help="state directory (default: $AGENTLOOM_HOME or ./.agentloom)")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run an agent on a question")
    run.add_argument("--agent", required=True, help="agent YAML file")
    run.add_argument("question")
    run.add_argument("--provider", choices=["openai", "deepseek", "demo"],
                     help="default: from OPENAI_API_KEY / DEEPSEEK_API_KEY, else demo")
    run.add_argument("--model", help="model name for a real provider")
    run.add_argument("--base-url", help="OpenAI-compatible base URL")
    run.add_argument("--demo-script", help="scripted replies for the demo model "
                     "(default: demo-script.yaml beside the agent file)")
    run.add_argument("--session", default="cli", help="session id (workspace scope)")
    run.add_argument("--pause", type=float, default=0.0,
                     help="seconds to wait between steps (to watch, or to interrupt)")
    resume = sub.add_parser("resume", help="continue a stopped or interrupted run")
    resume.add_argument("run_id")
    resume.add_argument("--retry-unknown-models", action="store_true",
                        help="re-send a model request whose response was never saved "
                             "(it may be billed twice)")
    resume.add_argument("--pause", type=float, default=0.0)
    show = sub.add_parser("show", help="print a run's transcript")
    show.add_argument("run_id")
    return p


async def _run(app: LocalApp, args: argparse.Namespace) -> int:
    snapshot = load_agent_file(args.agent)
    choice = choose_model(snapshot, provider=args.provider, model=args.model,
                          base_url=args.base_url, demo_script=args.demo_script,
                          agent_path=Path(args.agent))
    print(choice.banner, flush=True)
    result = await app.run(choice.snapshot, choice.gateway, args.question,
                           session=args.session, pause=args.pause)
    return 0 if result.status == "completed" else 3


async def _resume(app: LocalApp, args: argparse.Namespace) -> int:
    meta = app.meta(args.run_id)
    snapshot: AgentSnapshot = parse_snapshot(meta["snapshot"])
    choice: ModelChoice = restore_model(snapshot, meta["bindings"]["model"])
    print(choice.banner, flush=True)
    result = await app.resume(args.run_id, snapshot, choice.gateway,
                              retry_unknown_models=args.retry_unknown_models,
                              pause=args.pause)
    return 0 if result.status == "completed" else 3


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    app = LocalApp(Path(args.home), emit=Transcript())
    try:
        if args.command == "run":
            return asyncio.run(_run(app, args))
        if args.command == "resume":
            return asyncio.run(_resume(app, args))
        app.show(args.run_id, sys.stdout)
        return 0
    except AgentLoomError as err:
        print(f"error ({err.code}): {err.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: continue with `agentloom resume RUN_ID`", file=sys.stderr)
        return 130
    finally:
        app.close()


if __name__ == "__main__":
    sys.exit(main())
