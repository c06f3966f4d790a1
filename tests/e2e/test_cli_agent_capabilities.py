"""The CLI runs an agent file the way the API runs a published version: its Skills, MCP
tools and knowledge bases are looked up in the home's capability set (the one
``agentloom serve`` uses), never silently dropped — a skill the home does not hold is
refused before the run starts, naming it."""

from __future__ import annotations

from pathlib import Path

from e2e.cli_harness import cli

AGENT = """\
agent_id: hello
name: Hello agent
prompt: hi
model: {dialect: openai, model: gpt-4o-mini, context_window: 128000, max_output_tokens: 4096}
mode: react
tools: [workspace]
skills: ["pdf-tools@sha256:%s"]
context_policy: {}
""" % ("0" * 64)


def test_an_agent_file_binding_a_missing_skill_is_refused_naming_it(tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(AGENT)
    demo = Path(__file__).parents[2] / "docs/examples/hello/demo-script.yaml"
    (tmp_path / "demo-script.yaml").write_text(demo.read_text())
    done = cli(tmp_path / "home", "run", "--agent", str(agent), "hi")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "skill pdf-tools" in done.stderr and "missing" in done.stderr
    assert "tool_not_found" not in done.stdout + done.stderr
