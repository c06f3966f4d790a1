"""AG-UI through a real server (agentloom.api.agui): the run's events as AG-UI events, a
thread kept as one session, a retried run id following the run it started, a stream cut
by the server's limit resumed with no event lost or repeated, a stopped run as an
interrupt answered in ``resume`` (resume, then a verdict), a cancel, and the refusals.
The protocol's own client is driven in tests/interop/test_agui_client.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from .conftest import Api, Model

Wait = Callable[..., Any]


def post(api: Api, body: dict[str, Any], user: str | None = "alice",
         headers: dict[str, str] | None = None) -> tuple[int, list[dict[str, Any]], str]:
    """The status, the AG-UI events and the raw answer of one AG-UI request."""
    auth = {"Authorization": f"Bearer {api.tokens[user]}"} if user else {}
    res = httpx.post(f"{api.url}/api/v1/spaces/{api.space_id}/agents/{api.agent_id}/ag-ui",
                     json=body, headers={**auth, **(headers or {}),
                                         "Accept": "text/event-stream"}, timeout=30)
    events = [json.loads(line.removeprefix("data: ")) for line in res.text.splitlines()
              if line.startswith("data: ")]
    return res.status_code, events, res.text


def ask(thread: str, run: str, question: str, **extra: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "state": {}, "tools": [], "context": [],
            "messages": [{"id": f"m-{run}", "role": "user", "content": question}], **extra}


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def seqs(events: list[dict[str, Any]]) -> list[int]:
    return [e["rawEvent"]["agentloom_seq"] for e in events if "rawEvent" in e]


def test_a_run_as_ag_ui_events_and_a_thread_as_one_session(api: Api) -> None:
    status, events, raw = post(api, ask("t-1", "r-1", "Q plan the day"))
    assert status == 200, raw
    kinds = types(events)
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    assert events[0]["threadId"] == "t-1" and events[0]["runId"] == "r-1"
    assert kinds.count("STEP_STARTED") == kinds.count("STEP_FINISHED") >= 2
    start = kinds.index("TOOL_CALL_START")
    assert kinds[start:start + 4] == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",
                                      "TOOL_CALL_RESULT"]
    assert events[start]["toolCallName"] == "update_plan"
    [plan] = [e for e in events if e["type"] == "STATE_SNAPSHOT"]
    assert plan["snapshot"]["plan"]["steps"][0]["title"] == "Answer"
    texts = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert texts == ["Planning.", "Answer to: Q plan the day"]
    end = events[-1]
    assert end["outcome"] == {"type": "success"} and end["result"] == texts[-1]
    assert end["usage"][0]["totalTokens"] > 0
    assert seqs(events) == sorted(seqs(events))  # each event's group once, in order
    # the same thread asks again in the same session; another thread is another session
    post(api, ask("t-1", "r-2", "Q second"))
    post(api, ask("t-2", "r-3", "Q other"))
    alice = api.client("alice")
    sessions = alice.sessions(api.space_id)
    assert sorted(len(alice.runs(s.session_id)) for s in sessions) == [1, 2]
    # bob's thread "t-1" is not alice's
    status, events, _ = post(api, ask("t-1", "r-4", "Q bob's"), user="bob")
    assert status == 200 and events[-1]["result"] == "Answer to: Q bob's"
    assert len(api.client("bob").sessions(api.space_id)) == 1


def test_a_retried_run_id_follows_the_run_it_started(api: Api) -> None:
    _, first, _ = post(api, ask("t-r", "r-same", "Q once"))
    _, again, _ = post(api, ask("t-r", "r-same", "Q once"))
    assert again == first
    [session] = api.client("alice").sessions(api.space_id)
    assert len(api.client("alice").runs(session.session_id)) == 1
    assert first[0]["metadata"]["agentloom"]["session_id"] == session.session_id
    # the session deleted, the thread's next run starts a new one
    api.client("alice").delete_session(session.session_id)
    _, later, _ = post(api, ask("t-r", "r-later", "Q later"))
    [fresh] = api.client("alice").sessions(api.space_id)
    assert fresh.session_id != session.session_id
    assert later[0]["metadata"]["agentloom"]["session_id"] == fresh.session_id


def test_a_stream_cut_by_the_limit_resumes_with_nothing_lost_or_repeated(
        api: Api, model: Model, wait: Wait) -> None:
    api.server.stream_limit = 0.5
    post(api, ask("t-cut", "r-cut", "Q slow one"))  # starts the run
    wait(lambda: "Q slow one" in model.started, what="the model call")
    status, first, _ = post(api, ask("t-cut", "r-cut", "Q slow one"))  # the same run
    assert status == 200 and types(first)[-1] != "RUN_FINISHED"
    assert "STEP_STARTED" in types(first)  # the model call in flight
    model.open()
    api.server.stream_limit = 30
    after = seqs(first)[-1]
    _, rest, _ = post(api, ask("t-cut", "r-cut", "Q slow one",
                               forwardedProps={"agentloom": {"after": after}}))
    # the reopened stream: RUN_STARTED and the step still open, then the next events
    assert types(rest)[:2] == ["RUN_STARTED", "STEP_STARTED"]
    assert rest[1]["stepName"] == [e for e in first if e["type"] == "STEP_STARTED"][-1][
        "stepName"]
    assert seqs(rest)[0] == after + 1 and types(rest)[-1] == "RUN_FINISHED"
    _, whole, _ = post(api, ask("t-cut", "r-cut", "Q slow one"))
    assert first + rest[2:] == whole
    # Last-Event-ID works the same (a browser's EventSource-style reconnect)
    _, by_header, _ = post(api, ask("t-cut", "r-cut", "Q slow one"),
                           headers={"Last-Event-ID": str(after)})
    assert by_header == rest


def test_a_stopped_run_is_an_interrupt_answered_by_resume(
        api: Api, model: Model, wait: Wait) -> None:
    body = ask("t-hang", "r-hang", "Q hang please")
    opened: dict[str, Any] = {}

    def started() -> bool:
        sessions = api.client("alice").sessions(api.space_id)
        runs = api.client("alice").runs(sessions[0].session_id) if sessions else []
        opened.update(session=sessions[0].session_id, run=runs[0].run_id) if runs else None
        return bool(runs) and "Q hang please" in model.started

    api.server.stream_limit = 0.3  # the first request's stream ends while it hangs
    post(api, body)
    wait(started, what="the model call")
    api.platform.launcher.stop(opened["run"])  # the worker dies mid-call
    wait(lambda: api.client("alice").run(opened["session"], opened["run"]).status ==
         "interrupted", what="interrupted")
    api.server.stream_limit = 30
    _, events, _ = post(api, body)
    end = events[-1]
    assert end["outcome"]["type"] == "interrupt", end
    [stop] = end["outcome"]["interrupts"]
    assert stop["id"] == opened["run"] and stop["responseSchema"]["required"] == ["resume"]
    assert stop["metadata"]["agentloom"]["way_out"] == "resume"
    assert types(events).count("STEP_STARTED") == types(events).count("STEP_FINISHED")
    resume = [{"interruptId": stop["id"], "status": "resolved", "payload": {"resume": True}}]
    _, events, _ = post(api, ask("t-hang", "r-hang-2", "Q hang please", resume=resume))
    [blocked] = events[-1]["outcome"]["interrupts"]
    assert blocked["reason"] == "model_outcome_unknown", blocked
    assert blocked["responseSchema"]["properties"]["verdict"]["enum"] == [
        "send_again", "treat_as_failed"]
    model.open()
    verdict = [{"interruptId": blocked["id"], "status": "resolved",
                "payload": {"verdict": "send_again", "note": "the provider is back"}}]
    _, events, _ = post(api, ask("t-hang", "r-hang-3", "Q hang please", resume=verdict))
    assert events[-1]["outcome"] == {"type": "success"}
    assert events[-1]["result"] == "Answer to: Q hang please"
    assert "agentloom.run.resolved" in [e.get("name") for e in events]
    # a verdict on a run that is not blocked any more is refused, nothing changes
    status, _, raw = post(api, ask("t-hang", "r-hang-4", "Q hang please", resume=verdict))
    assert status == 409, raw


def test_cancel_a_running_run_through_resume_cancelled(api: Api, model: Model,
                                                       wait: Wait) -> None:
    api.server.stream_limit = 0.3
    _, first, _ = post(api, ask("t-c", "r-c", "Q slow cancel me"))
    run_id = first[0]["metadata"]["agentloom"]["run_id"]
    api.server.stream_limit = 30
    cancel = [{"interruptId": run_id, "status": "cancelled"}]
    _, events, _ = post(api, ask("t-c", "r-c2", "Q slow cancel me", resume=cancel))
    assert events[-1]["outcome"] == {"type": "cancelled"}, events[-1]


def test_refusals(api: Api) -> None:
    assert post(api, ask("t-x", "r-x", "Q x"), user=None)[0] == 401
    status, _, raw = post(api, ask("t-x", "r-x", "Q x"), user="eve")  # not a member
    assert status == 404, raw
    for bad, field in [({"threadId": "", "runId": "r", "messages": []}, "threadId"),
                       (ask("t", "r", "Q x", forwardedProps={"agentloom": {"after": -1}}),
                        "forwardedProps.agentloom.after"),
                       ({"threadId": "t", "runId": "r", "messages": [
                           {"id": "1", "role": "assistant", "content": "hi"}]}, "messages"),
                       (ask("t", "r", "Q x", resume=[{"interruptId": "run_x",
                                                       "status": "maybe"}]), "resume")]:
        status, _, raw = post(api, bad)
        assert status == 422 and field in raw, (bad, raw)
    status, _, raw = post(api, ask("t", "r", "Q x", resume=[
        {"interruptId": "run_0123456789abcdef0123", "status": "cancelled"}]))
    assert status == 404 and "run_not_found" in raw, raw
