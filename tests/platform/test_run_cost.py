"""Cost per run and per step (issue 10): a version whose model connection has prices;
each model call's cost rides on its record and its ``model.usage`` event; the tracker's
``run_cost`` gives the run's totals (from the head) and each step (from the records),
as the run view is to carry it (``RunCost``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentloom.local.embedded import EmbeddedPlatform
from agentloom.platform.views import RunCost, RunView

from .conftest import ALICE

Wait = Callable[..., Any]
PRICED = {"prompt": "You answer questions.",
          "model": {"model": "test-model", "input_price_per_million": 2.0,
                    "output_price_per_million": 8.0}}
STEP_COST = (10 * 2.0 + 5 * 8.0) / 1e6  # the test model's usage: 10 in, 5 out


def test_cost_per_run_and_per_step(platform: EmbeddedPlatform, wait: Wait) -> None:
    space = platform.admin.create_space(ALICE, "Team")
    agent, _ = platform.admin.create_agent(ALICE, space.space_id, "Priced", PRICED)
    platform.admin.publish(ALICE, space.space_id, agent.agent_id)
    session = platform.sessions.create_session(ALICE, space.space_id, agent.agent_id)
    run, _ = platform.sessions.ask(ALICE, session.session_id, "Q what does it cost?")

    def done() -> RunView | None:
        view = platform.sessions.run(ALICE, session.session_id, run.run_id)
        return view if view.status not in ("queued", "running") else None

    view = wait(done, what="the run")
    assert view.status == "completed"
    cost = platform.sessions.tracker.run_cost(run.run_id)
    assert cost is not None
    purposes = [s.purpose for s in cost.steps]
    assert purposes[0] == "action" and "verification" in purposes
    assert cost.calls == len(cost.steps) == cost.steps_total
    assert all(s.cost == pytest.approx(STEP_COST) and s.total_tokens == 15
               for s in cost.steps)
    assert [s.op_id for s in cost.steps] == [f"m1-{n}" for n in range(1, cost.calls + 1)]
    assert (cost.input_tokens, cost.output_tokens) == (10 * cost.calls, 5 * cost.calls)
    assert cost.cost == pytest.approx(STEP_COST * cost.calls)
    assert RunCost.model_validate(cost.model_dump()) == cost  # JSON-ready for the view
    assert view.cost is not None and view.cost.cost == pytest.approx(cost.cost), \
        "the run view (GET …/runs/{id}) shows the cost per run and per step"

    events = wait(lambda: (page := platform.sessions.events(
        ALICE, session.session_id, run.run_id)).done and page, what="the last event")
    usage = [e.data for e in events.items if e.type == "model.usage"]
    assert usage and all(d["cost"] == pytest.approx(STEP_COST) for d in usage)


def test_without_prices_the_cost_is_none(platform: EmbeddedPlatform, wait: Wait) -> None:
    space = platform.admin.create_space(ALICE, "Team")
    agent, _ = platform.admin.create_agent(ALICE, space.space_id, "Plain",
                                           {"model": {"model": "test-model"}})
    platform.admin.publish(ALICE, space.space_id, agent.agent_id)
    session = platform.sessions.create_session(ALICE, space.space_id, agent.agent_id)
    run, _ = platform.sessions.ask(ALICE, session.session_id, "Q free?")
    wait(lambda: platform.sessions.run(ALICE, session.session_id, run.run_id).status
         == "completed", what="the run")
    cost = platform.sessions.tracker.run_cost(run.run_id)
    assert cost is not None and cost.cost is None and cost.total_tokens == 15 * cost.calls
    assert all(s.cost is None for s in cost.steps)
    assert platform.sessions.tracker.run_cost("no-such-run") is None
