"""The CLI against a deployment: ``agentloom --api URL --token T …`` on a real server on
127.0.0.1 (the ``api`` fixture), run in process: ask and follow, messages, events
(--follow long-polls), show, cancel, resume and resolve; errors as
``error (code): message`` with exit status 2."""

from __future__ import annotations

import json
from collections.abc import Callable
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

    assert main(cli(api, "show", session, run_id)) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "completed" and shown["answer"] == "Answer to: Q what is up?"

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
    assert capsys.readouterr().out.strip() == f"run {slow} cancelled"
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
    assert main(cli(api, "resolve", session, run_id)) == 0  # what is unknown
    shown = json.loads(capsys.readouterr().out)
    assert shown["unknown"]["verdicts"] == ["send_again", "treat_as_failed"]
    assert main(cli(api, "resolve", session, run_id, "--did-not-run")) == 2
    assert capsys.readouterr().err.startswith("error (verdict_not_applicable): ")
    model.open()
    assert main(cli(api, "resolve", session, run_id, "--send-again", "--note", "back")) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "Answer to: Q hang please"
    assert any(" run.resolved " in line for line in lines)
