"""Resume with a raised budget through the API (issue 10): a run blocked on its token
budget (``way_out`` ``raise_budget``) is resumed with ``raise_budget`` and completes;
only space admins and owners may raise (403), each figure must exceed the current one
and the version must set it (422 naming the field); an operator raises a member's run
through the space route; the remote CLI's ``resume --raise-tokens``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentloom.api.client import ApiError, Client
from agentloom.cli import main

from .conftest import Api, stopped_view

Wait = Callable[..., Any]
# the first action call (its estimated input plus 4,096 output tokens) could cross a cap
# of 10 tokens: it is not sent, and the run blocks before any call
LIMITED = {"prompt": "You answer questions.", "model": {"model": "test-model"},
           "limits": {"max_tokens": 10}}


def _agent(api: Api) -> str:
    owner = api.client("alice")
    agent = owner.create_agent(api.space_id, "Limited", LIMITED).agent
    owner.publish(api.space_id, agent.agent_id)
    return agent.agent_id


def _blocked(api: Api, user: str, agent_id: str, wait: Wait) -> tuple[Client, str, str]:
    client = api.client(user)
    session = client.create_session(api.space_id, agent_id).session_id
    run = client.ask(session, "Q how far can I go?")
    view = stopped_view(client, session, run.run_id, wait)
    assert (view.status, view.way_out) == ("blocked", "raise_budget"), view
    assert view.error is not None and view.error["code"] == "budget_exceeded"
    assert view.usage.calls == 0, "the call that could cross the budget is not sent"
    return client, session, run.run_id



def _error(call: Callable[[], Any]) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call()
    return caught.value


def test_a_run_blocked_on_its_token_budget_completes_with_a_raised_budget(
        api: Api, wait: Wait) -> None:
    client, session, run_id = _blocked(api, "alice", _agent(api), wait)

    not_more = _error(lambda: client.resume(session, run_id, raise_tokens=10))
    assert (not_more.status, not_more.code) == (422, "budget_raise_invalid")
    assert not_more.details == {"fields": [{"field": "raise_budget.max_tokens", "message":
                                            "must exceed the current budget (10); got 10"}]}
    no_such = _error(lambda: client.resume(session, run_id, raise_cost=5.0))
    assert (no_such.status, no_such.code) == (422, "budget_raise_invalid")
    assert "sets no max_cost budget" in no_such.message
    bad = _error(lambda: client.request("POST", f"/sessions/{session}/runs/{run_id}/resume",
                                        json={"raise_budget": {"max_tokens": "many"}}))
    assert (bad.status, bad.code) == (422, "invalid_field")
    assert "raise_budget.max_tokens" in bad.message
    assert client.run(session, run_id).status == "blocked", "refused raises change nothing"

    client.resume(session, run_id, raise_tokens=100_000, note="one more review")
    view = stopped_view(client, session, run_id, wait)
    assert view.status == "completed" and view.answer == "Answer to: Q how far can I go?"
    assert view.usage.total_tokens > 10
    assert view.execution == 2  # the same run, a new execution

    again = _error(lambda: client.resume(session, run_id, raise_tokens=500_000))
    assert (again.status, again.code) == (409, "run_ended")


def test_only_admins_and_owners_raise_and_operators_raise_any_run_of_the_space(
        api: Api, wait: Wait) -> None:
    member, session, run_id = _blocked(api, "bob", _agent(api), wait)

    refused = _error(lambda: member.resume(session, run_id, raise_tokens=100_000))
    assert (refused.status, refused.code) == (403, "role_required")
    assert member.run(session, run_id).status == "blocked"
    # the member's own operator route is refused too; outsiders see nothing
    assert _error(lambda: member.operator_resume(api.space_id, run_id,
                                                 raise_tokens=100_000)).status == 403
    assert _error(lambda: api.client("eve").operator_resume(
        api.space_id, run_id, raise_tokens=100_000)).status == 404
    # an admin (carol) cannot see bob's session, but operates on the space's runs
    assert _error(lambda: api.client("carol").resume(session, run_id,
                                                     raise_tokens=100_000)).status == 404
    view = api.client("carol").operator_resume(api.space_id, run_id, raise_tokens=100_000)
    assert view.answer is None and view.unknown is None, "an operator sees no content"
    done = stopped_view(member, session, run_id, wait)
    assert done.status == "completed" and done.answer == "Answer to: Q how far can I go?"


def test_the_remote_cli_resumes_with_a_raised_budget(
        api: Api, wait: Wait, capsys: pytest.CaptureFixture[str]) -> None:
    client, session, run_id = _blocked(api, "alice", _agent(api), wait)
    base = ["--api", api.url, "--token", api.tokens["alice"], "resume", session, run_id]
    assert main([*base, "--raise-tokens", "3"]) == 2
    assert "error (budget_raise_invalid): raise_budget.max_tokens" in capsys.readouterr().err
    assert main([*base, "--raise-tokens", "100000", "--by", "ops"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "Answer to: Q how far can I go?"
    assert client.run(session, run_id).status == "completed"
