"""The CLI against a deployment: ``agentloom --api URL --token T …`` on a real server on
127.0.0.1 (the ``api`` fixture), run in process: ask and follow, messages, events
(--follow long-polls), show, cancel, resume and resolve; errors as
``error (code): message`` with exit status 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentloom.cli import main

from .conftest import Api, Model

Wait = Callable[..., Any]
Capsys = pytest.CaptureFixture[str]


def cli(api: Api, *args: str, user: str | None = "alice") -> list[str]:
    token = ["--token", api.tokens[user]] if user else []
    return ["--api", api.url, *token, *args]


def test_ask_follows_the_run_then_messages_events_and_show(api: Api, capsys: Capsys) -> None:
    session = api.client("alice").create_session(api.space_id, api.agent_id).session_id
    assert main(cli(api, "ask", session, "Q what is up?")) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "Answer to: Q what is up?"
    assert any(" run.started " in line for line in out)  # the events, followed live
    run_id = api.client("alice").runs(session)[0].run_id

    assert main(cli(api, "messages", session, "--limit", "1", "--all")) == 0
    items = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [i["seq"] for i in items] == list(range(1, len(items) + 1))
    assert items[0]["kind"] == "user" and items[-1]["message"]["content"] == \
        "Answer to: Q what is up?"

    assert main(cli(api, "events", session, run_id, "--follow")) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["1", "run.started"] and "run.status" in lines[-1]

    assert main(cli(api, "show", session, run_id, "--json")) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "completed" and shown["answer"] == "Answer to: Q what is up?"
    assert main(cli(api, "show", session, run_id)) == 0
    text = capsys.readouterr().out.splitlines()
    assert "status: completed" in text and "Answer to: Q what is up?" in text

    assert main(["--api", api.url, "run", "--session", session, "--no-follow",
                 "--token", api.tokens["alice"], "Q again"]) == 0
    assert capsys.readouterr().out.startswith("run run_")


def test_the_token_from_the_environment_and_errors(api: Api, capsys: Capsys,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    session = api.client("alice").create_session(api.space_id, api.agent_id).session_id
    assert main(cli(api, "messages", session, user=None)) == 2
    assert capsys.readouterr().err.startswith("error (")  # no token: 401
    monkeypatch.setenv("AGENTLOOM_TOKEN", api.tokens["alice"])
    assert main(cli(api, "messages", session, user=None)) == 0
    assert main(cli(api, "show", session, "run_0123456789abcdef0123", user="eve")) == 2
    err = capsys.readouterr().err
    assert err.startswith("error (session_not_found): "), err  # not hers: 404, no data
    assert main(["--api", "http://127.0.0.1:9", "show", session, "run_x"]) == 2
    assert capsys.readouterr().err.startswith("error (unreachable): ")


def test_cancel_resume_and_resolve(api: Api, model: Model, wait: Wait,
                                   capsys: Capsys) -> None:
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id).session_id
    assert main(cli(api, "ask", session, "Q slow one", "--no-follow")) == 0
    slow = capsys.readouterr().out.split()[1]
    wait(lambda: "Q slow one" in model.started, what="the model call")
    assert main(cli(api, "cancel", session, slow, "--reason", "enough")) == 0
    cancelled = capsys.readouterr().out.splitlines()
    assert cancelled == [f"run {slow} cancelled",
                         f'  next: agentloom --api {api.url} ask {session} "a new question"']
    assert main(cli(api, "cancel", session, slow)) == 2
    assert capsys.readouterr().err.startswith("error (run_ended): ")

    assert main(cli(api, "ask", session, "Q hang please", "--no-follow")) == 0
    run_id = capsys.readouterr().out.split()[1]
    wait(lambda: "Q hang please" in model.started, what="the hanging call")
    api.platform.launcher.stop(run_id)  # the worker dies mid-call
    wait(lambda: alice.run(session, run_id).status == "interrupted", what="interrupted")
    assert main(cli(api, "resume", session, run_id)) == 3  # blocked: unknown model call
    out = capsys.readouterr().out
    assert f"run {run_id} blocked" in out and "way out: resolve" in out
    prefix = f"agentloom --api {api.url}"  # every printed command works as typed
    assert f"next: {prefix} resolve {session} {run_id} --send-again | --treat-as-failed" \
        in out.splitlines()
    said = [line for line in out.splitlines() if not line[:4].strip().isdigit()]  # events:
    assert "may be sent again" in said[0]  # the engine's text says what happened ...
    assert not any("`agentloom" in line for line in said)  # ... and names no command
    assert main(cli(api, "resolve", session, run_id, "--json")) == 0  # what is unknown
    shown = json.loads(capsys.readouterr().out)
    assert shown["unknown"]["verdicts"] == ["send_again", "treat_as_failed"]
    assert main(cli(api, "resolve", session, run_id)) == 0  # the same, for a person
    lines = capsys.readouterr().out.splitlines()
    assert f"  agentloom --api {api.url} resolve {session} {run_id} --send-again" in lines
    assert main(cli(api, "resolve", session, run_id, "--did-not-run")) == 2
    assert capsys.readouterr().err.startswith("error (verdict_not_applicable): ")
    model.open()
    assert main(cli(api, "resolve", session, run_id, "--send-again", "--note", "back")) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "Answer to: Q hang please"
    assert any(" run.resolved " in line for line in lines)


PRICED_AGENT = """agent_id: set-by-the-platform
name: Priced helper
prompt: You answer questions.
model: {model: test-model, input_price_per_million: 2.0, output_price_per_million: 8.0}
"""
STEP_COST = 10 * 2.0 / 1e6 + 5 * 8.0 / 1e6  # the fixture's usage: 10 in, 5 out


def test_agent_and_session_from_a_file_then_runs_sessions_and_show_with_cost(
        api: Api, capsys: Capsys, tmp_path: Path) -> None:
    agent_file = tmp_path / "agent.yaml"
    agent_file.write_text(PRICED_AGENT)
    assert main(cli(api, "agent", "create", str(agent_file))) == 0  # her one space
    made = capsys.readouterr().out.splitlines()
    agent_id = made[0].split()[1]
    assert made == [f"agent {agent_id} (Priced helper) in space {api.space_id}, version 1 "
                    "published",
                    f"  next: agentloom --api {api.url} session create --space "
                    f"{api.space_id} --agent {agent_id}"]
    assert main(cli(api, "session", "create", "--agent", agent_id, "--json")) == 0
    session = json.loads(capsys.readouterr().out)["session_id"]
    assert main(cli(api, "--json", "ask", session, "Q priced?")) == 0
    asked = json.loads(capsys.readouterr().out)  # one document: no event lines
    assert asked["status"] == "completed" and asked["answer"] == "Answer to: Q priced?"
    assert asked["cost"]["cost"] == pytest.approx(2 * STEP_COST)
    assert asked["next"] == [f'agentloom --api {api.url} ask {session} "a new question"']

    assert main(cli(api, "runs", session)) == 0
    _, row = capsys.readouterr().out.splitlines()
    assert row.split()[:6] == [asked["run_id"], session, "completed", "2", "30", "0.00012"]
    assert main(cli(api, "sessions", "--space", api.space_id, "--json")) == 0
    [listed] = json.loads(capsys.readouterr().out)["items"]
    assert (listed["session_id"], listed["runs"], listed["last_status"]) == \
        (session, 1, "completed")
    assert listed["usage"]["total_tokens"] == 30
    assert main(cli(api, "show", session, asked["run_id"])) == 0
    out = capsys.readouterr().out.splitlines()
    assert "usage: 2 model call(s), 30 tokens (20 in, 10 out), cost 0.00012" in out
    assert [line.split() for line in out if line.startswith("  m1-")] == [
        ["m1-1", "action", "main", "10", "5", "15", "0.00006"],
        ["m1-2", "verification", "main", "10", "5", "15", "0.00006"]]

    assert main(cli(api, "session", "create", "--agent-file", str(agent_file))) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(", version 1 published") and lines[1].startswith("session ses_")
    assert main(cli(api, "spaces", "--json")) == 0
    assert [s["space"]["space_id"] for s in json.loads(capsys.readouterr().out)["items"]] \
        == [api.space_id]
    assert main(cli(api, "agent", "create", str(agent_file), user="eve")) == 2
    assert capsys.readouterr().err.startswith("error (space_required): ")  # no space


def test_ask_following_a_run_that_is_interrupted_returns_with_its_way_out(
        api: Api, model: Model, wait: Wait, capsys: Capsys) -> None:
    """Issue 17: `agentloom --api URL ask` following a run whose worker died stops
    following (exit 3) and prints the resume command — it does not hang."""
    import threading

    session = api.client("alice").create_session(api.space_id, api.agent_id).session_id
    codes: list[int] = []
    asking = threading.Thread(target=lambda: codes.append(
        main(cli(api, "ask", session, "Q hang please"))), daemon=True)
    asking.start()
    wait(lambda: "Q hang please" in model.started, what="the model call")
    run_id = api.client("alice").runs(session)[0].run_id
    api.platform.launcher.stop(run_id)  # the worker dies mid-call
    asking.join(timeout=30)
    assert not asking.is_alive(), "ask kept following an interrupted run"
    assert codes == [3]
    out = capsys.readouterr().out.splitlines()
    assert f"run {run_id} interrupted; way out: resume" in out
    assert f"next: agentloom --api {api.url} resume {session} {run_id}" in out


def test_a_model_the_provider_does_not_have_names_the_model_setting_not_resume(
        api: Api, capsys: Capsys) -> None:
    """Issue 17: a provider's 404 for the model: way out `change_model`, and the next
    command is a new question after fixing the connection's (or the agent's) model —
    not a resume that would ask for the same model again."""
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id).session_id
    assert main(cli(api, "ask", session, "Q no such model")) == 3
    out = capsys.readouterr().out.splitlines()
    run_id = alice.runs(session)[0].run_id
    assert alice.run(session, run_id).way_out == "change_model"
    assert any(line.startswith(f"run {run_id} blocked (model_not_found: model provider "
                               "answered HTTP 404") for line in out), out
    nexts = [line for line in out if line.startswith("next: ")]
    assert nexts == [f'next: agentloom --api {api.url} ask {session} "the question again"   '
                     "(after fixing the model of the agent's model connection, or the "
                     "agent's model.model and publishing it: the provider has no such "
                     "model, and this run keeps the one it started with)"], nexts
