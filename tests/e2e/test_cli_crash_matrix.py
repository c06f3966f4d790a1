"""The SIGKILL crash matrix through the real CLI (issue 9).

A scripted, tool-using conversation on the local OpenAI-compatible server — a
create-only file write, a command with a side effect (it appends a line to ``log.txt``
between two sleeps), a read, the answer and its review — runs in ``agentloom`` processes
that are SIGKILLed at many points: after each transcript line of the reference run,
while each model request of the reference run hangs (no response yet) or trickles (the
response half-read), at two moments of the command, and again during the resumes and
verdicts that follow. After every kill the run is brought to completion the way an
operator would: ``resume``, and when it is blocked on an unknown outcome, ``resolve``
with the verdict the workspace shows (the effect is there: ``--ran``; it is not:
``--run-again`` or ``--did-not-run``; a model request: ``--send-again`` or
``resume --retry-unknown-models``).

Asserted for every scenario: the run completes; the command's side effect happened at
most once (exactly once unless an operator said it did not run), the file was written
once, every tool call has exactly one result; no request the server received breaks
the chat protocol (every tool message answers an open call, no id is used twice); and
the session's stream holds each of the run's records exactly once, seqs 1..n, the run
closed (the records ride in each commit: no kill falls between a commit and them).

The kill points derive from the reference run (its transcript lines and its model
requests), so a new step of the conversation is swept, not skipped. The default run
plays the first and the last scenario of each kind; the sweep job (``pytest -m sweep``)
plays all the others.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from e2e.cli_harness import (
    KEY,
    Live,
    conversation,
    has_bwrap,
    provider_env,
    request_problems,
    run_records,
    session_problems,
    state_dir,
    verdicts,
    wait_until,
    workspace,
    write_agent,
)
from support import sweeps

from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.testing import OpenAICompatibleServer, Raw, ScriptedModel, completion_body

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not has_bwrap(), reason="the command runs in bubblewrap")]

NOTES = "# Notes\nthree words here\n"
COMMAND = "sleep 0.25; echo ran >> log.txt; sleep 0.25; wc -w < notes.md"
CALLS = [("workspace_write", {"path": "notes.md", "content": NOTES, "expected_sha256": ""}),
         ("workspace_command", {"command": COMMAND}),
         ("workspace_read", {"path": "log.txt"})]
ANSWER = "Wrote notes.md and logged the command."
TOOL_LINE = "  tool workspace_command"
WORKERS = 4
MAX_PROCESSES = 8  # per scenario: the run, and what it takes to finish it


# ------------------------------------------------------------------ kill points


@dataclass(frozen=True)
class Kill:
    """When to SIGKILL one process: after its ``line``-th stdout line (+``delay``); while
    its ``hang``-th model request hangs; while the ``trickle``-th request of the scenario
    is half answered (first process only); ``command`` seconds into the command."""

    line: int | None = None
    delay: float = 0.0
    hang: int | None = None
    trickle: int | None = None
    command: float | None = None

    def label(self) -> str:
        for name in ("line", "hang", "trickle", "command"):
            value = getattr(self, name)
            if value is not None:
                return f"{name}={value}" + (f"+{self.delay}" if self.delay else "")
        return "none"


@dataclass
class Scenario:
    kills: list[Kill]  # for the first process, then for the ones that continue the run
    variant: int = 0  # which of two equivalent verdicts to choose

    def label(self) -> str:
        return " then ".join(k.label() for k in self.kills)


@dataclass
class Outcome:
    scenario: Scenario
    processes: list[str] = field(default_factory=list)  # what ran, and how it ended
    killed: int = 0
    during_resume: int = 0
    problems: list[str] = field(default_factory=list)
    reruns: int = 0
    did_not_run: int = 0
    verdicts: list[str] = field(default_factory=list)


class Hang:
    """Makes the server leave one chosen request unanswered (by its number)."""

    def __init__(self) -> None:
        self.number: int | None = None
        self.stopping: threading.Event | None = None

    def step(self, respond: Callable[[ModelRequest], ModelResponse],
             server: Callable[[], OpenAICompatibleServer]) -> Callable[[ModelRequest], Any]:
        def reply(request: ModelRequest) -> ModelResponse:
            srv = server()
            if self.number is not None and len(srv.received) == self.number:
                srv.stopping.wait(30)  # the client is killed meanwhile
            return respond(request)
        return reply


# ------------------------------------------------------------------ one scenario


def _server(scenario: Scenario, hang: Hang) -> OpenAICompatibleServer:
    respond = conversation(CALLS, ANSWER)
    holder: list[OpenAICompatibleServer] = []
    steps: list[Any] = [hang.step(respond, lambda: holder[0])] * 80
    first = scenario.kills[0] if scenario.kills else Kill()
    if first.trickle is not None:
        body = completion_body(ScriptedModel.answer("(never read in full)"),
                               model="scripted-model")
        steps[first.trickle - 1] = Raw(body=body, trickle=0.05)
    server = OpenAICompatibleServer(steps, api_key=KEY)
    holder.append(server)
    return server.start()


def _apply(kill: Kill | None, live: Live, server: OpenAICompatibleServer,
           before: int) -> bool:
    """Wait for the kill point and SIGKILL; False when the process ended first."""
    if kill is None:
        return False
    if kill.line is not None:
        count = kill.line
        reached = live.wait_for(lambda lines: len(lines) >= count, 30)
    elif kill.hang is not None or kill.trickle is not None:
        number = before + kill.hang if kill.hang is not None else int(kill.trickle or 0)
        reached = wait_until(lambda: len(server.received) >= number
                             or live.proc.poll() is not None, 30) \
            and len(server.received) >= number
        time.sleep(0.15)  # the request is in flight (a trickle: partly answered)
    else:
        reached = live.line(TOOL_LINE, 30)
        time.sleep(kill.command or 0.0)
    if not reached or live.proc.poll() is not None:
        return False
    time.sleep(kill.delay)
    live.kill(signal.SIGKILL)
    return True


def _next_command(out: str, home: Path, run_id: str, outcome: Outcome) -> list[str]:
    """What an operator does next, from what the last process printed and what the
    workspace shows."""
    ws = workspace(home, "crash")
    if "■ blocked (model_outcome_unknown)" in out:
        if outcome.scenario.variant % 2:
            return ["resume", run_id, "--retry-unknown-models"]
        return ["resolve", run_id, "--send-again", "--note", "no response was saved"]
    if "■ blocked (tool_outcome_unknown)" in out:
        stop = out[out.index("■ blocked (tool_outcome_unknown): "):].split("\n")[0]
        if stop.split("): ", 1)[1].startswith("command "):
            if (ws / "log.txt").exists():
                return ["resolve", run_id, "--ran", "--note", "log.txt has the line"]
            if outcome.scenario.variant % 2:
                outcome.did_not_run += 1
                return ["resolve", run_id, "--did-not-run", "--note", "no line in log.txt"]
            outcome.reruns += 1
            return ["resolve", run_id, "--run-again", "--note", "no line in log.txt"]
        if (ws / "notes.md").exists():
            return ["resolve", run_id, "--ran", "--note", "notes.md is there"]
        outcome.reruns += 1
        return ["resolve", run_id, "--run-again", "--note", "notes.md is missing"]
    if "■ blocked" in out or "■ failed" in out:
        raise AssertionError(f"unexpected stop:\n{out}")
    return ["resume", run_id]


def _play(scenario: Scenario, agent_dir: Path) -> Outcome:
    outcome = Outcome(scenario)
    hang = Hang()
    server = _server(scenario, hang)
    try:
        with state_dir() as home:
            agent = write_agent(agent_dir, agent_id="crash", base_url=server.base_url)
            command = ["run", "--agent", str(agent), "Write the notes and log the command"]
            run_id = _drive(scenario, outcome, home, server, hang, command)
            _check(outcome, home, run_id, server)
    finally:
        server.stop()
    return outcome


def _drive(scenario: Scenario, outcome: Outcome, home: Path, server: OpenAICompatibleServer,
           hang: Hang, command: list[str]) -> str:
    run_id: str | None = None
    for index in range(MAX_PROCESSES):
        kill = scenario.kills[index] if index < len(scenario.kills) else None
        before = len(server.received)
        hang.number = before + kill.hang if kill and kill.hang is not None else None
        live = Live(home, *command, env=provider_env())
        killed = _apply(kill, live, server, before)
        rc, out, err = live.finish(60)
        hang.number = None
        run_id = run_id or live.run_id
        outcome.processes.append(f"{' '.join(c for c in command if c != run_id)}: "
                                 f"{'killed' if killed else rc}")
        if killed:
            outcome.killed += 1
            outcome.during_resume += index > 0
        elif rc == 0 and "■ completed" in out:  # (a resume after the last commit: the
            assert run_id  # run had already completed, and it says so)
            return run_id
        elif rc == 2 and "sandbox_alive" in err:  # a killed sandbox not yet reaped
            time.sleep(0.2)
            continue  # the same verdict again
        elif rc not in (0, 3):
            raise AssertionError(f"{command} exited {rc}:\n{out}\n{err}")
        assert run_id, out + err
        time.sleep(0.05)  # a sandbox dies with its killed parent
        command = _next_command(out, home, run_id, outcome)
    raise AssertionError(f"not completed after {MAX_PROCESSES} processes: "
                         f"{outcome.processes}")


def _check(outcome: Outcome, home: Path, run_id: str, server: OpenAICompatibleServer) -> None:
    ws = workspace(home, "crash")
    problems = outcome.problems
    lines = (ws / "log.txt").read_text().splitlines() if (ws / "log.txt").exists() else []
    expected = 0 if outcome.did_not_run else 1
    if len(lines) != expected:
        problems.append(f"log.txt has {len(lines)} lines, expected {expected} "
                        f"(re-runs asked: {outcome.reruns})")
    if not (ws / "notes.md").exists() or (ws / "notes.md").read_text() != NOTES:
        problems.append("notes.md is missing or wrong")
    results = [r for r in run_records(home, run_id) if r["kind"] == "tool_result"]
    ids = [r["message"]["tool_call_id"] for r in results]
    if len(results) != len(CALLS) or len(set(ids)) != len(ids):
        problems.append(f"{len(results)} tool results for {len(CALLS)} calls: {ids}")
    writes = [r for r in results if r.get("name") == "workspace_write"]
    if any(r.get("status") != "ok" for r in writes):  # a second create-only write fails
        problems.append(f"the write was refused (ran twice?): {writes}")
    problems += request_problems(server.bodies)
    problems += session_problems(home, run_id)
    if server.unexpected:
        problems.append(f"unexpected requests: {server.unexpected}")
    given = [v["verdict"] for v in verdicts(home, run_id)]
    outcome.verdicts = given
    if given.count("run_again") != outcome.reruns:
        problems.append(f"verdicts {given} do not match the re-runs asked")


# ------------------------------------------------------------------ the matrix


def _reference(tmp_path: Path) -> tuple[int, int]:
    """The conversation without kills: (stdout lines, model requests)."""
    outcome = Outcome(Scenario([]))
    hang = Hang()
    server = _server(outcome.scenario, hang)
    try:
        with state_dir() as home:
            agent = write_agent(tmp_path / "reference", agent_id="crash",
                                base_url=server.base_url)
            live = Live(home, "run", "--agent", str(agent), "Write the notes and log it",
                        env=provider_env())
            rc, out, err = live.finish(60)
            assert rc == 0 and "■ completed" in out, out + err
            run_id = live.run_id
            assert run_id
            _check(outcome, home, run_id, server)
            assert outcome.problems == []
            return len(live.lines), len(server.received)
    finally:
        server.stop()


def _scenarios(lines: int, requests: int) -> list[Scenario]:
    first = [Scenario([Kill(line=n)], n) for n in range(3, lines)]  # after each event
    first += [Scenario([Kill(line=n, delay=0.03)], n) for n in range(4, lines, 4)]
    first += [Scenario([Kill(hang=k)], k) for k in range(1, requests + 1)]
    first += [Scenario([Kill(trickle=k)], k + 1) for k in range(1, requests + 1)]
    first += [Scenario([Kill(command=t)], i) for i, t in enumerate((0.12, 0.4))]
    resumes = [  # killed again while continuing: resumes and verdicts are crash points too
        Scenario([Kill(line=5), Kill(line=3)]),
        Scenario([Kill(line=4), Kill(hang=1)], 1),
        Scenario([Kill(hang=2), Kill(line=2), Kill(hang=1)]),
        Scenario([Kill(command=0.12), Kill(line=3), Kill(command=0.4)], 0),
        Scenario([Kill(command=0.4), Kill(line=2), Kill(line=4)], 1),
        Scenario([Kill(line=6), Kill(command=0.12)], 0),
    ]
    return first + resumes


# The default run plays the first and the last scenario of each kind (after a line, after
# a line and a delay, while a request hangs, while one trickles, during the command, and
# killed again while continuing); the sweep job (pytest -m sweep; tests/support/sweeps.py)
# plays the others.
SAMPLE = 2


def _sample(scenarios: list[Scenario]) -> tuple[list[Scenario], list[Scenario]]:
    kinds: dict[str, list[Scenario]] = {}
    for scenario in scenarios:
        first = scenario.kills[0]
        kind = "again" if len(scenario.kills) > 1 else first.label().split("=")[0]
        kinds.setdefault(kind + ("+delay" if first.delay else ""), []).append(scenario)
    kept: list[Scenario] = []
    rest: list[Scenario] = []
    for group in kinds.values():
        sample, others = sweeps.split(group, SAMPLE)
        kept += sample
        rest += others
    return kept, rest


def test_sigkill_anywhere_then_resume_and_resolve_completes_without_duplicates(
        tmp_path: Path) -> None:
    _matrix(tmp_path, sample=True)


@pytest.mark.sweep
def test_sigkill_at_the_other_points_completes_without_duplicates(tmp_path: Path) -> None:
    _matrix(tmp_path, sample=False)


def _matrix(tmp_path: Path, *, sample: bool) -> None:
    started = time.monotonic()
    lines, requests = _reference(tmp_path)
    every = _scenarios(lines, requests)
    kept, rest = _sample(every)
    scenarios = kept if sample else rest
    with ThreadPoolExecutor(WORKERS) as pool:
        outcomes = list(pool.map(lambda pair: _play(pair[1], tmp_path / f"s{pair[0]}"),
                                 enumerate(scenarios)))
    failures = [f"{o.scenario.label()}: {o.problems} ({o.processes})"
                for o in outcomes if o.problems]
    assert failures == [], "\n".join(failures)
    kills = sum(o.killed for o in outcomes)
    during_resume = sum(o.during_resume for o in outcomes)
    reruns = sum(o.reruns for o in outcomes)
    given = Counter(v for o in outcomes for v in o.verdicts)
    retried = sum("--retry-unknown-models" in p for o in outcomes for p in o.processes)
    elapsed = time.monotonic() - started
    print(f"\ncrash matrix ({'sample' if sample else 'the rest'} of {len(every)}): "
          f"{len(scenarios)} scenarios, {kills} SIGKILLs "
          f"({during_resume} during resumes or verdicts), verdicts {dict(given)}, "
          f"{retried} resumes with --retry-unknown-models, {reruns} explicit re-runs, "
          f"{sum(len(o.processes) for o in outcomes)} CLI processes, {elapsed:.1f} s")
    # The kill points were reached (a process that ends first is not killed): most
    # scenarios kill, and most of those that kill again while continuing do so.
    again = sum(len(o.scenario.kills) > 1 for o in outcomes)
    assert kills >= 3 * len(scenarios) // 4 and during_resume >= 5 * again // 6, \
        (kills, during_resume, len(scenarios), again)
