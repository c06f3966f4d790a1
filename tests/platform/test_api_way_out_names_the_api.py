"""An API run's way out names the API, and the model never sees operator instructions:
a run blocked on an unknown model outcome says what happened (no CLI command in its
message), its view lists the HTTP calls that move it on (``next``), the call it names
works as written, and the next question's model request carries the status note
without any command or route."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .conftest import Api, Model

Wait = Callable[..., Any]


def test_a_blocked_api_run_names_the_api_calls_and_the_model_sees_no_instructions(
        api: Api, model: Model, wait: Wait) -> None:
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id).session_id
    run_id = alice.ask(session, "Q hang please").run_id
    wait(lambda: "Q hang please" in model.started, what="the hanging call")
    api.platform.launcher.stop(run_id)  # the worker dies mid-call: the request was sent
    wait(lambda: alice.run(session, run_id).status == "interrupted", what="interrupted")
    model.open()
    view = alice.resume(session, run_id)
    view = wait(lambda: (v := alice.run(session, run_id)).status == "blocked"
                and not v.driven and v,
                what="blocked")
    assert view.way_out == "resolve" and view.error is not None
    assert "agentloom" not in view.error["message"]  # no CLI command: the API has routes
    route = f"/api/v1/sessions/{session}/runs/{run_id}"
    assert view.next == [f"GET {route} (unknown: what is unknown and what the host knows)",
                         f'POST {route}/resolve {{"verdict": "send_again"}}',
                         f'POST {route}/resolve {{"verdict": "treat_as_failed"}}']
    before = len(model.requests)
    next_run = alice.ask(session, "Q next").run_id  # the blocked run is left: its note goes on
    wait(lambda: any(r.purpose == "action" for r in model.requests[before:]),
         what="the next question's request")
    request = next(r for r in model.requests[before:] if r.purpose == "action")
    history = json.dumps(request.messages)
    assert f"Previous run {run_id} ended: blocked" in history
    for instruction in ("agentloom", "/api/v1", "--send-again", "send_again"):
        assert instruction not in history, instruction
    wait(lambda: (v := alice.run(session, next_run)).status == "completed" and not v.driven,
         what="the next question to complete")
    method, path, body = view.next[2].split(" ", 2)  # the call works as written
    resolved = alice.request(method, path.removeprefix("/api/v1"), json=json.loads(body))
    assert resolved.status_code == 200
    assert resolved.json()["run_id"] == run_id
