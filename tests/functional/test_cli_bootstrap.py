"""Issue 9: ``bin/agentloom`` installs bubblewrap the way ``bin/test`` does (as root,
through apt), so the quickstart's first command runs its sandboxed step on a fresh
machine. Run here with a PATH of stand-ins: ``id``, ``apt-get`` and no ``bwrap``.

Issue 16: what each command installs. ``bin/agentloom`` installs the core dependencies
(``serve`` adds the serve extra), ``bin/test`` the dev extra, and every install is of
the union asked for so far: a ``python`` stand-in logs the pip calls."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
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
    """bin/test calls ``ensure_bubblewrap`` and ``ensure_chromium`` (one install each,
    each tried once), then its checks (stand-ins here, so the real suite does not run
    inside itself)."""
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
    assert "installing chromium (console browser tests)" in first.stderr
    assert "the browser tests will be skipped" in first.stderr
    lines = first.stdout.splitlines()
    assert [line for line in lines if line.endswith(" ran")] == [
        "ruff ran", "mypy ran", "lint-imports ran", "pytest ran"]
    assert lines[-1].startswith("== bin/test: ") and "pytest " in lines[-1]  # the times
    second = bin_test()
    assert second.returncode == 0 and "installing bubblewrap" not in second.stderr
    assert "installing chromium" not in second.stderr
    # each package tried once (the fake apt fails at its update), never again
    assert len((tmp_path / "apt.log").read_text().splitlines()) == 2


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


def _installs(tmp_path: Path) -> tuple[dict[str, str], Callable[..., list[str]]]:
    """The machine above with a python that logs its pip calls (and runs anything else)
    and stand-ins for the CLI and the checks; ``run(script, *args)`` returns the pip
    calls the script made."""
    _, env = _machine(tmp_path, uid=1000, apt=None)
    venv = tmp_path / "venv"
    (venv / ".agentloom-installed").unlink()  # a fresh environment
    (venv / "bin" / "python").unlink()
    log = tmp_path / "pip.log"
    (venv / "bin" / "python").write_text(
        f'#!{shutil.which("bash")}\n'
        f'if [ "$1 $2" = "-m pip" ]; then echo "${{@:3}}" >> {log}; exit 0; fi\n'
        f'exec {sys.executable} "$@"\n')
    (venv / "bin" / "agentloom").unlink()
    for name in ("agentloom", "ruff", "mypy", "lint-imports", "pytest"):
        (venv / "bin" / name).write_text(f"#!{shutil.which('bash')}\necho {name} ran\n")
    for stub in (venv / "bin").iterdir():
        stub.chmod(0o755)

    def run(script: str, *args: str) -> list[str]:
        before = log.read_text().splitlines() if log.exists() else []
        done = subprocess.run([shutil.which("bash") or "bash", str(ROOT / "bin" / script),
                               *args], capture_output=True, text=True, env=env,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        return (log.read_text().splitlines() if log.exists() else [])[len(before):]

    return env, run


def _pip(extras: str) -> str:
    target = f"{ROOT}[{extras}]" if extras else str(ROOT)
    return f"install -q --disable-pip-version-check -e {target}"


def test_the_quickstart_installs_only_what_running_needs_and_bin_test_adds_dev(
        tmp_path: Path) -> None:
    _, run = _installs(tmp_path)
    assert run("agentloom", "run", "--agent", "a.yaml", "q") == [_pip("")]
    assert run("agentloom", "run", "--agent", "a.yaml", "q") == []
    assert run("test") == [_pip("dev")]
    # after bin/test, the CLI runs on the dev install (a superset), and bin/test again
    assert run("agentloom", "--home", "serve", "show", "r1") == []
    assert run("test") == []
    stamp = (tmp_path / "venv" / ".agentloom-installed").read_text()
    assert stamp.splitlines()[1:] == [f"root={ROOT}", "extras=dev"]


def test_serve_adds_its_extra_and_keeps_what_was_there(tmp_path: Path) -> None:
    _, run = _installs(tmp_path)
    assert run("agentloom", "--home", "h", "serve", "bootstrap") == [_pip("serve")]
    assert run("agentloom", "run", "--agent", "a.yaml", "serve") == []  # a question
    assert run("test") == [_pip("dev,serve")]
    assert run("agentloom", "serve") == []


def test_a_changed_pyproject_or_checkout_reinstalls_everything_installed(
        tmp_path: Path) -> None:
    env, run = _installs(tmp_path)
    assert run("test") == [_pip("dev")]
    stamp = tmp_path / "venv" / ".agentloom-installed"
    lines = stamp.read_text().splitlines()
    stamp.write_text("\n".join(["hash=0000000000000000", *lines[1:]]) + "\n")
    assert run("agentloom", "show", "r1") == [_pip("dev")]  # not a smaller install
    stamp.write_text("\n".join([lines[0], "root=/elsewhere", *lines[2:]]) + "\n")
    assert run("agentloom", "show", "r1") == [_pip("dev")]
    assert run("agentloom", "show", "r1") == []
    # a stamp written before the extras were recorded: HASH-EXTRAS
    stamp.write_text(f"{lines[0].removeprefix('hash=')}-dev\n")
    assert run("agentloom", "show", "r1") == []
    env["AGENTLOOM_EXTRAS"] = "otel"  # asked for on top of what the command needs
    assert run("agentloom", "show", "r1") == [_pip("dev,otel")]
