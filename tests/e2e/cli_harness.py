"""Builders for tests that drive the real ``agentloom`` CLI in subprocesses: a traversable
state directory, the environment, a process whose transcript is read line by line (to
kill it at a chosen point), agent files pointing at the local OpenAI-compatible server,
and the scripted conversation that server plays."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.testing import ScriptedModel

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "docs" / "examples" / "hello"
KEY = "sk-crash-test"


@contextmanager
def state_dir() -> Iterator[Path]:
    """A state directory others can traverse: as root, commands run as nobody, who must
    reach the workspace (pytest's own temp root is private)."""
    path = Path(tempfile.mkdtemp(prefix="agentloom-cli-"))
    path.chmod(0o711)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DEEPSEEK_API_KEY",
                        "AGENTLOOM_HOME")}
    env.update(extra)
    return env


def argv(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "agentloom.cli", "--home", str(home), *args]


def cli(home: Path, *args: str, env: Mapping[str, str] | None = None,
        stdin: str | None = None, timeout: float = 60,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv(home, *args), capture_output=True, text=True, input=stdin,
                          env=dict(env) if env is not None else cli_env(), timeout=timeout,
                          cwd=cwd)


def foreground() -> None:
    """``preexec_fn``: SIGINT as a shell's foreground job has it. A suite started in the
    background (``.ci/run &``) ignores SIGINT, children inherit that, and Python then
    installs no KeyboardInterrupt handler: the CLI under test would never see Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Live:
    """A CLI process whose stdout is read line by line in a thread."""

    def __init__(self, home: Path, *args: str, env: Mapping[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(argv(home, *args), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, preexec_fn=foreground,
                                     env=dict(env) if env is not None else cli_env())
        self.lines: list[str] = []
        self._errors: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._stderr = threading.Thread(target=self._read_errors, daemon=True)
        self._stderr.start()

    def _read_errors(self) -> None:
        assert self.proc.stderr is not None
        self._errors.append(self.proc.stderr.read())

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, found: Callable[[list[str]], bool], timeout: float = 30) -> bool:
        """True once ``found(lines)``; False if the process ended or time ran out."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not found(self.lines):
                if not self._reader.is_alive() or time.monotonic() > deadline:
                    return found(self.lines)
                self._changed.wait(0.01)
        return True

    def line(self, text: str, timeout: float = 30) -> bool:
        return self.wait_for(lambda lines: any(text in ln for ln in lines), timeout)

    @property
    def run_id(self) -> str | None:
        for ln in self.lines:
            if ln.startswith("▶ run "):
                return ln.split()[2]
        return None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def finish(self, timeout: float = 60) -> tuple[int, str, str]:
        """(returncode, stdout, stderr) once the process has ended."""
        self.proc.wait(timeout)
        self._reader.join(timeout)
        self._stderr.join(timeout)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return self.proc.returncode, "\n".join(self.lines), "".join(self._errors)


