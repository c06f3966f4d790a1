"""A2A against a live ``agentloom serve`` process (``--model-factory``: a scripted model
in a file of this test), with ``a2a-sdk``'s own client: the card, a task streamed to
completed, a retried first message that starts one task, a cancel, and a server killed
mid-call: after the restart the task is input-required (nothing drives it), replying its
way out (resume) leaves it input-required on the unknown model call, and replying that
way out (resolve send_again) completes it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a")

from a2a.client import (
    A2ACardResolver,
    AuthInterceptor,
    ClientConfig,
    ClientFactory,
    CredentialService,
)
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from agentloom.cli import main

pytestmark = pytest.mark.slow

SCRIPT = '''
import asyncio, json, os, pathlib
from agentloom_runtime.contracts import ModelResponse
from agentloom_runtime.testing import FunctionModel

GATE = pathlib.Path(os.environ["A2A_TEST_GATE"])

async def reply(request):
    if request.purpose == "verification":
        return ModelResponse(content=json.dumps({"decision": "complete", "reason": "ok",
                                                 "next_action": ""}))
    if request.purpose == "compaction":
        return ModelResponse(content="Summary.")
    asked = next((m["content"] for m in reversed(list(request.messages))
                  if m.get("role") == "user" and str(m.get("content")).startswith("Q ")), "")
    if asked.startswith("Q slow"):
        (GATE.parent / "started").write_text(asked)
        while not GATE.exists():
            await asyncio.sleep(0.02)
    return ModelResponse(content=f"Answer to: {asked}")

def factory(snapshot):
    return FunctionModel(reply)
'''
DONE = pb.TaskState.TASK_STATE_COMPLETED
INPUT = pb.TaskState.TASK_STATE_INPUT_REQUIRED


class Bearer(CredentialService):
    def __init__(self, token: str) -> None:
        self.token = token

    async def get_credentials(self, security_scheme_name: str, context: Any) -> str | None:
        return self.token if security_scheme_name == "bearer" else None


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "A2A_TEST_GATE": str(tmp_path / "gate"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    env.pop("AGENTLOOM_PROG", None)
    return env


@contextmanager
def serve(tmp_path: Path, home: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    log = (tmp_path / "serve.log").open("a")
    with log, subprocess.Popen(
            [sys.executable, "-m", "agentloom.cli", "--home", home, "serve", "--port", "0",
             "--model-factory", "a2a_script:factory"], stdout=subprocess.PIPE, stderr=log,
            text=True, env=_env(tmp_path)) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("agentloom serve: http://127.0.0.1:"), line
            yield line.split()[2].removesuffix("/api/v1"), proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)


def _message(text: str = "", *, message_id: str | None = None, task: str = "",
             data: dict[str, Any] | None = None) -> pb.SendMessageRequest:
    part = pb.Part(text=text) if data is None else json_format.ParseDict({"data": data},
                                                                         pb.Part())
    return pb.SendMessageRequest(message=pb.Message(
        message_id=message_id or uuid.uuid4().hex, role=pb.Role.ROLE_USER, parts=[part],
        task_id=task))


async def _client(base: str, token: str, **config: Any) -> Any:
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, base).get_agent_card(
            http_kwargs={"headers": {"Authorization": f"Bearer {token}"}})
    assert card.supported_interfaces[0].url == base
    return ClientFactory(ClientConfig(**config)).create(
        card, interceptors=[AuthInterceptor(Bearer(token))])


async def _until(client: Any, task_id: str, state: int) -> pb.Task:
    deadline = time.monotonic() + 20
    while True:
        task = await client.get_task(pb.GetTaskRequest(id=task_id))
        if task.status.state == state or time.monotonic() > deadline:
            assert task.status.state == state, task
            return task
        await asyncio.sleep(0.05)


async def test_a2a_on_a_live_serve_across_a_crash(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a2a_script.py").write_text(SCRIPT)
    home = str(tmp_path / "home")
    assert main(["--home", home, "serve", "bootstrap", "--user", "alice",
                 "--space", "Team"]) == 0  # in this process: the server is not up yet
    boot = json.loads(capsys.readouterr().out)
    token, space = boot["token"], boot["space_id"]
    auth = {"Authorization": f"Bearer {token}"}
    with serve(tmp_path, home) as (url, proc):
        async with httpx.AsyncClient(base_url=f"{url}/api/v1", headers=auth,
                                     trust_env=False) as api:
            agent = (await api.post(f"/spaces/{space}/agents", json={
                "name": "Helper", "config": {"prompt": "You answer.",
                                             "model": {"model": "scripted"}}})
                     ).json()["agent"]["agent_id"]
            published = await api.post(f"/spaces/{space}/agents/{agent}/publish", json={})
            assert published.status_code == 201
            base = f"{url}/api/v1/spaces/{space}/agents/{agent}/a2a"
            anonymous = await api.get(f"{base}/.well-known/agent-card.json",
                                      headers={"Authorization": ""})
            assert anonymous.status_code == 401
        streaming = await _client(base, token)
        events = [e async for e in streaming.send_message(_message("Q hello"))]
        assert events[0].task.id.startswith("run_")
        assert events[-1].status_update.status.state == DONE
        blocking = await _client(base, token, streaming=False)
        twice = [(await blocking.send_message(_message("Q once", message_id="m-1"))
                  .__anext__()).task for _ in range(2)]
        assert twice[0].id == twice[1].id and twice[0].status.state == DONE
        polling = await _client(base, token, streaming=False, polling=True)
        slow = (await polling.send_message(_message("Q slow cancel")).__anext__()).task
        canceled = await polling.cancel_task(pb.CancelTaskRequest(id=slow.id))
        assert canceled.status.state == pb.TaskState.TASK_STATE_CANCELED
        hung = (await polling.send_message(_message("Q slow crash")).__anext__()).task.id
        started, deadline = tmp_path / "started", time.monotonic() + 20
        while not (started.exists() and started.read_text() == "Q slow crash"):
            assert time.monotonic() < deadline, "the model call never started"
            await asyncio.sleep(0.02)
        proc.kill()  # mid-call: the request was sent, its outcome is unknown
        proc.wait(30)
        for client in (streaming, blocking, polling):
            await client.close()
    (tmp_path / "gate").write_text("open")
    with serve(tmp_path, home) as (url, _):
        base = f"{url}/api/v1/spaces/{space}/agents/{agent}/a2a"
        client = await _client(base, token, streaming=False, polling=True)
        stopped = await _until(client, hung, INPUT)
        assert "interrupted" in stopped.status.message.parts[0].text
        await client.send_message(_message(task=hung, data={"resume": {}})).__anext__()
        blocked = await _until(client, hung, INPUT)
        replies = json_format.MessageToDict(blocked.status.message.parts[1].data)["replies"]
        assert {"resolve": {"verdict": "send_again"}} in replies
        await client.send_message(_message(task=hung, data=replies[0])).__anext__()
        done = await _until(client, hung, DONE)
        assert done.artifacts[0].parts[0].text == "Answer to: Q slow crash"
        await client.close()
