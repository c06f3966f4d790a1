"""The embedded main job: run the example agent, SIGKILL it mid-way, resume it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "docs" / "examples" / "hello" / "agent.yaml"


def cli(home: Path, *args: str, **kwargs):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "DEEPSEEK_API_KEY")}
    return subprocess.Popen([sys.executable, "-m", "agentloom.cli", "--home", str(home), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            **kwargs)


def test_run_completes_with_the_demo_model(tmp_path: Path) -> None:
    # pytest's own temp root is private; as root, commands run as nobody, who must be
    # able to reach the workspace: use a traversable folder of our own
    tmp_path = Path(tempfile.mkdtemp(prefix="agentloom-e2e-"))
    tmp_path.chmod(0o711)
    proc = cli(tmp_path, "run", "--agent", str(AGENT), "Write release notes")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "[demo model]" in out and "■ completed" in out
    notes = list(tmp_path.glob("workspaces/spaces/local/agents/hello/sessions/cli/main/"
                               "notes/release.md"))
    assert notes and "Durable step engine" in notes[0].read_text()
    if shutil.which("bwrap"):  # the command really ran in the sandbox
        assert "← workspace_command [ok] exit 0 · 17 notes/release.md" in out, out
    assert oct((tmp_path / "agentloom.sqlite3").stat().st_mode & 0o777) == "0o600"
    shutil.rmtree(tmp_path)


def test_a_private_state_directory_gives_a_clear_sandbox_error(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        return  # only a root host runs commands as another user
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    proc = cli(private / "home", "run", "--agent", str(AGENT), "Write release notes")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "← workspace_command [error]" in out and "cannot reach" in out
    # the advice is shown whole, past 200 characters (issue 17)
    assert "← workspace_command [error] sandbox_unavailable: commands run as uid" in out
    assert "use a state directory under a traversable path (AGENTLOOM_HOME / --home)" in out


def test_sigkill_then_resume_finishes_the_same_run(tmp_path: Path) -> None:
    proc = cli(tmp_path, "run", "--agent", str(AGENT), "--pause", "0.3",
               "Write release notes")
    run_id, lines = None, []
    deadline = time.monotonic() + 30
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if line.startswith("▶ run "):
            run_id = line.split()[2]
        if "← update_plan" in line:
            proc.send_signal(signal.SIGKILL)
            break
    rest, _ = proc.communicate(timeout=10)
    lines.append(rest)
    assert proc.returncode == -signal.SIGKILL, "".join(lines)
    assert run_id
    resumed = cli(tmp_path, "resume", run_id)
    out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, err + out
    assert "■ completed" in out
    shown = cli(tmp_path, "show", run_id)
    text, _ = shown.communicate(timeout=30)
    assert "update_plan" in "".join(lines)
    assert text.count("tool_result") == 4, text  # each tool call recorded exactly once
    assert "status: completed" in text


def test_bad_agent_file_gives_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("agent_id: x\nmodel: {model: m, context_window: 10}\nmode: fast\n")
    proc = cli(tmp_path, "run", "--agent", str(bad), "hi")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "model.context_window" in err and "mode" in err


def test_a_second_question_inherits_the_session_history(tmp_path: Path) -> None:
    from e2e.cli_harness import run_records

    for question in ("first question", "second question"):
        proc = cli(tmp_path, "run", "--agent", str(AGENT), "--session", "s1", question)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    run_id = out.split("▶ run ")[1].split()[0]
    shown = cli(tmp_path, "show", run_id)
    text, _ = shown.communicate(timeout=30)
    assert "history] [10 messages of session history]" in text
    [history] = [r for r in run_records(tmp_path, run_id) if r["kind"] == "history"]
    inherited = history["messages"]
    assert inherited[0]["content"] == "first question"  # the earlier turn came along
    assert len(inherited) >= 8  # question, calls + results, answer


def test_real_provider_path_over_http(tmp_path: Path) -> None:
    """OPENAI_API_KEY + OPENAI_BASE_URL: the CLI talks to an OpenAI-compatible server
    (a local one here) through the real gateway; the key goes in the header only."""
    from agentloom_runtime.testing import OpenAICompatibleServer, ScriptedModel

    steps = [
        ScriptedModel.call("update_plan", {"steps": [
            {"id": "1", "title": "answer", "status": "completed"}]}, id="p1"),
        ScriptedModel.answer("Hello from the provider."),
        ScriptedModel.verdict("complete", "answered"),
    ]
    with OpenAICompatibleServer(steps, api_key="sk-local-test") as server:
        env = {k: v for k, v in os.environ.items() if k != "DEEPSEEK_API_KEY"}
        env.update(OPENAI_API_KEY="sk-local-test", OPENAI_BASE_URL=server.base_url)
        proc = subprocess.run(
            [sys.executable, "-m", "agentloom.cli", "--home", str(tmp_path), "run",
             "--agent", str(AGENT), "say hello"],
            capture_output=True, text=True, env=env, timeout=60)
        server.assert_consumed()
        bodies = server.bodies
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "[model] openai gpt-4o-mini" in proc.stdout
    assert "Hello from the provider." in proc.stdout
    assert bodies[0]["max_completion_tokens"] == 4096
    assert "sk-local-test" not in proc.stdout + proc.stderr


def test_sdk_example_runs() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "docs" / "examples" / "sdk" / "embed.py")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "completed: There are 3 words."
