"""The step Lambda observed end to end (moto, the real step service, a scripted model on
a local HTTP server): every JSON log line of every invocation carries the run's ids and
generation, one EMF line per invocation, and none of the run's texts leave the process."""

from __future__ import annotations

import json

from functional.aws.harness import ALICE, clients, drive, fake_credentials, open_bench
from moto import mock_aws

from agentloom_runtime.testing import ScriptedModel
from agentloom_runtime.testing.openai_server import OpenAICompatibleServer

from .conftest import PROVIDER_KEY

SECRET_NOTE = "the Zanzibar launch is on Friday"
QUESTION = f"Write my note down (key {PROVIDER_KEY})"
AGENT = {"prompt": "You work in the workspace.", "model": {"model": "scripted-model"},
         "tools": ["workspace", "workspace_command"]}


def test_every_step_invocation_is_logged_and_measured_without_content(
        monkeypatch, tmp_path, capsys) -> None:
    fake_credentials(monkeypatch)
    server = OpenAICompatibleServer([
        ScriptedModel.call("workspace_write", {"path": "note.txt", "content": SECRET_NOTE},
                           id="c1"),
        ScriptedModel.call("workspace_command", {"command": "cat note.txt > copy.txt"},
                           id="c2"),
        ScriptedModel.answer(f"Done: {SECRET_NOTE}"),
        ScriptedModel.verdict("complete")]).start()
    try:
        with mock_aws():
            aws = clients()
            machine = aws.sfn.create_state_machine(
                name="agentloom-test-run", roleArn="arn:aws:iam::123456789012:role/sfn",
                definition='{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}}'
            )["stateMachineArn"]
            bench = open_bench(aws, tmp_path, server.base_url, state_machine_arn=machine)
            try:
                bench.agent(AGENT)
                run, _ = bench.api.sessions.ask(ALICE, bench.session_id, QUESTION)
                capsys.readouterr()  # what the API did is not the step's
                replies = drive(bench, run.run_id)
            finally:
                bench.service.close()
    finally:
        server.stop()
    assert replies[-1]["status"] == "completed"
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines() if line.startswith("{")]
    emf = [line for line in lines if "_aws" in line]
    logs = [line for line in lines if "_aws" not in line]
    assert len(emf) == len(replies), "one EMF line per invocation"
    assert all(e["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "AgentLoom" for e in emf)
    steps = [line for line in logs if line["message"] == "step"]
    assert sum(sum(e["Steps"]) for e in emf) == len(steps), "one log line per engine step"
    assert len(steps) > len(replies), "an invocation runs a model call and its tools"
    for line in logs:
        assert (line["run_id"], line["session_id"], line["space_id"], line["generation"]) \
            == (run.run_id, bench.session_id, bench.space_id, 1), line
    everything = captured.out + captured.err
    for secret in (SECRET_NOTE, "Zanzibar", PROVIDER_KEY, QUESTION):
        assert secret not in everything
