"""Runs through the HTTP API on a real server on 127.0.0.1 (the same resolver as the
Lambda; the embedded worker; a FunctionModel): ask → follow the events → the completed
answer with usage; the messages page; 50 simultaneous asks on one session make exactly
one run; one Idempotency-Key retried makes one run; a blocked run resolved through the
API; SSE."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from agentloom.api.client import ApiError

from .conftest import Api, Model

Wait = Callable[..., Any]


def test_ask_follow_events_and_read_the_answer(api: Api) -> None:
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    asked = alice.ask_full(session.session_id, "Q what is up?")
    assert asked.created and asked.run.status == "queued"
    run_id = asked.run.run_id
    events = list(alice.follow(session.session_id, run_id, wait=5))
    types = [e.type for e in events]
    assert types[0] == "run.started" and "model.usage" in types and types[-1] == "run.status"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    view = alice.run(session.session_id, run_id)
    assert view.status == "completed" and view.answer == "Answer to: Q what is up?"
    assert view.usage.calls == view.usage.by_purpose["action"]["calls"] + \
        view.usage.by_purpose.get("verification", {}).get("calls", 0)
    assert view.usage.output_tokens == 5 * view.usage.calls
    page = alice.messages(session.session_id, limit=1)
    assert len(page.items) == 1 and page.items[0].kind == "user"
    rest = alice.messages(session.session_id, after=page.next_after)
    assert rest.items[-1].message["content"] == "Answer to: Q what is up?"
    assert alice.runs(session.session_id)[0].run_id == run_id


def test_50_simultaneous_asks_make_exactly_one_run(api: Api, model: Model) -> None:
    session = api.client("alice").create_session(api.space_id, api.agent_id)
    barrier = threading.Barrier(50)
    statuses: list[int] = []
    conflicts: list[str] = []
    lock = threading.Lock()

    def ask(i: int) -> None:
        client = api.client("alice")
        barrier.wait()
        try:
            client.ask(session.session_id, f"Q slow number {i}")
            with lock:
                statuses.append(201)
        except ApiError as err:
            with lock:
                statuses.append(err.status)
                conflicts.append(err.details.get("run_id", ""))

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses.count(201) == 1 and statuses.count(409) == 49, statuses
    runs = api.client("alice").runs(session.session_id)
    assert len(runs) == 1
    assert set(conflicts) == {runs[0].run_id}  # every 409 names the winner
    model.open()


def test_one_idempotency_key_retried_makes_one_run(api: Api, model: Model) -> None:
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    results: list[tuple[str, bool]] = []
    lock = threading.Lock()

    def ask() -> None:
        client = api.client("alice")
        out = client.ask_full(session.session_id, "Q slow once", idempotency_key="retry-me")
        with lock:
            results.append((out.run.run_id, out.created))

    threads = [threading.Thread(target=ask) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({run_id for run_id, _ in results}) == 1
    assert [created for _, created in results].count(True) == 1
    model.open()
    again = alice.ask_full(session.session_id, "Q slow once", idempotency_key="retry-me")
    assert not again.created and again.run.run_id == results[0][0]
    assert len(alice.runs(session.session_id)) == 1


def test_a_blocked_run_is_resolved_through_the_api(api: Api, model: Model,
                                                   wait: Wait) -> None:
    """A restart while the model call is in flight: the run is interrupted; resumed it
    blocks on the unknown model outcome; the creator's verdict moves it on."""
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    run = alice.ask(session.session_id, "Q hang please")
    wait(lambda: "Q hang please" in model.started, what="the model call")
    api.platform.launcher.stop(run.run_id)  # the worker dies mid-call (no cancel recorded)
    view = wait(lambda: (v := alice.run(session.session_id, run.run_id)).status ==
                "interrupted" and v, what="interrupted")
    assert view.way_out == "resume"
    alice.resume(session.session_id, run.run_id)
    blocked = wait(lambda: (v := alice.run(session.session_id, run.run_id)).status ==
                   "blocked" and v, what="blocked")
    assert blocked.way_out == "resolve" and blocked.unknown is not None
    assert blocked.unknown["verdicts"] == ["send_again", "treat_as_failed"]
    try:
        alice.resolve(session.session_id, run.run_id, "did_not_run")
        raise AssertionError("a tool verdict on a model call was accepted")
    except ApiError as err:
        assert (err.status, err.code) == (422, "verdict_not_applicable")
    model.open()
    alice.resolve(session.session_id, run.run_id, "send_again", note="the provider is back")
    done = wait(lambda: (v := alice.run(session.session_id, run.run_id)).status ==
                "completed" and v, what="completed")
    assert done.answer == "Answer to: Q hang please"
    types = [e.type for e in alice.follow(session.session_id, run.run_id, wait=2)]
    assert "run.resolved" in types


