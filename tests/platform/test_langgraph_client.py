"""The LangGraph API shape with its own client (``langgraph-sdk``'s sync client) against a
live server (agentloom.api.langgraph): a thread, a run waited for, a run streamed (values,
updates, the tool step), a stream the server cuts mid-call that the client resumes by
itself (``Location`` + ``Last-Event-ID``) with nothing lost or repeated, a stopped run as
the thread's interrupt answered with ``command.resume`` (resume → blocked → a verdict),
a cancel, and the refusals."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from .conftest import Api, Model

langgraph_sdk = pytest.importorskip("langgraph_sdk")

Wait = Callable[..., Any]
Client = Callable[..., Any]


@pytest.fixture
def client(api: Api) -> Iterator[Client]:
    """``client(user)``: langgraph-sdk's sync client as ``user`` (closed after the test)."""
    made: list[Any] = []

    def make(user: str = "alice") -> Any:
        url = f"{api.url}/api/v1/spaces/{api.space_id}/agents/{api.agent_id}/langgraph"
        made.append(langgraph_sdk.get_sync_client(url=url, api_key=None, headers={
            "Authorization": f"Bearer {api.tokens[user]}"}))
        return made[-1]

    yield make
    for lg in made:
        lg.http.client.close()


def human(text: str) -> dict[str, Any]:
    return {"messages": [{"type": "human", "content": text}]}


def test_a_thread_a_run_waited_and_a_run_streamed(api: Api, client: Client) -> None:
    lg = client()
    thread = lg.threads.create()
    values = lg.runs.wait(thread["thread_id"], api.agent_id, input=human("Q hello"))
    assert [m["type"] for m in values["messages"]] == ["human", "ai"]
    assert values["messages"][-1]["content"] == "Answer to: Q hello"
    parts = list(lg.runs.stream(thread["thread_id"], api.agent_id, input=human("Q plan it"),
                                stream_mode=["values", "updates"]))
    events = [p.event for p in parts]
    assert events[0] == "metadata" and events[-1] == "end"
    assert parts[-1].data["status"] == "success"
    updates = [p.data for p in parts if p.event == "updates"]
    assert [next(iter(u)) for u in updates] == ["agent", "tools", "agent"]
    tool = updates[1]["tools"]["messages"][0]
    assert tool["type"] == "tool" and tool["tool_call_id"] == "call_1"
    assert [m["type"] for m in updates[0]["agent"]["messages"]] == ["human", "ai"]
    assert updates[0]["agent"]["messages"][-1]["tool_calls"][0]["name"] == "update_plan"
    last = [p.data for p in parts if p.event == "values"][-1]
    assert [m["type"] for m in last["messages"]] == ["human", "ai", "human", "ai", "tool",
                                                      "ai"]
    got = lg.threads.get(thread["thread_id"])
    assert got["status"] == "idle" and len(got["values"]["messages"]) == 6
    runs = lg.runs.list(thread["thread_id"])
    assert [r["status"] for r in runs] == ["success", "success"]
    assert lg.runs.get(thread["thread_id"], runs[0]["run_id"])["status"] == "success"
    # a thread id of the client's own; creating it twice is a conflict unless asked not to
    lg.threads.create(thread_id="my-thread")
    with pytest.raises(langgraph_sdk.errors.ConflictError):
        lg.threads.create(thread_id="my-thread")
    assert lg.threads.create(thread_id="my-thread", if_exists="do_nothing")[
        "thread_id"] == "my-thread"


def test_the_client_resumes_a_cut_stream_by_itself(api: Api, client: Client, model: Model) -> None:
    api.server.stream_limit = 0.5
    lg = client()
    thread = lg.threads.create()["thread_id"]
    threading.Timer(2.0, model.open).start()  # after the first cut and a reconnect
    parts = list(lg.runs.stream(thread, api.agent_id, input=human("Q slow notes"),
                                stream_mode=["values", "custom"]))
    assert parts[-1].event == "end" and parts[-1].data["status"] == "success"
    run_id = parts[0].data["run_id"]
    api.server.stream_limit = 30
    whole = list(lg.runs.join_stream(thread, run_id, stream_mode=["values", "custom"]))
    assert parts[1:] == whole  # the same parts, none lost or repeated (metadata aside)


def test_an_interrupt_answered_with_command_resume(api: Api, client: Client, model: Model,
                                                   wait: Wait) -> None:
    lg = client()
    thread = lg.threads.create()["thread_id"]
    run = lg.runs.create(thread, api.agent_id, input=human("Q hang please"))
    wait(lambda: "Q hang please" in model.started, what="the model call")
    api.platform.launcher.stop(run["run_id"])  # the worker dies mid-call
    wait(lambda: lg.threads.get(thread)["status"] == "interrupted", what="interrupted")
    state = lg.threads.get_state(thread)
    [stop] = state["interrupts"]
    assert stop["id"] == run["run_id"] and stop["value"]["reason"] == "interrupted"
    values = lg.runs.wait(thread, api.agent_id, command={"resume": {"resume": True}})
    [blocked] = values["__interrupt__"]
    assert blocked["value"]["reason"] == "model_outcome_unknown"
    assert blocked["value"]["responseSchema"]["properties"]["verdict"]["enum"] == [
        "send_again", "treat_as_failed"]
    model.open()
    values = lg.runs.wait(thread, api.agent_id, command={"resume": {
        "verdict": "send_again", "note": "the provider is back"}})
    assert "__interrupt__" not in values
    assert values["messages"][-1]["content"] == "Answer to: Q hang please"
    assert lg.runs.get(thread, run["run_id"])["status"] == "success"


def test_cancel_and_refusals(api: Api, client: Client, model: Model, wait: Wait) -> None:
    lg = client()
    thread = lg.threads.create()["thread_id"]
    run = lg.runs.create(thread, api.agent_id, input=human("Q slow cancel me"))
    wait(lambda: "Q slow cancel me" in model.started, what="the model call")
    lg.runs.cancel(thread, run["run_id"])
    assert lg.runs.get(thread, run["run_id"])["status"] == "interrupted"
    errors = langgraph_sdk.errors
    with pytest.raises(errors.NotFoundError):  # bob's threads are his own
        client("bob").threads.get(thread)
    with pytest.raises(errors.NotFoundError):  # eve is in no such space
        client("eve").threads.create()
    with pytest.raises(httpx.HTTPStatusError) as refused:  # wait raises httpx's own
        lg.runs.wait(thread, api.agent_id, input={"messages": []})
    assert refused.value.response.status_code == 422
    assert refused.value.response.json()["error"]["code"] == "invalid_field"
    with pytest.raises(errors.UnprocessableEntityError):
        list(lg.runs.stream(thread, api.agent_id, input=human("Q x"),
                            stream_mode="debug"))
    with pytest.raises(httpx.HTTPStatusError) as refused:
        lg.runs.wait(thread, "agt_someone_else", input=human("Q x"))
    assert refused.value.response.json()["error"]["code"] == "assistant_not_found"
