"""Issue 9: ``bin/agentloom`` installs bubblewrap the way ``bin/test`` does (as root,
through apt), so the quickstart's first command runs its sandboxed step on a fresh
machine. Run here with a PATH of stand-ins: ``id``, ``apt-get`` and no ``bwrap``."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("dirname", "cat", "sha256sum", "cut", "touch")


def _machine(tmp_path: Path, *, uid: int, apt: str | None) -> tuple[Path, dict[str, str]]:
    """A PATH without bwrap, an ``id`` that says ``uid``, and (unless None) an apt-get
    that logs its calls and runs ``apt`` (a shell snippet)."""
    path = tmp_path / "bin"
    path.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (path / tool).symlink_to(found)
    (path / "id").write_text(f"#!{shutil.which('bash')}\necho {uid}\n")
    if apt is not None:
        (path / "apt-get").write_text(f'#!{shutil.which("bash")}\necho "$@" >> '
                                      f'{tmp_path}/apt.log\n{apt}\n')
    for script in path.iterdir():
        if not script.is_symlink():
            script.chmod(0o755)
    venv = tmp_path / "venv"  # this environment, seen through a private folder whose
    (venv / "bin").mkdir(parents=True)  # stamp says it is installed (never a pip run)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "bin" / "agentloom").symlink_to(Path(sys.executable).parent / "agentloom")
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]
    (venv / ".agentloom-installed").write_text(f"{digest}-dev\n")
    env = {"PATH": str(path), "PYTHON": sys.executable, "AGENTLOOM_VENV": str(venv),
           "HOME": str(tmp_path)}
    return path, env


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([shutil.which("bash") or "bash", str(ROOT / "bin" / "agentloom"),
                           "--help"], capture_output=True, text=True, env=env, timeout=60)


def test_bin_agentloom_installs_bubblewrap_as_root_via_apt(tmp_path: Path) -> None:
    _, env = _machine(tmp_path, uid=0, apt=f'[ "$1" = install ] && printf "#!/bin/sh\\n"'
                                             f' > {tmp_path}/bin/bwrap && chmod +x '
                                             f'{tmp_path}/bin/bwrap; exit 0')
    first = _run(env)
    assert first.returncode == 0, first.stderr
    assert "installing agentloom" not in first.stderr
    assert "installing bubblewrap (command sandbox)" in first.stderr
    assert "agentloom run --agent AGENT.yaml" in first.stdout  # then the CLI itself ran
    assert (tmp_path / "apt.log").read_text().splitlines() == [
        "update -qq", "install -y -qq bubblewrap"]
    second = _run(env)  # bwrap is there now: nothing more to do
    assert second.returncode == 0 and "bubblewrap" not in second.stderr
    assert len((tmp_path / "apt.log").read_text().splitlines()) == 2


def test_a_failed_bubblewrap_install_warns_once_and_the_cli_still_runs(tmp_path: Path) -> None:
    _, env = _machine(tmp_path, uid=0, apt="exit 100")
    first = _run(env)
    assert first.returncode == 0, first.stderr
    assert "warning: could not install bubblewrap; sandboxed commands will be refused" \
        in first.stderr
    second = _run(env)
    assert second.returncode == 0
    assert "apt-get install bubblewrap" in second.stderr  # a note, no second attempt
    assert len((tmp_path / "apt.log").read_text().splitlines()) == 1


def test_bin_agentloom_as_a_normal_user_says_how_to_get_bubblewrap(tmp_path: Path) -> None:
    _, env = _machine(tmp_path, uid=1000, apt="exit 1")
    proc = _run(env)
    assert proc.returncode == 0, proc.stderr
    assert "note: bubblewrap is not installed (apt-get install bubblewrap)" in proc.stderr
    assert not (tmp_path / "apt.log").exists()


def test_bin_test_installs_bubblewrap_through_the_same_bootstrap(tmp_path: Path) -> None:
    """bin/test calls ``ensure_bubblewrap`` (one install, tried once), then its checks
    (stand-ins here, so the real suite does not run inside itself)."""
    _, env = _machine(tmp_path, uid=0, apt="exit 100")
    for check in ("ruff", "mypy", "lint-imports", "pytest"):
        stub = tmp_path / "venv" / "bin" / check
        stub.write_text(f"#!{shutil.which('bash')}\necho {check} ran\n")
        stub.chmod(0o755)

    def bin_test() -> subprocess.CompletedProcess[str]:
        return subprocess.run([shutil.which("bash") or "bash", str(ROOT / "bin" / "test")],
                              capture_output=True, text=True, env=env, timeout=60)

    first = bin_test()
    assert first.returncode == 0, first.stderr
    assert "installing bubblewrap (command sandbox)" in first.stderr
    assert "note: the sandbox tests will be skipped" in first.stderr
    assert first.stdout.splitlines()[-1] == "pytest ran"
    second = bin_test()
    assert second.returncode == 0 and "installing bubblewrap" not in second.stderr
    assert len((tmp_path / "apt.log").read_text().splitlines()) == 1  # tried once


def test_bin_agentloom_has_the_cli_name_itself_in_the_commands_it_prints(
        tmp_path: Path) -> None:
    """A README user types ``bin/agentloom`` (``agentloom`` is not on their PATH): the
    commands the CLI prints for them to type next say ``bin/agentloom`` too."""
    _, env = _machine(tmp_path, uid=1000, apt="exit 1")
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")  # this checkout's code
    home = tmp_path / "home"
    proc = subprocess.run([shutil.which("bash") or "bash", "bin/agentloom", "--home",
                           str(home), "agent", "create", "agent.yaml"], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"`bin/agentloom --home {home} run --agent agent.yaml \"a question\"`" \
        in proc.stderr
