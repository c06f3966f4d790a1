"""The embedded CLI at parity with the API for what a user does every day: list the
sessions and runs of a state directory (status, tokens, cost), ``show`` with tokens and
cost per step, a session created for an agent file, ``--json`` for scripts,
``--version``; the printed next commands name the program and ``--home`` as given.

The model is the real HTTP gateway against a local OpenAI-compatible server that reports
usage; the agent's model carries prices, so every cost below is computed, not stored."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloom.cli import main
from agentloom_runtime.contracts import ModelResponse
from agentloom_runtime.testing import OpenAICompatibleServer, ScriptedModel

Capsys = pytest.CaptureFixture[str]
USAGE = {"prompt_tokens": 1000, "completion_tokens": 250, "total_tokens": 1250}
REVIEW = {"prompt_tokens": 400, "completion_tokens": 100, "total_tokens": 500}
# 2.0 per million in, 8.0 per million out
ACTION_COST = 1000 * 2.0 / 1e6 + 250 * 8.0 / 1e6  # 0.004
REVIEW_COST = 400 * 2.0 / 1e6 + 100 * 8.0 / 1e6  # 0.0016
AGENT = """agent_id: {agent_id}
name: Priced agent
prompt: Answer briefly.
model:
  dialect: openai
  model: scripted-model
  context_window: 32768
  max_output_tokens: 1024
  input_price_per_million: 2.0
  output_price_per_million: 8.0
