"""The bubblewrap command sandbox, for real (needs /usr/bin/bwrap and user namespaces).

On a root host the runner starts bwrap as uid/gid 65534 (the kernel does not enforce
RLIMIT_NPROC for host root), so the workspace is chowned to that user here.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloom.sandbox import BubblewrapRunner
from agentloom.sandbox.bwrap import tagged_processes
from agentloom_runtime.workspace import (
    CommandLimits,
    CommandResult,
    CommandSpec,
    InstanceWorkspace,
    MarkerStore,
    SandboxUnavailable,
    WorkspaceError,
    WorkspaceProvider,
)

pytestmark = pytest.mark.sandbox
SANDBOX_USER = (65534, 65534) if os.geteuid() == 0 else None


def _chown_tree(path: Path) -> None:
    if SANDBOX_USER is None:
        return
    for dirpath, _dirs, files in os.walk(path):
        os.chown(dirpath, *SANDBOX_USER)
        for name in files:
            os.chown(os.path.join(dirpath, name), *SANDBOX_USER)


@pytest.fixture
def base() -> Iterator[Path]:
    """Not pytest's tmp_path: its parents are 0700, which the sandbox user cannot cross."""
    path = Path(tempfile.mkdtemp(prefix="agentloom-sandbox-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def runner() -> BubblewrapRunner:
    runner = BubblewrapRunner(sandbox_user=SANDBOX_USER)
    try:
        runner.ensure_available()
    except SandboxUnavailable as exc:
        pytest.skip(f"bubblewrap sandbox unusable here: {exc.message}")
    return runner


@pytest.fixture
def ws(base: Path) -> InstanceWorkspace:
    workspace = WorkspaceProvider(base / "vol").for_instance("s", "a", "sess", "run1", "main")
    _chown_tree(workspace.root)
    return workspace


_counter = iter(range(1_000_000))


def run(runner: BubblewrapRunner, ws: InstanceWorkspace, command: str,
        **kwargs: Any) -> CommandResult:
    spec = CommandSpec(request_id=f"req-{next(_counter)}", command=command, **kwargs)
    result = runner.run_sync(spec, ws.root, ws.lock_dir)
    assert MarkerStore(ws.lock_dir).pending() == []  # confirmed gone, marker removed
    return result


def test_runs_unprivileged_in_workspace(runner: BubblewrapRunner, ws: InstanceWorkspace) -> None:
    result = run(runner, ws, "id -u; id -g; pwd; grep CapEff /proc/self/status; echo hi > f")
    assert result.exit_code == 0, result
    uid, gid, cwd, caps = result.stdout_head.splitlines()
    assert (uid, gid, cwd) == ("65534", "65534", "/workspace")
    assert caps.split()[1] == "0000000000000000"
    assert (ws.root / "f").read_text() == "hi\n"
    assert MarkerStore(ws.lock_dir).lookup(result.request_id)[0] == "done"


def test_no_network(runner: BubblewrapRunner, ws: InstanceWorkspace) -> None:
    listener = socket.create_server(("127.0.0.1", 0))  # a connection would queue here
    port = listener.getsockname()[1]
    probe = ("import socket\n"
             "print(sorted(n for _, n in socket.if_nameindex()))\n"
             "try:\n"
             f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
             "    print('connected')\n"
             "except OSError as e:\n"
             "    print('refused', type(e).__name__)\n")
    try:
        result = run(runner, ws, f"python3 -c \"{probe}\"")
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert result.exit_code == 0, result
    names, outcome = result.stdout_head.splitlines()
    assert names == "['lo']"
    assert outcome.startswith("refused")


def test_root_read_only_and_only_workspace_writable(runner: BubblewrapRunner,
                                                    ws: InstanceWorkspace) -> None:
    targets = ["/", "/usr", "/etc", "/bin", "/proc", "/dev", "/home", "/root", "/var",
               "/workspace", "/tmp", "/dev/shm"]
    script = "; ".join(f"(touch {t}/.probe 2>/dev/null && echo {t}:rw) || echo {t}:ro"
                       for t in targets)
    result = run(runner, ws, script)
    states = dict(line.split(":") for line in result.stdout_head.splitlines())
    writable = {t for t, state in states.items() if state == "rw"}
    # /tmp and /dev/shm are private, size-capped tmpfs that vanish with the sandbox
    assert writable == {"/workspace", "/tmp", "/dev/shm"}, states
    assert not Path("/tmp/.probe").exists()
    listing = run(runner, ws, "ls /; ls /etc")
    assert "home" not in listing.stdout_head.split() and "shadow" not in listing.stdout_head


def test_environment_scrubbed(runner: BubblewrapRunner, ws: InstanceWorkspace,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "OPENAI_API_KEY", "AGENTLOOM_TOKEN"):
        monkeypatch.setenv(name, "leaked-credential")
    result = run(runner, ws, "env")
    env = dict(line.split("=", 1) for line in result.stdout_head.splitlines() if "=" in line)
    assert "leaked-credential" not in result.stdout_head
    assert set(env) <= {"PATH", "HOME", "LANG", "PWD", "SHLVL", "_"}, env
    assert env["HOME"] == "/workspace" and env["LANG"] == "C.UTF-8"


def test_limits_enforced(runner: BubblewrapRunner, ws: InstanceWorkspace) -> None:
    memory = run(runner, ws, "python3 -c 'b = bytearray(512 * 1024 * 1024); print(len(b))'",
                 limits=CommandLimits(memory_mb=128))
    assert memory.exit_code != 0 and "MemoryError" in memory.stderr_head + memory.stderr_tail
    cpu = run(runner, ws, "while :; do :; done", timeout_s=30,
              limits=CommandLimits(cpu_seconds=1))
    assert cpu.exit_code not in (0, None) and not cpu.timed_out and cpu.duration_s < 10
    fsize = run(runner, ws, "head -c 3000000 /dev/zero > big.bin",
                limits=CommandLimits(file_size_mb=1))
    assert fsize.exit_code != 0
    assert (ws.root / "big.bin").stat().st_size <= 1024 * 1024
    bomb = ("import os, time\n"
            "n = 0\n"
            "for _ in range(200):\n"
            "    try:\n"
            "        pid = os.fork()\n"
            "    except OSError:\n"
            "        break\n"
            "    if pid == 0:\n"
            "        time.sleep(2); os._exit(0)\n"
            "    n += 1\n"
            "print(n)\n")
    nproc = run(runner, ws, f"python3 -c \"{bomb}\"", limits=CommandLimits(pids=16))
    assert nproc.exit_code == 0, nproc
    assert int(nproc.stdout_head.strip()) < 16


def test_output_capped(runner: BubblewrapRunner, ws: InstanceWorkspace) -> None:
    result = run(runner, ws, "head -c 1000000 /dev/zero | tr '\\0' a; echo END",
                 limits=CommandLimits(output_cap_bytes=1000))
    assert result.stdout_truncated and result.stdout_bytes == 1_000_004
    assert result.stdout_head == "a" * 500 and result.stdout_tail.endswith("END\n")
    assert len(result.stdout_tail) == 500


def test_timeout_kills_everything(runner: BubblewrapRunner, ws: InstanceWorkspace) -> None:
    started = time.monotonic()
    duration = f"{60 + secrets.randbelow(10**6) / 10**6:.6f}"  # a unique command line
    result = run(runner, ws, f"sleep {duration} & (sleep {duration} &) ; sleep {duration}",
                 timeout_s=1)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 10
    assert _sleepers(duration) == []  # background jobs and daemonized ones are gone too
    quick = run(runner, ws, f"(sleep {duration} &); sleep {duration} & echo done",
                timeout_s=20)
    assert quick.exit_code == 0 and not quick.timed_out and quick.duration_s < 10
    assert _sleepers(duration) == []  # nothing outlives the call


def _sleepers(duration: str) -> list[int]:
    wanted = b"sleep\x00" + duration.encode() + b"\x00"
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if Path(f"/proc/{entry.name}/cmdline").read_bytes() == wanted:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_skills_are_read_only(runner: BubblewrapRunner, ws: InstanceWorkspace,
                              base: Path) -> None:
    skill = base / "skill-pdf"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: pdf\n---\n")
    skill.chmod(0o755)
    result = run(runner, ws, "cat /skills/pdf/SKILL.md; touch /skills/pdf/x || echo ro",
                 skills={"pdf": str(skill)})
    assert "name: pdf" in result.stdout_head and result.stdout_head.strip().endswith("ro")
    assert not (skill / "x").exists()


def test_unavailable_sandbox_is_refused(ws: InstanceWorkspace) -> None:
    missing = BubblewrapRunner(bwrap="/nonexistent/bwrap", sandbox_user=SANDBOX_USER)
    with pytest.raises(SandboxUnavailable):
        missing.ensure_available()
    with pytest.raises(SandboxUnavailable):
        missing.run_sync(CommandSpec(request_id="r-x", command="echo host"), ws.root,
                         ws.lock_dir)
    assert MarkerStore(ws.lock_dir).pending() == []  # nothing started, nothing marked
    if os.geteuid() == 0:
        with pytest.raises(SandboxUnavailable, match="root"):
            BubblewrapRunner().ensure_available()


def test_crash_between_marker_and_result(runner: BubblewrapRunner,
                                         ws: InstanceWorkspace) -> None:
    """The host dies mid-command: the marker stays, writes and new commands are refused
    (reads still work) until the runner verifies that the sandbox is gone."""
    store = ws.store()
    helper = (f"import sys; sys.path[:0] = {sys.path!r}\n"
              "from agentloom.sandbox import BubblewrapRunner\n"
              "from agentloom_runtime.workspace import CommandSpec\n"
              f"BubblewrapRunner(sandbox_user={SANDBOX_USER!r}).run_sync(\n"
              "    CommandSpec(request_id='crash-1', command='echo started > s; sleep 60'),\n"
              f"    {str(ws.root)!r}, {str(ws.lock_dir)!r})\n")
    host = subprocess.Popen([sys.executable, "-c", helper])
    marker = ws.lock_dir / "markers" / "crash-1.json"
    try:
        deadline = time.monotonic() + 20
        while not (marker.exists() and (ws.root / "s").exists()):
            assert time.monotonic() < deadline and host.poll() is None
            time.sleep(0.02)
        nonce = json.loads(marker.read_text())["nonce"]
        assert tagged_processes(nonce)
        assert runner.reconcile(ws.lock_dir) == []  # its owner is alive and in charge
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()
    markers = MarkerStore(ws.lock_dir)
    assert markers.lookup("crash-1") == ("started", None)

    async def probe() -> None:
        with pytest.raises(WorkspaceError) as refused:
            await store.write("after.txt", "x")
        assert refused.value.code == "sandbox_marker_present"
        assert (await store.read("s"))["content"] == "started\n"  # inspection still works

    asyncio.run(probe())
    with pytest.raises(WorkspaceError) as no_new:
        runner.run_sync(CommandSpec(request_id="next-1", command="true"), ws.root,
                        ws.lock_dir)
    assert no_new.value.code == "sandbox_marker_present"
    deadline = time.monotonic() + 10
    while (resolved := runner.reconcile(ws.lock_dir)) == []:
        assert time.monotonic() < deadline, "the crashed sandbox never went away"
        time.sleep(0.05)
    assert resolved == ["crash-1"] and not tagged_processes(nonce)
    assert markers.lookup("crash-1") == ("absent", None)
    asyncio.run(store.write("after.txt", "x"))


def test_foreign_marker_is_never_resolved_by_time(runner: BubblewrapRunner,
                                                  ws: InstanceWorkspace) -> None:
    markers = MarkerStore(ws.lock_dir)
    markers.write("other-host", {"runner": runner.module_id, "nonce": "abc",
                                 "host": {"hostname": "elsewhere", "boot_id": "x",
                                          "pid_ns": 1}, "state": "running",
                                 "started_at": 0})
    markers.write("corrupt", {"runner": runner.module_id})
    assert runner.reconcile(ws.lock_dir) == []
    assert len(markers.pending()) == 2
