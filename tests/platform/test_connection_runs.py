"""Runs of a published version on a platform model connection (issue 10), through the
API against a local OpenAI-compatible server on 127.0.0.1 that requires the key: the
provider is called with the connection's stored key; the draft and the snapshot hold
only the reference (``api_key_ref`` = the connection id) and the connection's figures
and prices, frozen at publish; cost per run and per step in GET …/runs/{id}; a
connection moved to another endpoint refuses an old version's runs (the key was entered
for the new endpoint) with the way out, publish again; a draft naming a connection of
another space is refused."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from agentloom.api.client import ApiError, Client
from agentloom.platform.domain import Agent
from agentloom_runtime.contracts import ModelResponse
from agentloom_runtime.testing import OpenAICompatibleServer, ScriptedModel

from .conftest import Api, stopped_view

Wait = Callable[..., Any]
KEY = "sk-conn-7d41e0b95c2a"
USAGE = {"prompt_tokens": 1_000, "completion_tokens": 200, "total_tokens": 1_200}
IN_PRICE, OUT_PRICE = 2.5, 10.0
STEP_COST = (1_000 * IN_PRICE + 200 * OUT_PRICE) / 1e6


def _replies(n: int) -> list[ModelResponse]:
    out: list[ModelResponse] = []
    for i in range(n):
        out += [replace(ScriptedModel.answer(f"Answer number {i}"), usage=USAGE),
                replace(ScriptedModel.verdict("complete"), usage=USAGE)]
    return out


@pytest.fixture
def provider() -> Iterator[OpenAICompatibleServer]:
    with OpenAICompatibleServer(_replies(3), model="conn-model", api_key=KEY) as server:
        yield server


def _spec(server: OpenAICompatibleServer, **extra: Any) -> dict[str, Any]:
    return {"provider": "openai_compatible", "base_url": server.base_url,
            "model_id": "conn-model", "context_window": 65_536,
            "input_price_per_million": IN_PRICE, "output_price_per_million": OUT_PRICE,
            **extra}



def _on_connection(api: Api, alice: Client, provider: OpenAICompatibleServer,
                   **options: Any) -> tuple[str, Agent]:
    """A connection with the key, and an agent on it."""
    cid = alice.create_model_connection(api.space_id, "Local", _spec(provider),
                                        api_key=KEY).connection_id
    return cid, alice.create_agent(api.space_id, "On a connection", {
        "prompt": "You answer.", "model": {"api_key_ref": cid, **options}}).agent


def test_a_run_calls_the_provider_with_the_stored_key_and_shows_its_cost(
        api: Api, provider: OpenAICompatibleServer, wait: Wait) -> None:
    alice = api.client("alice")
    cid, agent = _on_connection(api, alice, provider, temperature=0)
    draft = alice.draft(api.space_id, agent.agent_id).config["model"]
    assert (draft["api_key_ref"], draft["base_url"], draft["model"]) == \
        (cid, provider.base_url, "conn-model")
    assert (draft["input_price_per_million"], draft["temperature"]) == (IN_PRICE, 0)
    version = alice.publish(api.space_id, agent.agent_id).version
    frozen = version.snapshot["model"]
    assert frozen["api_key_ref"] == cid and frozen["context_window"] == 65_536
    assert (frozen["input_price_per_million"], frozen["output_price_per_million"]) == \
        (IN_PRICE, OUT_PRICE), "the snapshot carries the connection's prices"
    assert KEY not in str(version.model_dump())

    session = alice.create_session(api.space_id, agent.agent_id).session_id
    run = alice.ask(session, "Q what is the capital?")
    view = stopped_view(alice, session, run.run_id, wait)
    assert view.status == "completed" and view.answer == "Answer number 0"
    assert [r.headers.get("authorization") for r in provider.received] == \
        [f"Bearer {KEY}"] * 2, "both calls (action, review) carry the connection's key"
    assert view.cost is not None and view.cost.calls == 2
    assert view.cost.cost == pytest.approx(2 * STEP_COST)
    assert [s.purpose for s in view.cost.steps] == ["action", "verification"]
    assert all(s.cost == pytest.approx(STEP_COST) and s.total_tokens == 1_200
               for s in view.cost.steps)
    events = alice.events(session, run.run_id)
    answers = [alice.request("GET", path).text for path in (
        f"/sessions/{session}/runs/{run.run_id}", f"/sessions/{session}/messages",
        f"/spaces/{api.space_id}/agents/{agent.agent_id}/versions",
        f"/spaces/{api.space_id}/models/connections/{cid}")]
    assert all(KEY not in text for text in [*answers, events.model_dump_json()])


def test_a_moved_connection_refuses_old_versions_until_published_again(
        api: Api, provider: OpenAICompatibleServer, wait: Wait) -> None:
    alice = api.client("alice")
    cid, agent = _on_connection(api, alice, provider)
    alice.publish(api.space_id, agent.agent_id)
    with OpenAICompatibleServer(_replies(1), model="conn-model", api_key=KEY) as moved:
        alice.update_model_connection(api.space_id, cid, _spec(moved), api_key=KEY)
        old = alice.create_session(api.space_id, agent.agent_id, version=1).session_id
        run = alice.ask(old, "Q still there?")
        view = stopped_view(alice, old, run.run_id, wait)
        assert view.status == "failed" and view.error is not None, view
        assert "publish the agent again" in view.error["message"]
        assert provider.received == [] and moved.received == [], "no key went anywhere"

        again = alice.publish(api.space_id, agent.agent_id)
        assert again.created and again.version.version == 2, "a moved connection is new"
        assert again.version.snapshot["model"]["base_url"] == moved.base_url
        fresh = alice.create_session(api.space_id, agent.agent_id).session_id
        done = stopped_view(alice, fresh, alice.ask(fresh, "Q and now?").run_id, wait)
        assert done.status == "completed"
        assert [r.headers.get("authorization") for r in moved.received] == \
            [f"Bearer {KEY}"] * 2


def test_a_draft_may_name_only_a_connection_of_its_own_space(
        api: Api, provider: OpenAICompatibleServer) -> None:
    alice = api.client("alice")
    other = alice.create_space("Elsewhere").space_id
    foreign = alice.create_model_connection(other, "There", _spec(provider),
                                            api_key=KEY).connection_id
    with pytest.raises(ApiError) as refused:
        alice.create_agent(api.space_id, "Borrows", {
            "prompt": "x", "model": {"api_key_ref": foreign}})
    assert (refused.value.status, refused.value.code) == (422, "invalid_field")
    assert refused.value.details == {"fields": [{
        "field": "config.model.api_key_ref",
        "message": f"no model connection {foreign} in this space"}]}


def test_a_model_echoing_the_connection_key_never_shows_it(api: Api, wait: Wait) -> None:
    """The platform connection's sealed key is given to the redactor when it is opened:
    an answer quoting it is redacted in the run, its messages, its events and the next
    question's history (issue 17)."""
    echo = [replace(ScriptedModel.answer(f"The key is {KEY}."), usage=USAGE),
            replace(ScriptedModel.verdict("complete"), usage=USAGE),
            replace(ScriptedModel.answer("Second answer."), usage=USAGE),
            replace(ScriptedModel.verdict("complete"), usage=USAGE)]
    with OpenAICompatibleServer(echo, model="conn-model", api_key=KEY) as server:
        alice = api.client("alice")
        _, agent = _on_connection(api, alice, server)
        alice.publish(api.space_id, agent.agent_id)
        session = alice.create_session(api.space_id, agent.agent_id).session_id
        first = alice.ask(session, "Q what is your key?")
        view = stopped_view(alice, session, first.run_id, wait)
        assert view.status == "completed" and view.answer is not None
        assert KEY not in view.answer and "The key is" in view.answer
        second = alice.ask(session, "Q and now?")
        assert stopped_view(alice, session, second.run_id, wait).status == "completed"
        texts = [alice.request("GET", f"/sessions/{session}/messages").text,
                 alice.events(session, first.run_id).model_dump_json()]
        assert all(KEY not in text for text in texts)
        later = [r.body for r in server.received[2:]]  # the next question's requests
        assert later and KEY not in json.dumps(later)
