"""Issue 9: ``agentloom resume`` of a run that already ended resumes nothing — a
completed run prints its outcome (exit 0), a failed or cancelled one says so and names
the way out, a new question (exit 3; see also ``test_cli_resolve`` and
``test_cli_signals``)."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.cli_harness import HELLO, KEY, cli, provider_env, state_dir, write_agent

from agentloom_runtime.testing import OpenAICompatibleServer, Raw
from agentloom_runtime.testing.openai_server import error_body

AGENT = str(HELLO / "agent.yaml")


def test_resume_of_a_completed_run_prints_its_outcome() -> None:
    with state_dir() as home:
        done = cli(home, "run", "--agent", AGENT, "Write release notes")
        assert done.returncode == 0, done.stdout + done.stderr
        run_id = done.stdout.split("▶ run ")[1].split()[0]
        again = cli(home, "resume", run_id)
        assert again.returncode == 0, again.stdout + again.stderr
        assert again.stdout.startswith(f"■ completed (run {run_id} had already completed; "
                                       "nothing to resume)")
        assert "I wrote notes/release.md in the workspace" in again.stdout  # the answer
        assert "▶ resuming" not in again.stdout and again.stderr == ""
        shown = cli(home, "show", run_id)
        assert shown.stdout.count("tool_result") == 4  # nothing ran again


def test_a_model_the_provider_does_not_have_names_the_model_setting_not_resume(
        tmp_path: Path) -> None:
    """Issue 17: a wrong model name (the provider answers 404) stops the run with the
    fix — the agent's model setting, then a new question — instead of a resume that can
    only ask for the same model again."""
    missing = Raw(404, error_body("The model `scripted-model` does not exist.",
                                  "model_not_found"))
    with OpenAICompatibleServer([missing, missing], api_key=KEY) as server, \
            state_dir() as home:
        agent = write_agent(tmp_path, base_url=server.base_url)
        done = cli(home, "run", "--agent", str(agent), "go", env=provider_env())
        assert done.returncode == 3, done.stdout + done.stderr
        assert "■ blocked (model_not_found): model provider answered HTTP 404 " \
               "(model_not_found): it has no model 'scripted-model' at " in done.stdout
        nexts = [ln.strip() for ln in done.stdout.splitlines() if "next:" in ln]
        assert nexts == [f'next: agentloom --home {home} run --agent AGENT.yaml "the question '
                         'again"   (after fixing model.model or model.base_url in the agent '
                         "file, or with --model NAME: the provider has no such model, and "
                         "this run keeps the one it started with)"], nexts
        run_id = done.stdout.split("▶ run ")[1].split()[0]
        shown = json.loads(cli(home, "--json", "show", run_id, env=provider_env()).stdout)
        assert shown["way_out"] == "change_model" and shown["next"] == [
            n.removeprefix("next: ") for n in nexts]
