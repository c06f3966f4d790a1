"""Builders of the platform tests: an embedded platform in a temporary home whose model
is a ``FunctionModel`` (no network), a published agent with a session, and waits.

The model answers the run's question (the last user message starting with ``Q ``) with
``Answer to: <question>`` and a usage; reviews say complete. A question starting with
``Q slow`` waits for ``Model.gate`` first (so a run stays active), one starting with
``Q hang`` never answers until the gate opens (to interrupt a run mid-call); ``Q no such
model`` is answered as a provider's 404 (``ModelNotFound``); ``Q plan`` first calls
``update_plan`` (one step, completed), then answers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentloom.api.app import build_app
from agentloom.api.client import Client
from agentloom.api.server import ApiServer
from agentloom.local.capabilities import embedded_capabilities
from agentloom.local.embedded import EmbeddedPlatform
from agentloom.platform.identity import Principal
from agentloom_runtime.contracts import ModelRequest, ModelResponse, ToolCall
from agentloom_runtime.errors import ModelNotFound
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.testing import FunctionModel, ScriptedModel

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
ALICE = Principal("alice", "token")
AGENT_CONFIG: dict[str, Any] = {"prompt": "You answer questions.",
                                "model": {"model": "test-model"}}


def question_of(request: ModelRequest) -> str:
    for message in reversed(list(request.messages)):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str) \
                and content.startswith("Q "):
            return content
    return ""


@dataclass
class Model:
    """The test model: its requests (every instance the factory built) and its gate."""

    opened: bool = False
    requests: list[ModelRequest] = field(default_factory=list)
    started: list[str] = field(default_factory=list)

    async def reply(self, request: ModelRequest) -> ModelResponse | str | ModelNotFound:
        self.requests.append(request)
        if request.purpose == "verification":
            return dataclasses.replace(ScriptedModel.verdict("complete"), usage=USAGE)
        if request.purpose == "compaction":
            return ModelResponse(content="Summary.", usage=USAGE)
        question = question_of(request)
        self.started.append(question)
        if question.startswith("Q no such model"):
            return ModelNotFound("model provider answered HTTP 404 (model_not_found): it "
                                 "has no model 'test-model' at http://127.0.0.1:9/v1",
                                 status=404)
        if question.startswith(("Q slow", "Q hang")):
            while not self.opened:  # noqa: ASYNC110 (set from another thread)
                await asyncio.sleep(0.01)
        if question.startswith("Q plan") and \
                not any(m.get("role") == "tool" for m in request.messages):
            plan = {"steps": [{"id": "1", "title": "Answer", "status": "completed"}]}
            return ModelResponse(content="Planning.", usage=USAGE, tool_calls=(
                ToolCall("call_1", "update_plan", json.dumps(plan)),))
        return ModelResponse(content=f"Answer to: {question}", usage=USAGE)

    def factory(self, snapshot: AgentSnapshot) -> FunctionModel:
        return FunctionModel(self.reply)

    def open(self) -> None:
        self.opened = True


@pytest.fixture
def model() -> Iterator[Model]:
    m = Model()
    yield m
    m.open()


@pytest.fixture
def open_platform(tmp_path: Path, model: Model) -> Iterator[Callable[[], EmbeddedPlatform]]:
    """Opens the embedded platform on one home (call again after ``close()`` to
    simulate a restart); every platform opened is closed at the end."""
    opened: list[EmbeddedPlatform] = []

    def open_() -> EmbeddedPlatform:
        # the default capability set of `agentloom serve` (Skills, MCP, knowledge), so
        # their routes are exercised like every other one
        home = tmp_path / "home"
        platform = EmbeddedPlatform.open(home, model_factory=model.factory,
                                         capabilities=embedded_capabilities(home))
        opened.append(platform)
        return platform

    yield open_
    model.open()
    for platform in opened:
        platform.close()


@pytest.fixture
def platform(open_platform: Callable[[], EmbeddedPlatform]) -> EmbeddedPlatform:
    return open_platform()


@dataclass(frozen=True)
class Setup:
    space_id: str
    agent_id: str
    session_id: str


@pytest.fixture
def setup(platform: EmbeddedPlatform) -> Setup:
    """Alice's space with a published agent and her session with it."""
    space = platform.admin.create_space(ALICE, "Team")
    agent, _ = platform.admin.create_agent(ALICE, space.space_id, "Helper", AGENT_CONFIG)
    platform.admin.publish(ALICE, space.space_id, agent.agent_id)
    session = platform.sessions.create_session(ALICE, space.space_id, agent.agent_id)
    return Setup(space.space_id, agent.agent_id, session.session_id)


def wait_for(check: Callable[[], Any], timeout: float = 20.0, what: str = "it") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def wait() -> Callable[..., Any]:
    return wait_for


# -- a real server on 127.0.0.1 -------------------------------------------------------


@dataclass
class Api:
    """A running ``ApiServer`` over the embedded platform, with users and their tokens:
    alice (owner of the space), bob (member), carol (admin), eve (no member)."""

    platform: EmbeddedPlatform
    url: str
    tokens: dict[str, str]
    space_id: str
    agent_id: str
    server: ApiServer
    clients: list[Client] = field(default_factory=list)

    def client(self, user: str | None) -> Client:
        """A client as ``user`` (None: no token); closed at the end of the test."""
        made = Client(self.url, self.tokens[user] if user else None)
        self.clients.append(made)
        return made


@pytest.fixture
def api(platform: EmbeddedPlatform) -> Iterator[Api]:
    app = build_app(platform.admin, platform.sessions, platform.tokens)
    server = ApiServer(app, platform.sessions).start()
    tokens = {user: platform.tokens.issue(user)[1] for user in ("alice", "bob", "carol", "eve")}
    space = platform.admin.create_space(ALICE, "Team")
    platform.admin.set_member(ALICE, space.space_id, "bob", "member")
    platform.admin.set_member(ALICE, space.space_id, "carol", "admin")
    agent, _ = platform.admin.create_agent(ALICE, space.space_id, "Helper", AGENT_CONFIG)
    platform.admin.publish(ALICE, space.space_id, agent.agent_id)
    made = Api(platform, server.url, tokens, space.space_id, agent.agent_id, server)
    try:
        yield made
    finally:
        for client in made.clients:
            client.close()
        server.close()


def stopped_view(client: Client, session_id: str, run_id: str,
                 wait: Callable[..., Any] = wait_for) -> Any:
    """The run's view once it stopped (not queued or running, and no longer driven)."""
    def stopped() -> Any:
        view = client.run(session_id, run_id)
        return view if view.status not in ("queued", "running") and not view.driven \
            else None

    return wait(stopped, what=f"run {run_id} to stop")
