"""Replay a run through the HTTP API (POST /sessions/{s}/runs/{r}/replay), against the
real embedded server: a 20-tool-call run (update_plan and workspace writes) replays to
the same records byte for byte without writing a file or calling the model; another
version diverges at step 1 (a changed system prompt) or where its compaction policy
first compacts (step 11); an unknown run is 404, a running one 409."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloom.api.client import ApiError, Client
from agentloom.cli import main
from agentloom.platform.domain import new_id
from agentloom_runtime.checkpoint.store import dumps
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.errors import ModelNotFound
from agentloom_runtime.testing import ScriptedModel

from .conftest import AGENT_CONFIG, USAGE, Api, Model, question_of, stopped_view

NOTES = 18  # workspace writes, between two plan updates: 20 tool calls
CONFIG: dict[str, Any] = {**AGENT_CONFIG, "tools": ["workspace"]}
PLAN = [{"id": "1", "title": "write the notes", "status": "in_progress"},
        {"id": "2", "title": "report", "status": "pending"}]


@dataclasses.dataclass
class NotesModel(Model):
    """``Q notes``: update_plan, NOTES workspace writes, update_plan, then the answer,
    judged by the tool results since the question (the same request, the same reply);
    other questions as the conftest's model answers them."""

    async def reply(self, request: ModelRequest) -> ModelResponse | str | ModelNotFound:
        question = question_of(request)
        if request.purpose != "action" or not question.startswith("Q notes"):
            return await super().reply(request)
        self.requests.append(request)
        messages = list(request.messages)
        asked = max(i for i, m in enumerate(messages) if m.get("content") == question)
        done = sum(1 for m in messages[asked:] if m.get("role") == "tool")
        if done == 0:
            reply = ScriptedModel.call("update_plan", {"steps": PLAN})
        elif done <= NOTES:
            reply = ScriptedModel.call("workspace_write", {
                "path": f"notes/{done}.md", "content": f"note {done}\n",
                "expected_sha256": ""})
        elif done == NOTES + 1:
            reply = ScriptedModel.call("update_plan", {"steps": [
                {**step, "status": "completed"} for step in PLAN]})
        else:
            return ModelResponse(content=f"Wrote {NOTES} notes.", usage=USAGE)
        return dataclasses.replace(reply, usage=USAGE)


@pytest.fixture
def model() -> Iterator[Model]:
    made = NotesModel()
    yield made
    made.open()


def _publish(api: Api, alice: Client, config: dict[str, Any]) -> int:
    draft = alice.draft(api.space_id, api.agent_id)
    alice.save_draft(api.space_id, api.agent_id, config, draft.revision)
    return alice.publish(api.space_id, api.agent_id).version.version


def _stored_digest(api: Api, run_id: str) -> tuple[str, int]:
    """The digest of the run's stored records, read here from the checkpoint store (every
    stream but meta: stream, seq and stored JSON text)."""
    store = api.platform.checkpoints
    head = store.load_head(run_id)
    assert head is not None
    sha, count = hashlib.sha256(), 0
    for name in sorted(head.body["streams"]):
        if name == "meta":
            continue
        for entry in store.read(run_id, name):
            sha.update(f"{name}\n{entry.seq}\n{dumps(entry.body)}\n".encode())
            count += 1
    return "sha256:" + sha.hexdigest(), count


def _replay(alice: Client, session_id: str, run_id: str, body: Any = None) -> Any:
    return alice.request("POST", f"/sessions/{session_id}/runs/{run_id}/replay",
                         json={} if body is None else body).json()


