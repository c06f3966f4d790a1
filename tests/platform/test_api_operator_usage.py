"""Operators see usage and cost per run (issue 17), through a real server on 127.0.0.1:
the space's run index carries each run's tokens and cost, written with the run's own
commits (listing reads no checkpoint); an admin sees them for a member's run but not its
content, a plain member may not list, a user of another space sees nothing; the remote
CLI's ``runs --space``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from agentloom.cli import main

from .conftest import USAGE, Api, stopped_view

Wait = Callable[..., Any]
SECRET = "Q the merger terms"
PRICED = {"prompt": "You answer questions.",
          "model": {"model": "test-model", "input_price_per_million": 1.0,
                    "output_price_per_million": 2.0}}
# two calls (the action and its review), each with the test model's usage
CALL_COST = (USAGE["prompt_tokens"] * 1.0 + USAGE["completion_tokens"] * 2.0) / 1e6


def _members_run(api: Api, wait: Wait) -> tuple[str, str, Any]:
    """bob (a member) asks the priced agent; returns his session, run and final view."""
    owner = api.client("alice")
    agent = owner.create_agent(api.space_id, "Priced", PRICED).agent
    owner.publish(api.space_id, agent.agent_id)
    bob = api.client("bob")
    session = bob.create_session(api.space_id, agent.agent_id).session_id
    run = bob.ask(session, SECRET)
    view = stopped_view(bob, session, run.run_id, wait)
    assert view.status == "completed", view
    return session, run.run_id, view


def _get(api: Api, user: str, path: str) -> httpx.Response:
    return httpx.get(f"{api.url}/api/v1{path}", timeout=30,
                     headers={"Authorization": f"Bearer {api.tokens[user]}"})


def test_an_operator_sees_each_runs_usage_and_cost_but_not_its_content(
        api: Api, wait: Wait, monkeypatch: pytest.MonkeyPatch) -> None:
    session, run_id, view = _members_run(api, wait)
    assert view.usage.calls == 2 and view.usage.cost == pytest.approx(2 * CALL_COST)

    def no_checkpoints(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the run index is read without the runs' checkpoints")

    checkpoints = api.platform.checkpoints
    for name in ("load_head", "read", "get_blob"):
        monkeypatch.setattr(checkpoints, name, no_checkpoints)

    listed = _get(api, "carol", f"/spaces/{api.space_id}/runs")  # carol: an admin
    assert listed.status_code == 200, listed.text
    [item] = [i for i in listed.json()["items"] if i["run_id"] == run_id]
    assert (item["user_id"], item["status"]) == ("bob", "completed")
    usage = item["usage"]
    assert (usage["calls"], usage["input_tokens"], usage["output_tokens"],
            usage["total_tokens"]) == (2, 20, 10, 30)
    assert usage["cost"] == pytest.approx(2 * CALL_COST)
    assert usage == view.usage.model_dump(mode="json"), "the creator's figures, the same"
    assert set(usage["by_purpose"]) == {"action", "verification"}
    assert SECRET not in listed.text and "Answer to" not in listed.text
    monkeypatch.undo()

    # the content stays the creator's; a member may not list; another space sees nothing
    assert _get(api, "carol", f"/sessions/{session}/runs/{run_id}").status_code == 404
    assert _get(api, "carol", f"/sessions/{session}/messages").status_code == 404
    refused = _get(api, "bob", f"/spaces/{api.space_id}/runs")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "role_required")
    outside = _get(api, "eve", f"/spaces/{api.space_id}/runs")
    assert outside.status_code == 404 and run_id not in outside.text
    blocked = _get(api, "carol", f"/spaces/{api.space_id}/runs?status=blocked")
    assert blocked.status_code == 200 and blocked.json()["items"] == []


def test_the_remote_cli_lists_the_space_runs_with_tokens_and_cost(
        api: Api, wait: Wait, capsys: pytest.CaptureFixture[str]) -> None:
    _, run_id, _ = _members_run(api, wait)
    base = ["--api", api.url, "--token", api.tokens["carol"], "runs", "--space", api.space_id]
    assert main(base) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["RUN", "USER", "AGENT", "STATUS", "CALLS", "TOKENS", "COST",
                                "UPDATED", "ERROR"]
    [row] = [line for line in lines if line.startswith(run_id)]
    assert row.split()[1] == "bob" and row.split()[4:8] == ["completed", "2", "30",
                                                            "0.00004"]
    assert main([*base, "--status", "blocked"]) == 0
    assert capsys.readouterr().out.strip() == "no runs"
    member = ["--api", api.url, "--token", api.tokens["bob"], "runs", "--space", api.space_id]
    assert main(member) == 2
    assert "error (role_required)" in capsys.readouterr().err
