"""Issue 9: hooks bound in an agent file run in the CLI, with their trusted code loaded
from the hook packages the file lists (``hook_packages:``, relative to the file); a hook
interrupted while it ran is confirmed with ``resume --confirm-hooks``."""

from __future__ import annotations

import shutil
from pathlib import Path

from e2e.cli_harness import HELLO, Live, cli, state_dir, wait_until, workspace

HOOK = '''
import asyncio
import os

from agentloom_runtime.hooks import PatchInput


async def stamp(ctx, payload):
    """Append a line to the audit log; the first time, hang (to be interrupted)."""
    log = ctx.config["log"]
    with open(log, "a") as handle:
        handle.write(payload["name"] + "\\n")
    pause = ctx.config.get("pause_once", 0)
    if pause and not os.path.exists(log + ".paused"):
        open(log + ".paused", "w").close()
        await asyncio.sleep(pause)
    arguments = dict(payload["arguments"])
    arguments["content"] = arguments["content"] + "-- stamped by the audit hook\\n"
    return PatchInput({"arguments": arguments})
'''


def _agent(folder: Path, log: Path, *, pause_once: float = 0, timeout: float = 1) -> Path:
    package = folder / "hooks" / "audit"
    package.mkdir(parents=True)
    (package / "hooks.yaml").write_text(
        'name: audit\nversion: "1"\nhooks:\n  - {id: audit-writes, version: "1", '
        "entry: 'audit:stamp'}\n")
    (package / "audit.py").write_text(HOOK)
    agent = folder / "agent.yaml"
    agent.write_text((HELLO / "agent.yaml").read_text() + (
        "hooks:\n  - {hook_id: audit-writes, version: '1', point: tool.before, "
        f"match: {{tools: [workspace_write]}}, timeout: {timeout}, "
        f"config: {{log: '{log}', pause_once: {pause_once}}}}}\n"
        "hook_packages: [hooks/audit]\n"))
    shutil.copy(HELLO / "demo-script.yaml", folder / "demo-script.yaml")
    return agent


def test_a_tool_before_hook_from_a_package_directory_runs_in_the_cli(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    agent = _agent(tmp_path / "agent", log)
    with state_dir() as home:
        proc = cli(home, "run", "--agent", str(agent), "Write release notes")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "■ completed" in proc.stdout
        notes = (workspace(home) / "notes" / "release.md").read_text()
        assert notes.endswith("-- stamped by the audit hook\n")
        assert log.read_text() == "workspace_write\n"  # bound to workspace_write only


def test_a_hook_package_runs_from_any_working_directory(tmp_path: Path) -> None:
    """The package path is relative to the agent file, and saved absolute with the run."""
    log = tmp_path / "audit.log"
    agent = _agent(tmp_path / "agent", log)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with state_dir() as home:
        proc = cli(home, "run", "--agent", str(agent), "Write release notes", cwd=elsewhere)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert log.read_text() == "workspace_write\n"


def test_resume_with_confirm_hooks_runs_an_interrupted_hook_again(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    agent = _agent(tmp_path / "agent", log, pause_once=8, timeout=9)
    with state_dir() as home:
        live = Live(home, "run", "--agent", str(agent), "Write release notes")
        assert wait_until(lambda: Path(str(log) + ".paused").exists(), 30), live.lines
        live.kill()
        live.finish()
        run_id = live.run_id
        assert run_id
        blocked = cli(home, "resume", run_id)
        assert blocked.returncode == 3, blocked.stdout + blocked.stderr
        assert "■ blocked (hook_replay_requires_confirmation)" in blocked.stdout
        assert f"next: agentloom --home {home} resume {run_id} --confirm-hooks" \
            in blocked.stdout
        assert log.read_text() == "workspace_write\n"  # not run again unconfirmed
        shown = cli(home, "show", run_id)
        assert f"next: agentloom --home {home} resume {run_id} --confirm-hooks" in shown.stdout
        done = cli(home, "resume", run_id, "--confirm-hooks")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "■ completed" in done.stdout
        assert log.read_text() == "workspace_write\nworkspace_write\n"  # confirmed: once more
        notes = (workspace(home) / "notes" / "release.md").read_text()
        assert notes.count("-- stamped by the audit hook") == 1


def test_a_changed_hook_package_blocks_the_resume_of_its_runs(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    folder = tmp_path / "agent"
    agent = _agent(folder, log, pause_once=8, timeout=9)
    with state_dir() as home:
        live = Live(home, "run", "--agent", str(agent), "Write release notes")
        assert wait_until(lambda: Path(str(log) + ".paused").exists(), 30), live.lines
        live.kill()
        live.finish()
        assert live.run_id
        hook = folder / "hooks" / "audit" / "audit.py"
        hook.write_text(hook.read_text() + "\n# changed\n")
        refused = cli(home, "resume", live.run_id, "--confirm-hooks")
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stderr.startswith("error (resume_mismatch)"), refused.stderr
