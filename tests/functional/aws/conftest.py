"""Fixtures of the AWS functional tests: moto in-process and the test bench."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from functional.aws.harness import (
    REGION,
    Bench,
    clients,
    fake_credentials,
    open_bench,
    pass_machine,
)
from moto import mock_aws

from agentloom_runtime.testing.openai_server import OpenAICompatibleServer

PLAN_OPEN = {"steps": [{"id": "1", "title": "write notes", "status": "in_progress"},
                       {"id": "2", "title": "copy them", "status": "pending"}]}
PLAN_DONE = {"steps": [{"id": "1", "title": "write notes", "status": "completed"},
                       {"id": "2", "title": "copy them", "status": "completed"}]}
AGENT = {"prompt": "You work in the workspace.", "model": {"model": "scripted-model"},
         "tools": ["workspace", "workspace_command"], "mode": "plan"}


def plan_script() -> list[Any]:
    """A plan, file tools, a workspace_command, completion."""
    from agentloom_runtime.testing import ScriptedModel

    return [
        ScriptedModel.call("update_plan", PLAN_OPEN, id="c1"),
        ScriptedModel.call("workspace_write", {"path": "notes.txt", "content": "hello\n"},
                           id="c2"),
        ScriptedModel.call("workspace_command", {"command": "cat notes.txt > copy.txt"},
                           id="c3"),
        ScriptedModel.call("workspace_read", {"path": "copy.txt"}, id="c4"),
        ScriptedModel.call("update_plan", PLAN_DONE, id="c5"),
        ScriptedModel.answer("Copied the notes."),
        ScriptedModel.verdict("complete"),
    ]


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_credentials(monkeypatch)


@pytest.fixture
def model_server() -> Iterator[OpenAICompatibleServer]:
    server = OpenAICompatibleServer(plan_script()).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def bench(aws_env: None, tmp_path: Path,
          model_server: OpenAICompatibleServer) -> Iterator[Bench]:
    """Moto without the Step Functions interpreter: executions are recorded, not run;
    the test drives the steps (``harness.drive``)."""
    with mock_aws():
        aws = clients()
        machine = pass_machine(aws)
        made = open_bench(aws, tmp_path, model_server.base_url, state_machine_arn=machine)
        made.agent(AGENT)
        assert REGION
        try:
            yield made
        finally:
            made.service.close()
