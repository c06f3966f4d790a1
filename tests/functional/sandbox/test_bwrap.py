"""The bubblewrap command sandbox, for real (needs /usr/bin/bwrap and user namespaces).

Fixtures (workspace, runner, the sandbox user of a root host) are in ``conftest.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import time
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
    PosixWorkspaceStore,
    SandboxUnavailable,
    WorkspaceError,
)

pytestmark = pytest.mark.sandbox


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


def test_timeout_kills_everything(runner: BubblewrapRunner, ws: InstanceWorkspace,
                                  find_processes: Any) -> None:
    def _sleepers(duration: str) -> list[int]:
        return find_processes(b"sleep\x00" + duration.encode() + b"\x00")

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


def test_unavailable_sandbox_is_refused(ws: InstanceWorkspace, sandbox_user: Any) -> None:
    missing = BubblewrapRunner(bwrap="/nonexistent/bwrap", sandbox_user=sandbox_user)
    with pytest.raises(SandboxUnavailable):
        missing.ensure_available()
    with pytest.raises(SandboxUnavailable):
        missing.run_sync(CommandSpec(request_id="r-x", command="echo host"), ws.root,
                         ws.lock_dir)
    assert MarkerStore(ws.lock_dir).pending() == []  # nothing started, nothing marked
    if os.geteuid() == 0:
        with pytest.raises(SandboxUnavailable, match="root"):
            BubblewrapRunner().ensure_available()


def _wait_for(predicate: Any, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_live_owner_marker_blocks(runner: BubblewrapRunner, ws: InstanceWorkspace,
                                  shared_store: PosixWorkspaceStore,
                                  spawn_owner: Any) -> None:
    """While the owner runs its sandbox, its marker blocks writes and new commands
    (reads still work), and describe() says what the host sees."""
    host = spawn_owner(ws, "live-1", "echo started > s; sleep 60")
    markers = MarkerStore(ws.lock_dir, liveness=runner.liveness)
    try:
        _wait_for(lambda: (ws.root / "s").exists() or host.poll() is not None, "no start")
        facts = markers.describe("live-1")
        assert facts["marker"] == "present" and facts["state"] == "started"
        assert facts["host_matches"] and facts["owner_alive"] and facts["sandbox_alive"]
        assert facts["blocking"] and not facts["exit_seen"] and facts["result"] is None
        assert isinstance(facts["started_at"], float)

        async def probe() -> None:
            with pytest.raises(WorkspaceError) as refused:
                await shared_store.write("after.txt", "x")
            assert refused.value.code == "sandbox_marker_present"
            assert (await shared_store.read("s"))["content"] == "started\n"

        asyncio.run(probe())
        with pytest.raises(WorkspaceError) as no_new:
            runner.run_sync(CommandSpec(request_id="next-1", command="true"), ws.root,
                            ws.lock_dir)
        assert no_new.value.code == "sandbox_marker_present"
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()


def test_dead_owner_marker_stays_but_no_longer_blocks(
        runner: BubblewrapRunner, ws: InstanceWorkspace, shared_store: PosixWorkspaceStore,
        spawn_owner: Any) -> None:
    """The host dies mid-command: its sandbox dies with it; the marker stays (the request
    still looks "started", its fate unknown) but no longer blocks the session's other
    work, since the owner is provably gone and no process carries the nonce. Without a
    liveness nothing is proven and the marker still blocks; release() removes it."""
    host = spawn_owner(ws, "crash-1", "echo started > s; sleep 60")
    marker = ws.lock_dir / "markers" / "crash-1.json"
    try:
        _wait_for(lambda: (ws.root / "s").exists() or host.poll() is not None, "no start")
        nonce = json.loads(marker.read_text())["nonce"]
        assert tagged_processes(nonce)
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()
    _wait_for(lambda: not tagged_processes(nonce), "the sandbox outlived its owner", 5)
    markers = MarkerStore(ws.lock_dir, liveness=runner.liveness)
    assert markers.lookup("crash-1") == ("started", None)
    facts = markers.describe("crash-1")
    assert (facts["marker"], facts["state"], facts["exit_seen"]) == ("present", "started",
                                                                      False)
    assert facts["host_matches"] and facts["owner_alive"] is False
    assert facts["sandbox_alive"] is False and not facts["blocking"]

    asyncio.run(shared_store.write("after.txt", "x"))  # the session goes on
    after = runner.run_sync(CommandSpec(request_id="next-1", command="cat after.txt"),
                            ws.root, ws.lock_dir)
    assert after.exit_code == 0 and after.stdout_head == "x"
    assert markers.lookup("crash-1") == ("started", None)  # still unknown, still there
    with pytest.raises(WorkspaceError) as blind:
        MarkerStore(ws.lock_dir).refuse_if_pending()  # no liveness: nothing is proven
    assert blind.value.code == "sandbox_marker_present"
    markers.release("crash-1")
    markers.release("crash-1")  # idempotent
    assert markers.lookup("crash-1") == ("absent", None) and markers.pending() == []


def test_foreign_marker_is_never_resolved_by_time(runner: BubblewrapRunner,
                                                  ws: InstanceWorkspace) -> None:
    markers = MarkerStore(ws.lock_dir, liveness=runner.liveness)
    markers.write("other-host", {"runner": runner.module_id, "nonce": "abc",
                                 "host": {"hostname": "elsewhere", "boot_id": "x",
                                          "pid_ns": 1}, "state": "started",
                                 "owner_pid": 1, "owner_start": "0", "started_at": 0})
    (ws.lock_dir / "markers" / "corrupt.json").write_text("{not json")
    other = markers.describe("other-host")
    assert other["host_matches"] is False and other["blocking"]
    assert other["owner_alive"] is None and other["sandbox_alive"] is None
    corrupt = markers.describe("corrupt")
    assert corrupt["marker"] == "corrupt" and corrupt["blocking"]
    assert {m["request_id"] for m in markers.blocking()} == {"other-host", "corrupt"}
    with pytest.raises(WorkspaceError):
        markers.refuse_if_pending()
