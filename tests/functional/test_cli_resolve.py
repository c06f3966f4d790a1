"""Issue 9: a run blocked on an unknown outcome has a way out through the CLI —
``agentloom resolve`` says what is unknown and records the operator's verdict, ``show``
names the operation and the exact next command. Commands are killed in the bubblewrap
sandbox; model requests are left hanging on the local OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e.cli_harness import (
    HELLO,
    Live,
    cli,
    conversation,
    has_bwrap,
    markers,
    provider_env,
    request_problems,
    state_dir,
    verdicts,
    wait_until,
    workspace,
    write_agent,
)

from agentloom_runtime.testing import Disconnect, OpenAICompatibleServer, Raw

needs_sandbox = pytest.mark.skipif(not has_bwrap(), reason="needs bubblewrap")

# the first command run touches `first` and hangs; a run again appends to log.txt
COMMAND = ("if [ -e first ]; then echo again >> log.txt; "
           "else touch first; echo ran >> log.txt; sleep 30; fi")
REPLIES: list[dict[str, Any]] = [
    {"call": {"name": "workspace_command", "arguments": {"command": COMMAND}}},
    {"answer": "done"}]


def _logged(log: Path) -> bool:
    return log.exists() and log.read_text().endswith("\n")


def _killed_in_a_command(home: Path, folder: Path) -> str:
    """Run until the command hangs in the sandbox, SIGKILL: the run is still stored as
    running, its driver gone."""
    agent = write_agent(folder, agent_id="ops", demo_replies=REPLIES)
    live = Live(home, "run", "--agent", str(agent), "go")
    log = workspace(home, "ops") / "log.txt"
    # the line is written (not only the file created) before the kill
    assert wait_until(lambda: _logged(log) and bool(markers(home)), 30), live.lines
    live.kill()
    live.finish()
    run_id = live.run_id
    assert run_id
    return run_id


def _blocked_on_a_command(home: Path, folder: Path) -> str:
    """Run until the command hangs in the sandbox, SIGKILL, resume: blocked."""
    run_id = _killed_in_a_command(home, folder)
    resumed = cli(home, "resume", run_id)
    assert resumed.returncode == 3, resumed.stdout + resumed.stderr
    assert "■ blocked (tool_outcome_unknown)" in resumed.stdout
    assert f"next: agentloom --home {home} resolve {run_id} --ran | --did-not-run | " \
           "--run-again" in resumed.stdout
    return run_id


@needs_sandbox
def test_resolve_without_a_verdict_shows_what_is_unknown_and_the_verdicts(
        tmp_path: Path) -> None:
    with state_dir() as home:
        run_id = _blocked_on_a_command(home, tmp_path)
        shown = cli(home, "resolve", run_id)
        assert shown.returncode == 0, shown.stderr
        text = shown.stdout
        assert f"unknown outcome: command workspace_command ({run_id}.main." in text
        assert "command: if [ -e first ]" in text and "started: " in text
        assert "execution marker: present" in text and "owner process alive: no" in text
        for flag in ("--ran [--output TEXT | --output-file PATH] [--exit-code N]",
                     "--did-not-run", "--run-again"):
            assert f"agentloom --home {home} resolve {run_id} {flag}" in text
        assert "send_again" not in text and "ran=" not in text  # CLI words only


@needs_sandbox
def test_show_names_the_unknown_operation_and_the_next_command(tmp_path: Path) -> None:
    with state_dir() as home:
        run_id = _blocked_on_a_command(home, tmp_path)
        shown = cli(home, "show", run_id)
        assert shown.returncode == 0, shown.stderr
        assert "status: blocked (tool_outcome_unknown" in shown.stdout
        assert "unknown outcome: command workspace_command" in shown.stdout
        assert f"next: agentloom --home {home} resolve {run_id} --ran | --did-not-run" \
               in shown.stdout


@needs_sandbox
def test_resolve_ran_records_the_verdict_and_finishes_the_run(tmp_path: Path) -> None:
    with state_dir() as home:
        run_id = _blocked_on_a_command(home, tmp_path)
        output = tmp_path / "seen.txt"
        output.write_text("ran\n")
        done = cli(home, "resolve", run_id, "--ran", "--output-file", str(output),
                   "--exit-code", "0", "--note", "log.txt has the line", "--by", "ada")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "✓ verdict --ran recorded (by ada)" in done.stdout
        assert "■ completed" in done.stdout
        assert (workspace(home, "ops") / "log.txt").read_text() == "ran\n"  # not re-run
        [record] = verdicts(home, run_id)
        assert (record["verdict"], record["by"], record["note"], record["output"],
                record["exit_code"]) == ("ran", "ada", "log.txt has the line", "ran\n", 0)
        assert markers(home) == []  # released with the verdict


@needs_sandbox
def test_resolve_run_again_reruns_the_command_once(tmp_path: Path) -> None:
    with state_dir() as home:
        run_id = _blocked_on_a_command(home, tmp_path)
        done = cli(home, "resolve", run_id, "--run-again", "--note", "explicit re-run")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "■ completed" in done.stdout
        assert (workspace(home, "ops") / "log.txt").read_text() == "ran\nagain\n"


@needs_sandbox
def test_resolve_did_not_run_tells_the_model_and_goes_on(tmp_path: Path) -> None:
    with state_dir() as home:
        run_id = _blocked_on_a_command(home, tmp_path)
        done = cli(home, "resolve", run_id, "--did-not-run", "--no-continue")
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"continue with `agentloom --home {home} resume {run_id}`" in done.stdout
        assert "■" not in done.stdout  # recorded only
        resumed = cli(home, "resume", run_id)
        assert resumed.returncode == 0 and "■ completed" in resumed.stdout, resumed.stdout
        assert "operator_did_not_run" in cli(home, "show", run_id).stdout


@needs_sandbox
def test_a_verdict_that_does_not_apply_is_refused(tmp_path: Path) -> None:
    with state_dir() as home:
        run_id = _blocked_on_a_command(home, tmp_path)
        refused = cli(home, "resolve", run_id, "--send-again")
        assert refused.returncode == 2
        assert refused.stderr.startswith("error (verdict_not_applicable): --send-again "
                                         "does not apply to a command")
        assert "--ran | --did-not-run | --run-again" in refused.stderr
        assert verdicts(home, run_id) == []


@needs_sandbox
def test_resolve_on_a_killed_run_records_the_verdict_in_one_step(tmp_path: Path) -> None:
    """No resume first: the new execution blocks on the command at once, the verdict is
    recorded, the run goes on."""
    with state_dir() as home:
        run_id = _killed_in_a_command(home, tmp_path)
        assert "interrupted: no process drives it" in cli(home, "show", run_id).stdout
        done = cli(home, "resolve", run_id, "--ran", "--output", "ran", "--by", "ada")
        assert done.returncode == 0, done.stdout + done.stderr
        text = done.stdout
        assert f"▶ resuming run {run_id} (execution 2)" in text
        assert "■ blocked (tool_outcome_unknown): command" in text
        assert "next:" not in text.split("✓ verdict")[0]  # it is being resolved
        assert "✓ verdict --ran recorded (by ada)" in text and "■ completed" in text
        assert (workspace(home, "ops") / "log.txt").read_text() == "ran\n"  # not re-run
        [record] = verdicts(home, run_id)
        assert (record["verdict"], record["by"], record["output"]) == ("ran", "ada", "ran")
        assert markers(home) == []


@needs_sandbox
def test_resolve_without_a_verdict_on_a_killed_run_shows_what_is_unknown(
        tmp_path: Path) -> None:
    with state_dir() as home:
        run_id = _killed_in_a_command(home, tmp_path)
        shown = cli(home, "resolve", run_id)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        text = shown.stdout
        assert f"unknown outcome: command workspace_command ({run_id}.main." in text
        assert "execution marker: present" in text and "owner process alive: no" in text
        assert f"agentloom --home {home} resolve {run_id} --run-again" in text
        assert "next:" not in text  # the verdicts are the next commands
        assert verdicts(home, run_id) == []
        again = cli(home, "resolve", run_id, "--run-again")
        assert again.returncode == 0, again.stdout + again.stderr
        assert "■ completed" in again.stdout
        assert (workspace(home, "ops") / "log.txt").read_text() == "ran\nagain\n"


def test_resolve_on_a_run_killed_between_steps_says_to_resume_it() -> None:
    """Nothing was in flight: nothing is unknown, and nothing is taken (no new
    execution) — the way out is resume."""
    with state_dir() as home:
        live = Live(home, "run", "--agent", str(HELLO / "agent.yaml"), "--pause", "5",
                    "Write release notes")
        assert live.line("← update_plan"), live.lines
        live.kill()
        live.finish()
        run_id = live.run_id
        assert run_id
        for verdict in ([], ["--ran"]):
            refused = cli(home, "resolve", run_id, *verdict)
            assert refused.returncode == 2, refused.stdout + refused.stderr
            assert refused.stderr.startswith("error (nothing_to_resolve)"), refused.stderr
            assert f"Next: `agentloom --home {home} resume {run_id}`" in refused.stderr
            assert "resuming" not in refused.stdout
        done = cli(home, "resume", run_id)
        assert done.returncode == 0 and "(execution 2)" in done.stdout, done.stdout


def _hanging_model_request(home: Path, folder: Path) -> tuple[str, OpenAICompatibleServer]:
    respond = conversation([("workspace_list", {"path": "."})], "all listed")
    server = OpenAICompatibleServer([Raw(delay=60, body={}), *[respond] * 10],
                                    api_key="sk-crash-test").start()
    agent = write_agent(folder, agent_id="ops", base_url=server.base_url)
    live = Live(home, "run", "--agent", str(agent), "list the files", env=provider_env())
    assert wait_until(lambda: len(server.received) == 1, 30), live.lines
    live.kill()
    live.finish()
    assert live.run_id
    return live.run_id, server


def test_resolve_send_again_resends_the_model_request(tmp_path: Path) -> None:
    with state_dir() as home:
        run_id, server = _hanging_model_request(home, tmp_path)
        try:
            resumed = cli(home, "resume", run_id, env=provider_env())
            assert resumed.returncode == 3
            assert "■ blocked (model_outcome_unknown)" in resumed.stdout
            for command in (f"resolve {run_id} --send-again | --treat-as-failed",
                            f"resume {run_id} --retry-unknown-models"):
                assert f"next: agentloom --home {home} {command}" in resumed.stdout
            shown = cli(home, "resolve", run_id, env=provider_env())
            assert "unknown outcome: model request" in shown.stdout
            assert "the request was sent; no response was saved" in shown.stdout
            assert len(server.received) == 1  # describing sends nothing
            done = cli(home, "resolve", run_id, "--send-again", env=provider_env())
            assert done.returncode == 0, done.stdout + done.stderr
            assert "■ completed" in done.stdout and "all listed" in done.stdout
            assert len(server.received) == 4  # the request again, the answer, the review
            assert request_problems(server.bodies) == []
        finally:
            server.stop()


def test_resolve_treat_as_failed_ends_the_run(tmp_path: Path) -> None:
    with state_dir() as home:
        run_id, server = _hanging_model_request(home, tmp_path)
        try:
            cli(home, "resume", run_id, env=provider_env())
            done = cli(home, "resolve", run_id, "--treat-as-failed", "--note", "provider down",
                       env=provider_env())
            assert done.returncode == 3, done.stdout + done.stderr
            assert "■ failed: the operator treated model call" in done.stdout
            assert f'next: agentloom --home {home} run --agent AGENT.yaml "a new question"' \
                in done.stdout  # failed is final
            assert len(server.received) == 1
            again = cli(home, "resolve", run_id, env=provider_env())
            assert again.returncode == 2
            assert again.stderr.startswith("error (nothing_to_resolve)")
            ended = cli(home, "resume", run_id, env=provider_env())  # failed is final
            assert ended.returncode == 3, ended.stdout + ended.stderr
            assert ended.stdout.startswith("■ failed: the operator treated model call")
            assert f"(run {run_id} ended; it cannot be resumed)" in ended.stdout
            assert f'next: agentloom --home {home} run --agent AGENT.yaml "a new ' \
                'question"' in ended.stdout
            [record] = verdicts(home, run_id)
            assert (record["verdict"], record["note"]) == ("treat_as_failed", "provider down")
        finally:
            server.stop()


def test_send_again_on_a_killed_run_takes_one_step(tmp_path: Path) -> None:
    with state_dir() as home:
        run_id, server = _hanging_model_request(home, tmp_path)
        try:
            shown = cli(home, "resolve", run_id, env=provider_env())
            assert shown.returncode == 0, shown.stdout + shown.stderr
            assert "unknown outcome: model request" in shown.stdout
            assert len(server.received) == 1  # describing sends nothing
            done = cli(home, "resolve", run_id, "--send-again", env=provider_env())
            assert done.returncode == 0, done.stdout + done.stderr
            assert "✓ verdict --send-again recorded" in done.stdout
            assert "■ completed" in done.stdout and "all listed" in done.stdout
            assert len(server.received) == 4  # the request again, the answer, the review
            assert request_problems(server.bodies) == []
        finally:
            server.stop()


def test_resume_retry_unknown_models_is_the_same_as_send_again(tmp_path: Path) -> None:
    with state_dir() as home:
        run_id, server = _hanging_model_request(home, tmp_path)
        try:
            done = cli(home, "resume", run_id, "--retry-unknown-models", env=provider_env())
            assert done.returncode == 0, done.stdout + done.stderr
            assert "■ completed" in done.stdout
            assert request_problems(server.bodies) == []
        finally:
            server.stop()


def test_a_request_sent_without_a_response_names_the_one_command_that_moves_it(
        tmp_path: Path) -> None:
    """Issue 17: a transport error after the request was sent (the provider closed the
    connection) is an unknown outcome at once: the run names `resolve --send-again |
    --treat-as-failed`, not a `resume` that would only lead there; one command moves it."""
    respond = conversation([], "answered")
    with state_dir() as home, OpenAICompatibleServer([Disconnect(), respond, respond],
                                                     api_key="sk-crash-test") as server:
        agent = write_agent(tmp_path, agent_id="ops", base_url=server.base_url)
        done = cli(home, "run", "--agent", str(agent), "go", env=provider_env())
        assert done.returncode == 3, done.stdout + done.stderr
        run_id = done.stdout.split("▶ run ")[1].split()[0]
        assert "■ blocked (model_outcome_unknown): model request m1-1 was sent but no " \
               "response was received (RemoteProtocolError)" in done.stdout
        nexts = [ln.strip() for ln in done.stdout.splitlines() if "next:" in ln]
        assert f"next: agentloom --home {home} resolve {run_id} --send-again | " \
               "--treat-as-failed" in nexts
        assert f"next: agentloom --home {home} resume {run_id}" not in nexts
        again = cli(home, "resolve", run_id, "--send-again", env=provider_env())
        assert again.returncode == 0, again.stdout + again.stderr
        assert "✓ verdict --send-again recorded" in again.stdout
        assert "■ completed" in again.stdout and "answered" in again.stdout
        assert len(server.received) == 3 and request_problems(server.bodies) == []


@needs_sandbox
def test_a_run_again_verdict_appears_in_show(tmp_path: Path) -> None:
    """Issue 17: a `--run-again` leaves no tool result of its own; `show` lists every
    verdict of the run's log after the transcript (and `--json show` as `verdicts`)."""
    with state_dir() as home:
        run_id = _blocked_on_a_command(home, tmp_path)
        done = cli(home, "resolve", run_id, "--run-again", "--note", "explicit re-run",
                   "--by", "ada")
        assert done.returncode == 0, done.stdout + done.stderr
        shown = cli(home, "show", run_id)
        assert shown.returncode == 0, shown.stderr
        [line] = [ln for ln in shown.stdout.splitlines() if ln.startswith("[verdict]")]
        assert line.startswith("[verdict] --run-again by ada at ")
        assert f" on command {run_id}.main." in line and line.endswith(": explicit re-run")
        doc = json.loads(cli(home, "--json", "show", run_id).stdout)
        assert [(v["verdict"], v["by"]) for v in doc["verdicts"]] == [("run_again", "ada")]
