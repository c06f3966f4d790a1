"""Trace figures: the project modules one HTTP ask and one Step Functions step run through.

Run: PYTHONPATH=runtime:functions .venv/bin/python tests/benchmarks/bench_trace.py [--list]
     (prints figures; asserts none; ``--list`` adds each path's modules, sorted, and
     ``--order`` the same in the order they first ran)

The tree measured is the one ``agentloom`` is imported from, and its own ``tests/``
harnesses are used, so the same script measures an older checkout:
``PYTHONPATH=/old/runtime:/old/functions python tests/benchmarks/bench_trace.py``. Each
path runs in a fresh interpreter (this script again, ``--path http|step``), so one path's
imports do not hide the other's.

- **(a) one HTTP ask on ``agentloom serve``'s stack**: the embedded platform with the
  capability set ``serve`` opens with, the real ``ApiServer`` on 127.0.0.1 over
  ``build_app`` (as ``tests/platform/conftest.py`` builds them), a ``FunctionModel`` that
  answers at once (a review says complete). Measured from the POST of the question until
  the run stopped and its driver let go; the question is posted and completion polled
  (reading the store) from the main thread, which is not profiled. Split into the
  request thread (a new thread per connection: ``threading.setprofile``) and the run
  worker (already running: ``sys.setprofile`` is scheduled onto its event loop with
  ``call_soon_threadsafe``); a thread started meanwhile would be shown apart.
- **(b) one Step Functions step of a cold step service** on moto
  (``tests/functional/aws/harness.py``): a bench is opened, the question asked through
  the API platform (its ``StartExecution`` only recorded), then a NEW step service (a cold
  container: nothing attached, nothing cached) handles ``{"run_id", "generation": 1,
  "command": null}``; profiled from ``StepService.handle`` entry to its return, on the
  calling thread (a thread started meanwhile would be shown apart; the fake provider's
  request threads are not profiled). The model is a scripted OpenAI-compatible server
  on 127.0.0.1, reached through the real gateway.

Figures, per thread and for the path:
- **modules run**: distinct project files (``functions/agentloom/**``,
  ``runtime/agentloom_runtime/**``) with a function call on the path (a profiler
  ``call`` event). Code executed while a module is being imported is not counted here
  (it is the next figure); test doubles (``agentloom_runtime/testing/``) are shown apart
  and not counted.
- **crossings**: a call whose nearest project caller on the stack is on the other side
  of functions/ | runtime/. *deepest* is the most side changes along one call stack (a
  reader following one call down crosses that many times); *edges* the distinct
  caller-module → callee-module pairs that cross; *calls* how many such calls ran
  (resumed coroutines re-enter their frames, so this counts resumptions too).
- **imported**: project modules in ``sys.modules`` (test doubles excepted) once the path
  is wired — (a) before the POST, what the embedded platform with ``serve``'s capability
  set, ``build_app`` and ``ApiServer`` loaded; (b) in a fresh interpreter,
  ``agentloom.handlers.step`` and the modules its ``_wire`` imports (a cold container) —
  and those that entered during the path ((b): from opening the new container to the
  step's return; the bench's API platform had loaded what it shares before).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

PROJECT = ("agentloom", "agentloom_runtime")
MARK = "BENCH_TRACE "
ACTIVE = ("queued", "running")


def tree_root() -> Path:
    """The checkout ``agentloom`` would be imported from (nothing is imported)."""
    spec = importlib.util.find_spec("agentloom")
    assert spec is not None and spec.origin is not None, "agentloom is not importable"
    return Path(os.path.realpath(spec.origin)).parents[2]


ROOT = tree_root()
SIDES = {f"{ROOT / 'functions' / 'agentloom'}{os.sep}": "functions",
         f"{ROOT / 'runtime' / 'agentloom_runtime'}{os.sep}": "runtime"}
DOUBLES = f"{ROOT / 'runtime' / 'agentloom_runtime' / 'testing'}{os.sep}"


def project_modules() -> set[str]:
    """Project modules loaded, test doubles (``agentloom_runtime.testing``) excepted."""
    return {name for name in sys.modules if name.split(".")[0] in PROJECT
            and not name.startswith("agentloom_runtime.testing")}


# -- the profiler --------------------------------------------------------------------------


@dataclass
class Lane:
    """What ran on one thread (or a group of threads)."""

    modules: dict[str, None] = field(default_factory=dict)  # first-run order
    edges: set[tuple[str, str]] = field(default_factory=set)
    calls: int = 0
    deepest: list[str] = field(default_factory=list)  # the modules where sides change

    def merge(self, other: Lane) -> None:
        for name in other.modules:
            self.modules.setdefault(name)
        self.edges |= other.edges
        self.calls += other.calls
        if len(other.deepest) > len(self.deepest):
            self.deepest = other.deepest

    def to_json(self) -> dict[str, Any]:
        return {"modules": list(self.modules), "edges": sorted(self.edges),
                "calls": self.calls, "deepest": self.deepest}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Lane:
        return cls(dict.fromkeys(data["modules"]), {(a, b) for a, b in data["edges"]},
                   data["calls"], data["deepest"])


class Tracer:
    """Profile hooks that record project modules and functions/ ↔ runtime/ crossings.

    ``classify`` names the lane of a new thread (None: not profiled); ``hook(lane)`` is
    the hook of a thread already known (the caller's, a worker's)."""

    def __init__(self, classify: Callable[[threading.Thread], str | None]) -> None:
        self.classify = classify
        self.lanes: dict[str, Lane] = {}
        self.threads: list[threading.Thread] = []
        self._sides: dict[str, tuple[str | None, str]] = {}
        self._lock = threading.Lock()

    def side(self, filename: str) -> tuple[str | None, str]:
        found = self._sides.get(filename)
        if found is None:
            real = os.path.realpath(filename) if not filename.startswith("<") else filename
            side = next((s for prefix, s in SIDES.items() if real.startswith(prefix)), None)
            found = (side, os.path.relpath(real, ROOT) if side else "")
            self._sides[filename] = found
        return found

    def lane(self, name: str) -> Lane:
        with self._lock:
            return self.lanes.setdefault(name, Lane())

    def hook(self, name: str) -> Callable[[FrameType, str, Any], None]:
        lane, side_of = self.lane(name), self.side
        importing = 0

        def crossing(frame: FrameType, side: str, module: str) -> None:
            caller = frame.f_back
            while caller is not None:
                caller_side, caller_module = side_of(caller.f_code.co_filename)
                if caller_side is not None:
                    break
                caller = caller.f_back
            if caller is None or caller_side == side:
                return
            lane.calls += 1
            lane.edges.add((caller_module, module))
            chain, current, up = [module, caller_module], caller_side, caller.f_back
            while up is not None:
                up_side, up_module = side_of(up.f_code.co_filename)
                if up_side is not None and up_side != current:
                    chain.append(up_module)
                    current = up_side
                elif up_side is not None:
                    chain[-1] = up_module  # the outermost module of this stretch
                up = up.f_back
            if len(chain) - 1 > len(lane.deepest) - 1:
                lane.deepest = chain[::-1]

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            nonlocal importing
            if event == "call":
                code = frame.f_code
                if code.co_name == "_load_unlocked" and \
                        code.co_filename.startswith("<frozen importlib"):
                    importing += 1
                    return
                if importing:
                    return
                side, module = side_of(code.co_filename)
                if side is None:
                    return
                if module not in lane.modules:
                    lane.modules[module] = None
                crossing(frame, side, module)
            elif event == "return" and importing and frame.f_code.co_name == "_load_unlocked" \
                    and frame.f_code.co_filename.startswith("<frozen importlib"):
                importing -= 1

        return profile

    def for_new_threads(self, frame: FrameType, event: str, arg: Any) -> None:
        """``threading.setprofile``'s hook: picks the thread's lane on its first event."""
        thread = threading.current_thread()
        name = self.classify(thread)
        if name is None:
            sys.setprofile(None)
            return
        with self._lock:
            self.threads.append(thread)
        hook = self.hook(name)
        sys.setprofile(hook)
        hook(frame, event, arg)


def request_thread_of(thread: threading.Thread) -> Any:
    """The server whose request this thread handles (socketserver's ThreadingMixIn
    starts one thread per connection on ``server.process_request_thread``), or None."""
    target = getattr(thread, "_target", None)
    if getattr(target, "__name__", "") == "process_request_thread":
        return getattr(target, "__self__", None)
    return None


# -- (a) one HTTP ask on serve's stack -------------------------------------------------------


def embedded_platform(home: Path, factory: Any) -> Any:
    try:  # the run host's layout
        embedded = importlib.import_module("agentloom.local.embedded")
        defaults = importlib.import_module("agentloom.local.capabilities")
    except ImportError:  # before it (3510b1b)
        embedded = importlib.import_module("agentloom.platform.embedded")
        defaults = importlib.import_module("agentloom.capabilities.defaults")
    return embedded.EmbeddedPlatform.open(home, model_factory=factory,
                                          capabilities=defaults.embedded_capabilities(home))


async def reply(request: Any) -> Any:
    import dataclasses

    from agentloom_runtime.contracts import ModelResponse
    from agentloom_runtime.testing import ScriptedModel

    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    if request.purpose == "verification":
        return dataclasses.replace(ScriptedModel.verdict("complete"), usage=usage)
    if request.purpose == "compaction":
        return ModelResponse(content="Summary.", usage=usage)
    return ModelResponse(content="Answer.", usage=usage)


def post(url: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/json",
                                              "Connection": "close"})
    with urllib.request.urlopen(request, timeout=60) as response:
        out: dict[str, Any] = json.loads(response.read())
        return out


def http_path() -> dict[str, Any]:
    from agentloom.api.app import build_app
    from agentloom.api.server import ApiServer
    from agentloom.platform.identity import Principal
    from agentloom_runtime.testing import FunctionModel

    alice = Principal("alice", "token")
    config = {"prompt": "You answer questions.", "model": {"model": "test-model"}}
    with tempfile.TemporaryDirectory() as tmp:
        platform = embedded_platform(Path(tmp) / "home", lambda snapshot: FunctionModel(reply))
        server = ApiServer(build_app(platform.admin, platform.sessions, platform.tokens),
                           platform.sessions).start()
        try:
            token = platform.tokens.issue("alice")[1]
            space = platform.admin.create_space(alice, "Team")
            agent, _ = platform.admin.create_agent(alice, space.space_id, "Helper", config)
            platform.admin.publish(alice, space.space_id, agent.agent_id)
            session = platform.sessions.create_session(alice, space.space_id, agent.agent_id)
            return measure_ask(platform, server, token, session.session_id)
        finally:
            server.close()
            platform.close()


def measure_ask(platform: Any, server: Any, token: str, session_id: str) -> dict[str, Any]:
    launcher = platform.launcher
    tracer = Tracer(lambda t: "request" if request_thread_of(t) is server else "started meanwhile")
    installed = threading.Event()

    def on_worker(hook: Any) -> None:
        sys.setprofile(hook)
        installed.set()

    launcher._loop.call_soon_threadsafe(on_worker, tracer.hook("worker"))
    installed.wait(10)
    before = project_modules()
    threading.setprofile(tracer.for_new_threads)
    try:
        started = time.perf_counter()
        asked = post(f"{server.url}/api/v1/sessions/{session_id}/runs", token,
                     {"question": "Q What is one plus one?"})
        run_id = asked["run"]["run_id"]
        while True:
            found = platform.store.runs.get(session_id, run_id)
            if found.value.status not in ACTIVE and not launcher.driving(run_id):
                break
            time.sleep(0.005)
        elapsed = time.perf_counter() - started
    finally:
        threading.setprofile(None)
        installed.clear()
        launcher._loop.call_soon_threadsafe(on_worker, None)
        installed.wait(10)
    for thread in tracer.threads:
        thread.join(10)
    return {"status": found.value.status, "seconds": elapsed,
            "lanes": {name: lane.to_json() for name, lane in tracer.lanes.items()},
            "imported": sorted(project_modules() - before), "wired": len(before),
            "wired_by": "by serve's wiring before the POST (the embedded platform with its "
                        "capabilities, build_app, ApiServer)", "span": "the ask"}


# -- (b) one Step Functions step of a cold step service ---------------------------------------


STEP_WIRING = ("agentloom.handlers.step", "agentloom.aws.config", "agentloom.aws.platform",
               "agentloom.aws.sandbox", "agentloom.aws.steps")  # handlers.step._wire's


def step_path() -> dict[str, Any]:
    for name in STEP_WIRING:  # first, in this fresh interpreter: what a cold container loads
        importlib.import_module(name)
    wired = len(project_modules())
    sys.path.insert(0, str(ROOT / "tests"))
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_SESSION_TOKEN", "testing"), ("AWS_DEFAULT_REGION", "us-east-1"),
                        ("AWS_REGION", "us-east-1")):
        os.environ[name] = value
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        os.environ.pop(name, None)
    from functional.aws.harness import ALICE, clients, open_bench, pass_machine
    from moto import mock_aws

    from agentloom_runtime.testing import ScriptedModel
    from agentloom_runtime.testing.openai_server import OpenAICompatibleServer

    script = [ScriptedModel.answer("Answer."), ScriptedModel.verdict("complete")]
    with tempfile.TemporaryDirectory() as tmp, OpenAICompatibleServer(script) as model, \
            mock_aws():
        aws = clients()
        bench = open_bench(aws, Path(tmp), model.base_url, state_machine_arn=pass_machine(aws))
        bench.agent({"prompt": "You answer questions.", "model": {"model": "scripted-model"}})
        run, _ = bench.api.sessions.ask(ALICE, bench.session_id, "Q What is one plus one?")
        before = project_modules()
        service = bench.new_step_service()  # a cold container
        payload = {"run_id": run.run_id, "generation": 1, "command": None}
        tracer = Tracer(lambda t: None if request_thread_of(t) is not None else "started meanwhile")
        hook = tracer.hook("step")
        threading.setprofile(tracer.for_new_threads)
        started = time.perf_counter()
        sys.setprofile(hook)
        try:
            out = service.handle(payload)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
        elapsed = time.perf_counter() - started
        result = {"status": f"{out['next']} / {out['status']}", "seconds": elapsed,
                  "lanes": {name: lane.to_json() for name, lane in tracer.lanes.items()},
                  "imported": sorted(project_modules() - before), "wired": wired,
                  "wired_by": "by the step function's wiring (a fresh interpreter importing "
                              "handlers.step and the modules its _wire imports)",
                  "span": "the new container's opening and its first step (the API "
                          "platform of the bench had loaded its share before)"}
        service.close()
        return result


# -- the report ---------------------------------------------------------------------------------


def measure(path: str) -> dict[str, Any]:
    env = dict(os.environ)
    done = subprocess.run([sys.executable, __file__, "--path", path], capture_output=True,
                          text=True, env=env, check=False, timeout=900)
    for line in done.stdout.splitlines():
        if line.startswith(MARK):
            result: dict[str, Any] = json.loads(line[len(MARK):])
            return result
    raise SystemExit(f"the {path} path failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}")


def counted(lane: Lane, side: str = "") -> list[str]:
    return [m for m in lane.modules if not str(ROOT / m).startswith(DOUBLES)
            and m.startswith(side)]


def report(title: str, result: dict[str, Any], *, listing: str | None) -> None:
    lanes = {name: Lane.from_json(data) for name, data in result["lanes"].items()}
    whole = Lane()
    for lane in lanes.values():
        whole.merge(lane)
    lanes["the path (all threads)"] = whole
    print(f"{title}: {result['status']} in {result['seconds']:.2f} s (profiled)")
    print(f"  {'thread':24s} {'modules run':>11s} {'functions':>9s} {'runtime':>7s}  "
          f"crossings: {'deepest':>7s} {'edges':>5s} {'calls':>5s}")
    for name, lane in lanes.items():
        print(f"  {name:24s} {len(counted(lane)):11d} {len(counted(lane, 'functions')):9d} "
              f"{len(counted(lane, 'runtime')):7d}  {'':10s} "
              f"{max(len(lane.deepest) - 1, 0):7d} {len(lane.edges):5d} {lane.calls:5d}")
    doubles = sorted(set(whole.modules) - set(counted(whole)))
    if doubles:
        print(f"  test doubles run (not counted): {', '.join(doubles)}")
    print(f"  deepest stack: {' -> '.join(whole.deepest)}")
    print(f"  project modules imported: {result['wired']} {result['wired_by']}, "
          f"+{len(result['imported'])} during {result['span']}")
    if listing is None:
        return
    for name, lane in lanes.items():
        shown = counted(lane) if listing == "order" else sorted(counted(lane))
        print(f"  {name} ({listing}):")
        for module in shown:
            print(f"    {module}")
    print("  crossing edges (caller -> callee):")
    for caller, callee in sorted(whole.edges):
        print(f"    {caller} -> {callee}")
    if result["imported"]:
        print(f"  imported during {result['span']}: {', '.join(result['imported'])}")


def main(argv: list[str]) -> None:
    if "--path" in argv:
        which = argv[argv.index("--path") + 1]
        result = http_path() if which == "http" else step_path()
        print(MARK + json.dumps(result))
        return
    listing = "sorted" if "--list" in argv else "order" if "--order" in argv else None
    print(f"tree: {ROOT}")
    report("(a) one HTTP ask on serve's stack, POST until the run stopped",
           measure("http"), listing=listing)
    report("(b) one Step Functions step, cold step service, handle() entry to return",
           measure("step"), listing=listing)


if __name__ == "__main__":
    main(sys.argv[1:])
