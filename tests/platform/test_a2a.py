"""A2A with the protocol's own client (``a2a-sdk``, A2A 1.0 over JSON-RPC) against a real
server on 127.0.0.1 (the ``api`` fixture: the resolver and HTTP server of ``agentloom
serve``) and the conftest's test model. The client reads the card, authenticates with
the bearer scheme the card names (the SDK's ``AuthInterceptor``), and follows tasks:
streamed to completion, a retried first message that starts one task, a cancel, a run
stopped mid-call surfaced as input-required and moved on by replying its way out
(resume, then resolve), a resubscribe; and the refusals: no or a wrong bearer (401),
another user's task (not found), another space (404).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

a2a = pytest.importorskip("a2a")

from a2a.client import (  # noqa: E402
    A2ACardResolver,
    AuthInterceptor,
    ClientConfig,
    ClientFactory,
    CredentialService,
)
from a2a.client.errors import AgentCardResolutionError  # noqa: E402
from a2a.types import a2a_pb2 as pb  # noqa: E402
from a2a.utils.errors import TaskNotFoundError  # noqa: E402
from google.protobuf import json_format  # noqa: E402

from .conftest import ALICE, Api, Model  # noqa: E402

Wait = Callable[..., Any]
DONE = pb.TaskState.TASK_STATE_COMPLETED


class Bearer(CredentialService):
    def __init__(self, token: str) -> None:
        self.token = token

    async def get_credentials(self, security_scheme_name: str, context: Any) -> str | None:
        return self.token if security_scheme_name == "bearer" else None


def _base(api: Api) -> str:
    return f"{api.url}/api/v1/spaces/{api.space_id}/agents/{api.agent_id}/a2a"


async def _card(api: Api, user: str) -> pb.AgentCard:
    async with httpx.AsyncClient() as http:
        return await A2ACardResolver(http, _base(api)).get_agent_card(
            http_kwargs={"headers": {"Authorization": f"Bearer {api.tokens[user]}"}})


async def _client(api: Api, user: str, *, streaming: bool = True,
                  polling: bool = False) -> Any:
    card = await _card(api, user)
    factory = ClientFactory(ClientConfig(streaming=streaming, polling=polling))
    return factory.create(card, interceptors=[AuthInterceptor(Bearer(api.tokens[user]))])


def _message(text: str = "", *, message_id: str | None = None, context: str = "",
             task: str = "", data: dict[str, Any] | None = None) -> pb.SendMessageRequest:
    part = pb.Part(text=text) if data is None else json_format.ParseDict({"data": data},
                                                                         pb.Part())
    return pb.SendMessageRequest(message=pb.Message(
        message_id=message_id or uuid.uuid4().hex, role=pb.Role.ROLE_USER, parts=[part],
        context_id=context, task_id=task))


async def _events(stream: AsyncIterator[pb.StreamResponse]) -> list[pb.StreamResponse]:
    return [event async for event in stream]


async def _state(client: Any, task_id: str, want: int, wait_s: float = 20.0) -> pb.Task:
    deadline = asyncio.get_running_loop().time() + wait_s
    while True:
        task = await client.get_task(pb.GetTaskRequest(id=task_id))
        if task.status.state == want or asyncio.get_running_loop().time() > deadline:
            assert task.status.state == want, task
            return task
        await asyncio.sleep(0.05)


async def test_the_sdk_client_follows_tasks_through_every_state(api: Api, model: Model,
                                                                wait: Wait) -> None:
    card = await _card(api, "alice")
    assert card.name == "Helper" and card.capabilities.streaming
    [interface] = card.supported_interfaces
    assert interface.url == _base(api) and interface.protocol_binding == "JSONRPC"
    assert interface.protocol_version == "1.0"
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert [s.id for s in card.skills] == ["ask"]
    assert "You answer questions." not in str(card)  # the prompt stays off the card

    streaming = await _client(api, "alice")
    # streamed: the task, then its changes, the answer artifact and the last status
    events = await _events(streaming.send_message(_message("Q hello")))
    first, last = events[0], events[-1]
    assert first.HasField("task") and last.status_update.status.state == DONE
    task_id, context = first.task.id, first.task.context_id
    assert task_id.startswith("run_") and context.startswith("ses_")
    [artifact] = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert artifact.parts[0].text == "Answer to: Q hello"
    assert last.status_update.status.message.parts[0].text == "Answer to: Q hello"
    run = await asyncio.to_thread(api.platform.sessions.run, ALICE, context, task_id)
    assert run.status == "completed" and run.answer == "Answer to: Q hello"

    # a retried first message (same messageId, no contextId) starts one task
    blocking = await _client(api, "alice", streaming=False)
    sent = [e for _ in range(2) for e in await _events(
        blocking.send_message(_message("Q once", message_id="m-retried")))]
    assert sent[0].task.id == sent[1].task.id and sent[0].task.status.state == DONE
    once = sent[0].task
    runs = await asyncio.to_thread(api.platform.sessions.runs, ALICE, once.context_id)
    assert [r.run_id for r in runs] == [once.id]
    # the next question in the same context is a new task of the same session
    [again] = [e async for e in blocking.send_message(_message("Q two", context=context))]
    assert again.task.context_id == context and again.task.id != task_id

    # cancel → canceled; a resubscribed stream ends with it
    polling = await _client(api, "alice", streaming=False, polling=True)
    [slow] = [e async for e in polling.send_message(_message("Q slow one"))]
    assert slow.task.status.state in (pb.TaskState.TASK_STATE_SUBMITTED,
                                      pb.TaskState.TASK_STATE_WORKING)
    await _state(polling, slow.task.id, pb.TaskState.TASK_STATE_WORKING)
    follow = asyncio.create_task(_events(streaming.subscribe(
        pb.SubscribeToTaskRequest(id=slow.task.id))))
    await asyncio.sleep(0.3)
    canceled = await polling.cancel_task(pb.CancelTaskRequest(id=slow.task.id))
    assert canceled.status.state == pb.TaskState.TASK_STATE_CANCELED
    followed = await asyncio.wait_for(follow, 20)
    assert followed[0].task.id == slow.task.id
    assert followed[-1].status_update.status.state == pb.TaskState.TASK_STATE_CANCELED

    # a run stopped mid-call: input-required, with the way out; replying it moves it on
    [hang] = [e async for e in polling.send_message(_message("Q hang please"))]
    hung = hang.task.id
    wait(lambda: "Q hang please" in model.started, what="the hanging call")
    api.platform.launcher.stop(hung)  # the worker dies mid-call: the request was sent
    stopped = await _state(polling, hung, pb.TaskState.TASK_STATE_INPUT_REQUIRED)
    assert '{"resume": {}}' in stopped.status.message.parts[0].text
    model.open()
    await polling.send_message(_message(task=hung, data={"resume": {}})).__anext__()
    blocked = await _state(polling, hung, pb.TaskState.TASK_STATE_INPUT_REQUIRED)
    way_out = json_format.MessageToDict(blocked.status.message.parts[1].data)
    assert way_out["way_out"] == "resolve"
    assert way_out["replies"] == [{"resolve": {"verdict": "send_again"}},
                                  {"resolve": {"verdict": "treat_as_failed"}}]
    reply = _message(task=hung, data={"resolve": {"verdict": "send_again"}})
    resolved = await _events(streaming.send_message(reply))
    assert resolved[-1].status_update.status.state == DONE
    assert (await polling.get_task(pb.GetTaskRequest(id=hung))).status.state == DONE
    for client in (streaming, blocking, polling):
        await client.close()


async def test_bearer_and_authorization_as_the_api(api: Api) -> None:
    alice = await _client(api, "alice", streaming=False)
    [sent] = [e async for e in alice.send_message(_message("Q mine"))]
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": sent.task.id}}
    async with httpx.AsyncClient() as http:
        for headers in ({}, {"Authorization": "Bearer agl_not-a-token"}):
            for answer in (await http.get(f"{_base(api)}/.well-known/agent-card.json",
                                          headers=headers),
                           await http.post(_base(api), json=rpc, headers=headers)):
                assert answer.status_code == 401, answer.text
                assert answer.json()["error"]["code"] in ("no_token", "invalid_token")
    with pytest.raises(AgentCardResolutionError):
        await _card(api, "eve")  # another space: the agent does not exist for eve
    bob = await _client(api, "bob", streaming=False)  # a member, not the task's creator
    with pytest.raises(TaskNotFoundError):
        await bob.get_task(pb.GetTaskRequest(id=sent.task.id))
    with pytest.raises(TaskNotFoundError):
        await bob.cancel_task(pb.CancelTaskRequest(id=sent.task.id))
    with pytest.raises(TaskNotFoundError):  # nor can bob talk to it or to its context
        await bob.send_message(_message("Q intrude", task=sent.task.id)).__anext__()
    await alice.close()
    await bob.close()


def test_behind_api_gateway_a_stream_is_one_answer_and_the_card_names_the_jwt(
        api: Api) -> None:
    """The Lambda's path: the same resolver without a streaming server answers
    ``SendStreamingMessage`` with the events in one ``text/event-stream`` body (up to the
    run's end here); a JWT deployment's card names a JWT bearer."""
    import json

    from agentloom.api.a2a.card import security
    from agentloom.api.app import build_app
    from agentloom.api.server import http_event
    from agentloom.platform.identity import JwtClaims

    app = build_app(api.platform.admin, api.platform.sessions, api.platform.tokens)
    body = {"jsonrpc": "2.0", "id": "s1", "method": "SendStreamingMessage",
            "params": {"message": {"messageId": "m-lambda", "role": "ROLE_USER",
                                   "parts": [{"text": "Q buffered"}]}}}
    path = f"/api/v1/spaces/{api.space_id}/agents/{api.agent_id}/a2a"
    event = http_event("POST", path, {"authorization": f"Bearer {api.tokens['alice']}",
                                      "content-type": "application/json"},
                       json.dumps(body).encode(), "127.0.0.1")
    answer = app.resolve(event, None)
    assert app.take_stream() is None  # nothing streamed: all of it is in the body
    assert answer["statusCode"] == 200
    assert answer["headers"]["Content-Type"] == "text/event-stream"
    events = [json.loads(line[len("data: "):]) for line in answer["body"].splitlines()
              if line.startswith("data: ")]
    assert all(e["id"] == "s1" for e in events)
    assert "task" in events[0]["result"]
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    schemes, required = security(JwtClaims())
    assert schemes["bearer"]["httpAuthSecurityScheme"]["bearerFormat"] == "JWT"
    assert required == [{"schemes": {"bearer": {"list": []}}}]


async def test_concurrent_retries_of_a_first_message_start_one_task(api: Api) -> None:
    """Four sends of one first message at once (a client retrying while the first is in
    flight): one session keeps the messageId's claim, one run; the losers' sessions are
    gone."""
    client = await _client(api, "alice", streaming=False, polling=True)

    async def send() -> pb.Task:
        stream = client.send_message(_message("Q at once", message_id="m-concurrent"))
        return (await stream.__anext__()).task

    tasks = await asyncio.gather(*(send() for _ in range(4)))
    assert len({t.id for t in tasks}) == 1 and len({t.context_id for t in tasks}) == 1
    sessions = await asyncio.to_thread(api.platform.sessions.sessions, ALICE, api.space_id)
    assert [s.session_id for s in sessions if s.title == "A2A m-concurrent"] == \
        [tasks[0].context_id]
    await _state(client, tasks[0].id, DONE)
    await client.close()