def test_a_20_step_run_replays_byte_for_byte_and_versions_diverge(
        api: Api, model: Model, wait: Callable[..., Any]) -> None:
    alice = api.client("alice")
    version = _publish(api, alice, CONFIG)
    session = alice.create_session(api.space_id, api.agent_id, version)
    run = alice.ask(session.session_id, "Q notes please")
    view = stopped_view(alice, session.session_id, run.run_id, wait)
    assert view.status == "completed", view
    sid, rid = session.session_id, run.run_id
    notes = Path(api.platform.home, "workspaces", "spaces", api.space_id, "agents",
                 api.agent_id, "sessions", sid, "main", "notes")
    assert len(list(notes.iterdir())) == NOTES
    for written in notes.iterdir():  # a replay that wrote a file would bring it back
        written.unlink()
    calls = len(model.requests)
    digest, count = _stored_digest(api, rid)
    assert count > 80  # system, task, 21 actions, 20 tool results: records and views

    same = _replay(alice, sid, rid)

    assert same["identical"] is True and same["diverged_at"] is None, same
    assert same["ended"] == "stopped" and same["status"] == "completed"
    assert same["steps"] == 2 * (NOTES + 2) + 2  # each call and its result, answer, review
    assert same["records"]["equal"] is True
    assert same["records"]["recorded_digest"] == same["records"]["replayed_digest"] == digest
    assert same["records"]["recorded"] == same["records"]["replayed"] == count
    assert (same["version"], same["recorded_version"], same["baseline"]) == \
        ("recorded", version, None)
    assert list(notes.iterdir()) == [] and len(model.requests) == calls  # no side effect

    # another version whose system prompt changed: the first request differs
    prompted = _publish(api, alice, {**CONFIG, "prompt": "You answer in haiku."})
    other = _replay(alice, sid, rid, {"version": prompted})
    assert other["baseline"]["identical"] is True
    assert other["identical"] is False and other["ended"] == "diverged"
    at = other["diverged_at"]
    assert (at["step"], at["model_call"], at["kind"]) == (1, 1, "request"), at
    assert set(at["diff"]) == {"system"}
    assert "-You answer questions." in at["diff"]["system"]
    assert "+You answer in haiku." in at["diff"]["system"]
    assert other["records"]["equal"] is False and other["records"]["first_difference"]

    # a compaction policy that compacts after 5 model steps: the same up to step 11
    policy = {**alice.draft(api.space_id, api.agent_id).config["context_policy"],
              "model_steps": 5}
    compacting = _publish(api, alice, {**CONFIG, "context_policy": policy})
    later = _replay(alice, sid, rid, {"version": compacting})
    at = later["diverged_at"]
    assert (at["step"], at["model_call"], at["purpose"]) == (11, 6, "compaction"), at
    assert at["diff"]["purpose"] == "action -> compaction"
    assert later["baseline"]["identical"] is True

    # the draft (now the compacting config) is evaluated the same way, by its admin
    drafted = _replay(alice, sid, rid, {"draft": True})
    assert drafted["version"] == "draft" and drafted["diverged_at"]["step"] == 11
    assert list(notes.iterdir()) == [] and len(model.requests) == calls
    assert json.dumps(same["records"]) and alice.run(sid, rid).status == "completed"


def test_unknown_running_and_bad_choices_are_refused_and_the_cli(
        api: Api, model: Model, wait: Callable[..., Any],
        capsys: pytest.CaptureFixture[str]) -> None:
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    sid = session.session_id
    for run_id in (new_id("run"), "nonsense"):
        with pytest.raises(ApiError) as missing:
            _replay(alice, sid, run_id)
        assert (missing.value.status, missing.value.code) == (404, "run_not_found")

    slow = alice.ask(sid, "Q slow one")
    wait(lambda: "Q slow one" in model.started, what="the slow run's model call")
    with pytest.raises(ApiError) as running:
        _replay(alice, sid, slow.run_id)
    assert (running.value.status, running.value.code) == (409, "run_running")
    model.open()
    assert stopped_view(alice, sid, slow.run_id, wait).status == "completed"

    for body, status, code in (({"version": 1, "draft": True}, 422,
                                "replay_choice_invalid"),
                               ({"version": 99}, 404, "version_not_found"),
                               ({"version": "1"}, 422, "validation_error")):
        with pytest.raises(ApiError) as refused:
            _replay(alice, sid, slow.run_id, body)
        assert refused.value.status == status, (body, refused.value)
        if code != "validation_error":
            assert refused.value.code == code
    bob = api.client("bob")  # a member of the space, not the session's creator
    with pytest.raises(ApiError) as foreign:
        _replay(bob, sid, slow.run_id)
    assert (foreign.value.status, foreign.value.code) == (404, "session_not_found")
    assert _replay(alice, sid, slow.run_id)["identical"] is True

    cli = ["--api", api.url, "--token", api.tokens["alice"], "replay", sid, slow.run_id]
    assert main(cli) == 0
    assert "with its own version: identical after 2 steps" in capsys.readouterr().out
    haiku = _publish(api, alice, {**AGENT_CONFIG, "prompt": "You answer in haiku."})
    assert main([*cli, "--version", str(haiku)]) == 3
    out = capsys.readouterr().out
    assert f"with version {haiku}: diverged at step 1 (model call 1)" in out
    assert "+You answer in haiku." in out
    assert main([*cli, "--draft", "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["diverged_at"]["step"] == 1
