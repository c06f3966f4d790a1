"""The sandbox never outlives its owner: SIGKILL the owning process the instant its
marker appears (and a little later, across the start-up: launcher, bwrap's setup, the
gate, the command) — afterwards no process carries the nonce and the command itself is
gone too (it is found by its unique command line, not by the tag)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import time
from typing import Any

import pytest

from agentloom.sandbox.bwrap import tagged_processes
from agentloom_runtime.workspace import InstanceWorkspace, WorkspaceProvider

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

KILLS = 30
DELAYS_MS = (0, 0, 0, 1, 2, 4, 8, 15, 25, 40)  # 0: the instant the marker appears
SETTLE_S = 3.0  # a dying sandbox is gone well within this


def _survivors(nonce: str, wanted: bytes, find_processes: Any) -> list[int]:
    deadline = time.monotonic() + SETTLE_S
    while True:
        left = tagged_processes(nonce) + find_processes(wanted)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)


def test_killing_the_owner_leaves_no_sandbox(runner: Any, base: Any, spawn_owner: Any,
                                             find_processes: Any, sandbox_user: Any) -> None:
    survived: list[tuple[int, list[int]]] = []
    started = 0
    for i in range(KILLS):
        ws: InstanceWorkspace = WorkspaceProvider(base / f"vol{i}").for_instance(
            "s", "a", "sess", "run1", "main")
        if sandbox_user is not None:
            os.chown(ws.root, *sandbox_user)
        duration = f"{600 + secrets.randbelow(10**6) / 10**6:.6f}"  # unique command line
        host = spawn_owner(ws, f"kill-{i}", f"echo > started; exec sleep {duration}")
        marker = ws.lock_dir / "markers" / f"kill-{i}.json"
        deadline = time.monotonic() + 30
        while not marker.exists():  # busy: kill at the instant it appears
            assert time.monotonic() < deadline and host.poll() is None, "no marker"
        time.sleep(DELAYS_MS[i % len(DELAYS_MS)] / 1000)
        host.send_signal(signal.SIGKILL)
        host.wait()
        nonce = json.loads(marker.read_text())["nonce"]
        left = _survivors(nonce, b"sleep\x00" + duration.encode() + b"\x00", find_processes)
        started += (ws.root / "started").exists()
        if left:
            survived.append((i, left))
            for pid in left:  # do not leak them into the rest of the suite
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
    print(f"owner kills: {KILLS}, commands that had started: {started}, "
          f"survivors: {len(survived)}")
    assert survived == []