mode: react
tools: []
"""


def _agent(folder: Path, agent_id: str = "priced") -> str:
    path = folder / f"{agent_id}.yaml"
    path.write_text(AGENT.format(agent_id=agent_id))
    return str(path)


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAICompatibleServer]:
    """Answers three questions, each reviewed once."""
    answer = ModelResponse(content="The answer.", usage=USAGE)
    review = ModelResponse(content=ScriptedModel.verdict("complete").content, usage=REVIEW)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-listing-test")
    monkeypatch.delenv("AGENTLOOM_PROG", raising=False)
    with OpenAICompatibleServer([answer, review] * 3) as server:
        yield server


def _ask(home: Path, agent: str, server: OpenAICompatibleServer, *extra: str) -> list[str]:
    return ["--home", str(home), "run", "--agent", agent, "--provider", "openai",
            "--base-url", server.base_url, *extra]


def _json(capsys: Capsys) -> Any:
    return json.loads(capsys.readouterr().out)  # one document, nothing else


def test_runs_and_sessions_list_status_tokens_and_cost(
        tmp_path: Path, model: OpenAICompatibleServer, capsys: Capsys) -> None:
    home, agent = tmp_path / "home", _agent(tmp_path)
    for session in ("notes", "notes", "cli"):
        assert main(_ask(home, agent, model, "--session", session, "Q?")) == 0
    capsys.readouterr()

    assert main(["--home", str(home), "runs", "--json"]) == 0
    runs = _json(capsys)["items"]
    assert [r["session_id"] for r in runs] == ["notes", "notes", "cli"]
    for run in runs:
        assert run["status"] == "completed"
        assert run["usage"]["total_tokens"] == 1750 and run["usage"]["calls"] == 2
        assert run["cost"]["cost"] == pytest.approx(ACTION_COST + REVIEW_COST)

    assert main(["--home", str(home), "runs", "--session", "cli"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["RUN", "SESSION", "STATUS", "CALLS", "TOKENS", "COST",
                              "CREATED"]
    assert row.split()[:6] == [runs[2]["run_id"], "cli", "completed", "2", "1,750", "0.0056"]

    assert main(["--json", "--home", str(home), "sessions"]) == 0  # --json before, too
    sessions = {s["session_id"]: s for s in _json(capsys)["items"]}
    assert sessions["notes"]["runs"] == 2 and sessions["cli"]["runs"] == 1
    assert sessions["notes"]["usage"]["total_tokens"] == 3500
    assert sessions["notes"]["last_status"] == "completed"
    assert sessions["notes"]["agent_id"] == "priced" and not sessions["notes"]["active_run"]
    assert "driver" not in sessions["notes"]  # the lease holder stays the platform's
    assert main(["--home", str(home), "sessions"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["SESSION", "AGENT", "RUNS"]
    assert [line.split()[:4] for line in lines[1:]] == [
        ["notes", "priced", "v1", "2"], ["cli", "priced", "v1", "1"]]

    assert main(["--home", str(home), "runs", "--session", "nope"]) == 2
    assert capsys.readouterr().err.startswith("error (session_not_found): ")


def test_show_prints_tokens_and_cost_per_step(tmp_path: Path, model: OpenAICompatibleServer,
                                              capsys: Capsys) -> None:
    home, agent = tmp_path / "home", _agent(tmp_path)
    assert main(_ask(home, agent, model, "Q?")) == 0
    run_id = capsys.readouterr().out.split("▶ run ")[1].split()[0]

    assert main(["--home", str(home), "show", run_id]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "status: completed" in out
    assert "usage: 2 model call(s), 1,750 tokens (1,400 in, 350 out), cost 0.0056" in out
    steps = [line.split() for line in out if line.startswith("  m")]
    assert steps == [["m1-1", "action", "main", "1,000", "250", "1,250", "0.004"],
                     ["m1-2", "verification", "main", "400", "100", "500", "0.0016"]]
    assert out[-1] == f'next: agentloom --home {home} run --agent AGENT.yaml "a new question"'

    assert main(["--home", str(home), "show", run_id, "--json"]) == 0
    shown = _json(capsys)
    assert shown["status"] == "completed" and shown["answer"] == "The answer."
    assert [(s["purpose"], s["total_tokens"]) for s in shown["cost"]["steps"]] == [
        ("action", 1250), ("verification", 500)]
    assert shown["cost"]["steps"][0]["cost"] == pytest.approx(ACTION_COST)
    assert any("The answer." in line for line in shown["transcript"])


def test_json_run_prints_one_document_instead_of_the_transcript(
        tmp_path: Path, model: OpenAICompatibleServer, capsys: Capsys) -> None:
    home, agent = tmp_path / "home", _agent(tmp_path)
    assert main(_ask(home, agent, model, "--json", "Q?")) == 0
    done = _json(capsys)
    assert done["status"] == "completed" and done["answer"] == "The answer."
    assert done["session_id"] == "cli" and done["cost"]["calls"] == 2
    assert done["next"] == [f'agentloom --home {home} run --agent AGENT.yaml '
                            '"a new question"']
    assert main(["--home", str(home), "--json", "resume", done["run_id"]]) == 0
    assert _json(capsys)["run_id"] == done["run_id"]  # an ended run: the same document
    assert main(["--home", str(home), "--json", "show", "no-such-run"]) == 2
    assert _json(capsys)["error"]["code"] == "config_error"


def test_a_session_created_for_an_agent_file_belongs_to_that_agent(
        tmp_path: Path, model: OpenAICompatibleServer, capsys: Capsys,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOOM_PROG", "bin/agentloom")
    home, agent, other = tmp_path / "home", _agent(tmp_path), _agent(tmp_path, "other")
    made = ["--home", str(home), "session", "create", "--agent", agent, "--session", "notes",
            "--title", "Release notes"]
    assert main(made) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["session notes (agent priced v1)",
                   f'  next: bin/agentloom --home {home} run --agent {agent} --session notes '
                   '"a question"']
    assert main(made) == 2
    assert capsys.readouterr().err.startswith("error (session_exists): ")

    assert main(_ask(home, other, model, "--session", "notes", "Q?")) == 2
    assert "session 'notes' belongs to agent 'priced'" in capsys.readouterr().err
    assert main(_ask(home, agent, model, "--session", "notes", "Q?")) == 0
    capsys.readouterr()
    assert main(["--home", str(home), "sessions", "--json"]) == 0
    [session] = _json(capsys)["items"]
    assert (session["session_id"], session["title"], session["runs"]) == \
        ("notes", "Release notes", 1)

    assert main(["--home", str(home), "--json", "session", "create", "--agent", agent]) == 0
    generated = _json(capsys)
    assert generated["session_id"].startswith("s-") and generated["agent_id"] == "priced"
    assert main(["--home", str(home), "agent", "create", agent]) == 2
    assert "error (deployment_only): " in capsys.readouterr().err


def test_version_prints_the_installed_version(capsys: Capsys) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"agentloom {version('agentloom')}\n"
