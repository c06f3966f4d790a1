"""The session order through the HTTP API: A → B → C → resume A → D on a real server on
127.0.0.1 (the ``api`` fixture), checked on what each run's model requests contained.

A makes one plan update and is then blocked (the provider is down); B and C are asked
and answered while A waits; A is resumed through the API and answers; D is asked last.
The five rules, as docs/contract.md#a-b-c-resume-a-d states them:

1. A, B and C are separate runs; B inherits A's committed history, C inherits A and B.
2. Resuming A continues A's own checkpoint only: B and C never enter A's model input.
3. A's records after the resume are appended at the end of the session stream.
4. D sees B, C and A's late records, each once, in commit order; A's original records
   are not appended twice.
5. D's user turns and main model steps come from the session records (baselines from a
   compliant view; here there is none, so they are 0).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentloom.api.client import Client
from agentloom.platform.domain import Run
from agentloom.platform.views import MessageItem
from agentloom_runtime.context.history import STEP_KINDS, TURN_KINDS
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.errors import ModelStatusError
from agentloom_runtime.testing import ScriptedModel

from .conftest import Api, Model, question_of

Wait = Callable[..., Any]


def _own_calls(request: ModelRequest, question: str) -> int:
    start = max(i for i, m in enumerate(request.messages) if m.get("content") == question)
    return sum(1 for m in request.messages[start:]
               if m.get("role") == "assistant" and m.get("tool_calls"))


@dataclass
class ScenarioModel(Model):
    """Answers ``Q X`` with ``Answer to: Q X``; ``Q A`` first updates its plan, then its
    provider is down (503) until ``a_back``. Every action request is kept per question."""

    a_back: bool = False
    asked: dict[str, list[ModelRequest]] = field(default_factory=dict)

    async def reply(self, request: ModelRequest) -> ModelResponse | str:
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        if request.purpose == "compaction":
            return ModelResponse(content="Summary.")
        question = question_of(request)
        self.asked.setdefault(question, []).append(request)
        if question == "Q A":
            calls = _own_calls(request, question)
            if calls == 0:
                return ScriptedModel.call("update_plan", {"steps": [
                    {"id": "1", "title": "A plan", "status": "completed"}]}, id="a0")
            if not self.a_back:
                raise ModelStatusError("provider down", status=503)
        return f"Answer to: {question}"


@pytest.fixture
def model() -> Iterator[ScenarioModel]:  # the conftest's platform builds runs with it
    m = ScenarioModel()
    yield m
    m.open()


RESUMED = "[Platform note: the messages that follow continue run "


def shape(request: ModelRequest, names: dict[str, str]) -> list[str]:
    """The request's messages after the system prompt, one token each: a question, an
    answer, ``call <plan title>``, ``result``, ``note <run> ...`` for a status record,
    ``resumed <run>`` for the note leading a run's records resumed after later runs' (run
    ids replaced by the run's letter through ``names``)."""
    out: list[str] = []
    for m in request.messages:
        content = str(m.get("content") or "")
        if m.get("role") == "system":
            continue
        if m.get("tool_calls"):
            args = json.loads(m["tool_calls"][0]["function"]["arguments"])
            out.append(f"call {args['steps'][0]['title']}")
        elif m.get("role") == "tool":
            out.append("result")
        elif content.startswith("[Previous run"):
            for run_id, letter in names.items():
                content = content.replace(run_id, letter)
            out.append("note " + content.removeprefix("[Previous run ").split(":")[0])
        elif content.startswith(RESUMED):
            out.append("resumed " + names.get(content.removeprefix(RESUMED).split()[0], "?"))
        else:
            out.append(content)
    return out


def until(client: Client, run: Run, status: str, wait: Wait) -> Any:
    return wait(lambda: (v := client.run(run.session_id, run.run_id)).status == status
                and not v.driven and v, what=f"{run.run_id} {status}")


def test_a_b_c_resume_a_d_through_the_api(api: Api, model: ScenarioModel,
                                          wait: Wait) -> None:
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    sid = session.session_id

    a = alice.ask(sid, "Q A")
    blocked = until(alice, a, "blocked", wait)
    assert blocked.way_out == "resume"
    b = alice.ask(sid, "Q B")
    assert until(alice, b, "completed", wait).answer == "Answer to: Q B"
    c = alice.ask(sid, "Q C")
    assert until(alice, c, "completed", wait).answer == "Answer to: Q C"
    a_before = len(model.asked["Q A"])
    model.a_back = True
    alice.resume(sid, a.run_id)
    assert until(alice, a, "completed", wait).answer == "Answer to: Q A"
    d = alice.ask(sid, "Q D")
    assert until(alice, d, "completed", wait).answer == "Answer to: Q D"

    names = {a.run_id: "A", b.run_id: "B", c.run_id: "C", d.run_id: "D"}
    a_committed = ["Q A", "call A plan", "result"]  # A's records before it was blocked
    a_left = "note A ended"  # the platform's status record of how A was left
    # Rule 1: B inherits A's committed history (its question, its plan call and result)
    # and how A was left; C inherits A and then B.
    assert shape(model.asked["Q B"][0], names) == [*a_committed, a_left, "Q B"]
    assert shape(model.asked["Q C"][0], names) == [
        *a_committed, a_left, "Q B", "Answer to: Q B", "Q C"]
    assert "blocked" in str(model.asked["Q B"][0].messages)

    # Rule 2: the resumed A goes on from its own checkpoint; no request of A (before or
    # after the resume) contains B or C.
    resumed = model.asked["Q A"][a_before:]
    assert resumed, "the resumed A called its model"
    assert shape(resumed[-1], names) == a_committed
    for request in model.asked["Q A"]:
        assert not {"Q B", "Answer to: Q B", "Q C", "Answer to: Q C"} & set(
            shape(request, names)), shape(request, names)

    # Rule 3: the session stream is numbered in commit order: A's late records land
    # after C's under A's run id (A, B, C, A, D), seqs 1..n with no gap.
    records: list[MessageItem] = []
    after = 0
    while page := alice.messages(sid, after=after, limit=3).items:
        records += page
        after = page[-1].seq
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    runs: list[str] = []
    for r in records:
        if not runs or runs[-1] != r.run_id:
            runs.append(r.run_id)
    assert runs == [a.run_id, b.run_id, c.run_id, a.run_id, d.run_id]
    last_c = max(r.seq for r in records if r.run_id == c.run_id)
    assert [r.message.get("content") for r in records if r.run_id == a.run_id
            and r.seq > last_c and r.kind == "assistant"] == ["Answer to: Q A"]

    # Rule 4: D sees A's committed records, B, C and A's late answer, each exactly once
    # and in commit order (the exact sequence); A's original records are not repeated.
    # A went on after the note of how it was left: the stale note is gone, and A's late
    # answer is led by a note naming A (docs/contract.md#context).
    assert shape(model.asked["Q D"][0], names) == [
        *a_committed, "Q B", "Answer to: Q B", "Q C", "Answer to: Q C",
        "resumed A", "Answer to: Q A", "Q D"]

    # Rule 5: D's counters are the totals of the session's main records (D's question
    # and its action answer included), not a count of D's own or of A's local frame;
    # no run compacted, so there is no compliant view and the baselines are 0.
    main = [r for r in records if r.instance == "main"]
    expected = {"user_turns": sum(r.kind in TURN_KINDS for r in main),
                "model_steps": sum(r.kind in STEP_KINDS for r in main),
                "baseline_user_turns": 0, "baseline_model_steps": 0}
    assert expected["user_turns"] == 4  # A, B, C, D asked; a resume is no new turn
    assert expected["model_steps"] == 5  # A's plan call and late answer, B, C, D
    assert counters_of(api, d) == expected


def counters_of(api: Api, run: Run) -> dict[str, int]:
    """The counters in the run's checkpointed main frame (read in process)."""
    platform = api.platform
    snapshot = platform.sessions._snapshot(run.agent_id, run.version)

    async def read() -> dict[str, int]:
        engines: Any = platform.sessions.engines  # LocalEngines in the embedded platform
        engine, _ = engines.engine(run, snapshot, attach=True)
        try:
            return {k: int(v) for k, v in engine.main_view().counters.items()}
        finally:
            await engine.close()

    return asyncio.run(read())