def test_events_as_server_sent_events(api: Api) -> None:
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    run = alice.ask(session.session_id, "Q stream it")
    lines: list[str] = []
    with httpx.stream("GET", f"{api.url}/api/v1/sessions/{session.session_id}/runs/"
                      f"{run.run_id}/events", headers={
                          "Authorization": f"Bearer {api.tokens['alice']}",
                          "Accept": "text/event-stream"}, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        for line in response.iter_lines():
            lines.append(line)
    assert "event: run.started" in lines and lines[-2].startswith("data: ")
    assert "event: end" in lines
    with httpx.stream("GET", f"{api.url}/api/v1/sessions/{session.session_id}/runs/"
                      f"{run.run_id}/events", headers={"Accept": "text/event-stream"},
                      timeout=30) as response:
        assert response.status_code == 401


def test_an_event_stream_past_its_limit_ends_and_resumes_from_the_last_event(
        api: Api, model: Model, wait: Wait) -> None:
    """A stream open ``stream_limit`` seconds closes without ``end`` (no reader holds a
    connection slot for a whole run); reconnecting with ``Last-Event-ID`` carries on with
    the next event: none lost, none repeated."""
    api.server.stream_limit = 0.5
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    run = alice.ask(session.session_id, "Q slow one")
    wait(lambda: "Q slow one" in model.started, what="the model call")
    url = f"{api.url}/api/v1/sessions/{session.session_id}/runs/{run.run_id}/events"
    headers = {"Authorization": f"Bearer {api.tokens['alice']}",
               "Accept": "text/event-stream"}
    started = time.monotonic()
    with httpx.stream("GET", url, headers=headers, timeout=30) as response:
        first = list(response.iter_lines())
    assert time.monotonic() - started < 5 and "event: end" not in first
    seqs = [int(line.removeprefix("id: ")) for line in first if line.startswith("id: ")]
    assert seqs == list(range(1, len(seqs) + 1)) and seqs
    model.open()
    api.server.stream_limit = 30
    with httpx.stream("GET", url, headers={**headers, "Last-Event-ID": str(seqs[-1])},
                      timeout=30) as response:
        rest = list(response.iter_lines())
    assert "event: end" in rest
    more = [int(line.removeprefix("id: ")) for line in rest if line.startswith("id: ")]
    assert more[0] == seqs[-1] + 1 and more == list(range(more[0], more[0] + len(more)))


def test_an_interrupted_runs_event_stream_ends_and_names_its_way_out(
        api: Api, model: Model, wait: Wait) -> None:
    """Issue 17: `events?wait=20` of a run nothing drives any more (interrupted) answers at
    once with `done: true` and `way_out: resume`, so the polling loop of docs/api.md ends;
    so does the SSE stream (its `end` event names the way out)."""
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    run = alice.ask(session.session_id, "Q hang please")
    wait(lambda: "Q hang please" in model.started, what="the model call")
    api.platform.launcher.stop(run.run_id)  # the worker dies mid-call
    wait(lambda: alice.run(session.session_id, run.run_id).status == "interrupted",
         what="interrupted")
    started = time.monotonic()
    after, pages = 0, 0
    while True:  # the loop of docs/api.md
        page = alice.events(session.session_id, run.run_id, after=after, wait=20)
        after, pages = page.next_after, pages + 1
        if page.done:
            break
        assert pages < 5, "the event stream of an interrupted run never ends"
    assert time.monotonic() - started < 10
    assert (page.status, page.way_out) == ("interrupted", "resume")
    with httpx.stream("GET", f"{api.url}/api/v1/sessions/{session.session_id}/runs/"
                      f"{run.run_id}/events", headers={
                          "Authorization": f"Bearer {api.tokens['alice']}",
                          "Accept": "text/event-stream"}, timeout=30) as response:
        lines = list(response.iter_lines())
    end = json.loads(lines[lines.index("event: end") + 1].removeprefix("data: "))
    assert end == {"status": "interrupted", "next_after": after, "way_out": "resume"}