def wait_until(check: Callable[[], bool], timeout: float = 30, step: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def workspace(home: Path, agent: str = "hello", session: str = "cli") -> Path:
    return home / "workspaces" / "spaces" / "local" / "agents" / agent / "sessions" / \
        session / "main"


def markers(home: Path) -> list[Path]:
    return sorted(home.glob("workspaces/**/markers/*.json"))


def write_agent(folder: Path, *, agent_id: str = "crash", base_url: str | None = None,
                mode: str = "react", tools: Sequence[str] = ("workspace", "workspace_command"),
                extra: str = "", demo_replies: list[dict[str, Any]] | None = None) -> Path:
    """An agent file (and, with ``demo_replies``, its demo script beside it)."""
    folder.mkdir(parents=True, exist_ok=True)
    model = {"dialect": "openai", "model": "scripted-model", "context_window": 32768,
             "max_output_tokens": 1024, "timeout_seconds": 30}
    if base_url is not None:
        model["base_url"] = base_url
    text = (f"agent_id: {agent_id}\nprompt: Work carefully.\nmodel: {json.dumps(model)}\n"
            f"mode: {mode}\ntools: {json.dumps(list(tools))}\n{extra}")
    path = folder / "agent.yaml"
    path.write_text(text)
    if demo_replies is not None:
        (folder / "demo-script.yaml").write_text(json.dumps({"replies": demo_replies}))
    return path


Call = tuple[str, dict[str, Any]]


def conversation(calls: Sequence[Call], answer: str) -> Callable[[ModelRequest], ModelResponse]:
    """A model keyed on the request alone: the k-th action request (k tool-call messages
    already in it) gets ``calls[k]``, then ``answer``; every review gets ``complete``. Any
    process may send any request again and gets the same reply."""
    def respond(request: ModelRequest) -> ModelResponse:
        messages = request.messages
        first = str(messages[0].get("content") or "") if messages else ""
        if first.startswith("You review"):
            return ScriptedModel.verdict("complete", "the evidence supports it")
        step = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if step < len(calls):
            name, arguments = calls[step]
            return ScriptedModel.call(name, arguments, id=f"call_{step}")
        return ScriptedModel.answer(answer)
    return respond


def request_problems(bodies: Sequence[Any]) -> list[str]:
    """Chat-protocol violations in what the server received: a tool message that answers
    no open call, anything inside an unanswered group, a duplicate tool-call id."""
    from agentloom_runtime.context._protocol import call_ids, protocol_violations

    problems = []
    for number, body in enumerate(bodies, 1):
        messages = body.get("messages") or [] if isinstance(body, dict) else []
        problems += [f"request {number}: {p}"
                     for p in protocol_violations(messages, allow_pending_tail=False)]
        ids = [i for m in messages for i in call_ids(m)]
        if len(ids) != len(set(ids)):
            problems.append(f"request {number}: a tool-call id is used twice: {ids}")
    return problems


def provider_env() -> dict[str, str]:
    """The CLI talks to the agent file's base_url with this key (never on a command line)."""
    return cli_env(OPENAI_API_KEY=KEY)


def has_bwrap() -> bool:
    return shutil.which("bwrap") is not None


def run_records(home: Path, run_id: str) -> list[dict[str, Any]]:
    """The run's main source records, read from its database."""
    from agentloom.local.app import open_checkpoint_store

    store = open_checkpoint_store(home)  # encrypted, as the CLI opens it
    try:
        return [dict(e.body) for e in store.read(run_id, "src:main")]
    finally:
        store.close()


def session_problems(home: Path, run_id: str) -> list[str]:
    """What is wrong with the run's session stream once the run completed: every main
    source record of the run (its own prompt and history copies aside) has exactly one
    session record, the seqs are 1..n, and the run left the stream's open set — written
    in the run's own commits however often its processes were killed."""
    from agentloom.local.app import LocalApp
    from agentloom_runtime.context.history import SKIPPED_KINDS

    app = LocalApp(home)
    try:
        session = app.summary(run_id).labels.get("session", "cli")
        records = app.tracker.store.streams.records(session, limit=200)
        stream = app.tracker.store.streams.head(session)
        sources = [e.seq for e in app.store.read(run_id, "src:main")
                   if e.body.get("kind") not in SKIPPED_KINDS]
    finally:
        app.close()
    problems = []
    mine = [r.src for r in records if r.run_id == run_id and r.src is not None]
    if mine != sources:
        problems.append(f"session records of the run {mine} != its source records "
                        f"{sources}")
    if [r.seq for r in records] != list(range(1, len(records) + 1)):
        problems.append(f"session seqs are not 1..n: {[r.seq for r in records]}")
    if stream is None or run_id in stream.value.open:
        problems.append("the completed run is still open in the session's stream")
    return problems


def verdicts(home: Path, run_id: str) -> list[dict[str, Any]]:
    from agentloom.local.app import open_checkpoint_store

    store = open_checkpoint_store(home)  # encrypted, as the CLI opens it
    try:
        return [dict(e.body) for e in store.read(run_id, "verdicts")]
    finally:
        store.close()
