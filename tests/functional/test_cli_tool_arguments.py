"""Issue 17: tool-call arguments the tool runtime refuses, through the real CLI, gateway
and local OpenAI-compatible server — a path with a lone surrogate is refused (no
``\\ufffd.txt`` is made up), and later requests carry the failure the call got in
place of argument text a provider may refuse (not JSON, invalid Unicode)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from e2e.cli_harness import cli, provider_env, request_problems, state_dir, workspace, write_agent

from agentloom_runtime.contracts import ModelRequest, ModelResponse, ToolCall
from agentloom_runtime.testing import OpenAICompatibleServer, ScriptedModel


def calling(arguments: str) -> Any:
    """One ``workspace_write`` call with ``arguments`` as its text, then an answer."""
    def respond(request: ModelRequest) -> ModelResponse:
        first = str(request.messages[0].get("content") or "") if request.messages else ""
        if first.startswith("You review"):
            return ScriptedModel.verdict("complete", "the evidence supports it")
        if any(m.get("role") == "tool" for m in request.messages):
            return ScriptedModel.answer("done")
        return ModelResponse(tool_calls=(ToolCall("call_0", "workspace_write", arguments),))
    return respond


def _run(tmp_path: Path, home: Path, arguments: str) -> tuple[str, list[Any]]:
    respond = calling(arguments)
    with OpenAICompatibleServer([respond] * 3, api_key="sk-crash-test") as server:
        agent = write_agent(tmp_path, agent_id="ops", base_url=server.base_url,
                            tools=("workspace",))
        done = cli(home, "run", "--agent", str(agent), "write it", env=provider_env())
        bodies = server.bodies
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, bodies


def _sent_back(bodies: list[Any]) -> list[str]:
    """The argument texts of the assistant's calls in the requests after the first."""
    return [c["function"]["arguments"] for body in bodies[1:]
            for m in body["messages"] for c in m.get("tool_calls") or ()]


def test_a_path_with_a_lone_surrogate_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    with state_dir() as home:
        arguments = json.dumps({"path": "\udc80.txt", "content": "x"})  # "\\udc80" escape
        out, bodies = _run(tmp_path, home, arguments)
        [line] = [ln for ln in out.splitlines() if "← workspace_write" in ln]
        assert line.startswith("  ← workspace_write [error] tool_arguments_invalid: "
                               "arguments hold invalid Unicode (a lone surrogate"), line
        made = [p.name for p in workspace(home, "ops").rglob("*") if p.is_file()]
        assert not [name for name in made if "\ufffd" in name or name.endswith(".txt")], made
        sent = _sent_back(bodies)
        assert sent and all("\\udc80" not in text and "\ufffd" not in text for text in sent)
        assert json.loads(sent[0])["error"]["code"] == "tool_arguments_invalid"
        assert request_problems(bodies) == []


def test_invalid_json_tool_arguments_are_not_sent_back_to_the_provider(
        tmp_path: Path) -> None:
    with state_dir() as home:
        out, bodies = _run(tmp_path, home, '{"path": "notes.md", "content": "x"')
        assert "← workspace_write [error] tool_arguments_invalid: arguments are not valid " \
               "JSON" in out
        sent = _sent_back(bodies)
        assert sent, bodies
        for text in sent:  # what the run recorded as the failure, not the raw text
            failure = json.loads(text)["error"]
            assert failure["code"] == "tool_arguments_invalid"
            assert failure["message"].startswith("arguments are not valid JSON")
        assert request_problems(bodies) == []
