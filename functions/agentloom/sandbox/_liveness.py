"""What this host can prove about a bubblewrap marker: same kernel boot and pid namespace,
its owner process, and the processes that carry the run's nonce.

A marker names the host it was written on (``host_identity``), the owner's pid and start
time (pid reuse is told apart by the start time) and a nonce that every sandbox process
carries until the command is past its gate (see ``bwrap``). Processes can only be
verified from the same boot and pid namespace; anywhere else every answer is ``None``
("cannot tell"), never a guess.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

TAG = "AGENTLOOM_SANDBOX_"


def host_identity() -> dict[str, Any]:
    """Where a marker was written: processes can only be verified from the same kernel
    boot and pid namespace."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return {"hostname": socket.gethostname(), "boot_id": boot,
            "pid_ns": os.stat("/proc/self/ns/pid").st_ino}


def proc_start(pid: int) -> str | None:
    """Start time of a live process (guards against pid reuse); None when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def tagged_processes(nonce: str) -> list[int]:
    """Live processes whose command line carries the run's tag."""
    tag = (TAG + nonce).encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                if tag in fh.read():
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def _kill_if(pid: int, still: Callable[[int], bool]) -> bool:
    """SIGKILL ``pid`` through a pidfd, after re-checking ``still(pid)`` with the pidfd
    open: a pid reused in between is never hit."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        if not still(pid):
            return False
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def pid_namespace(pid: int | str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def _ppid(pid: int | str) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[1])


def _children(pid: int) -> list[int]:
    try:  # CONFIG_PROC_CHILDREN: one read; else every process's parent
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        if not os.path.exists(f"/proc/{pid}"):
            return []
        return [int(e.name) for e in os.scandir("/proc")
                if e.name.isdigit() and _ppid(e.name) == pid]
    except OSError:
        return []


def sandbox_inits(pid: int, depth: int = 3) -> list[int]:
    """``pid``'s descendants (up to ``depth`` levels: launcher → bwrap's monitor → the
    sandbox) that are the first of their line in another pid namespace: the sandboxes'
    pid 1 processes, as host pids."""
    own = pid_namespace("self")
    found: list[int] = []
    level = [pid]
    for _ in range(depth):
        level = [child for parent in level for child in _children(parent)]
        found += [child for child in level if pid_namespace(child) not in (None, own)]
        level = [child for child in level if child not in found]
    return found


def kill_sandbox_group(init: int) -> bool:
    """SIGKILL the process group led by a sandbox's pid 1 (bwrap ``--new-session``: every
    process that did not leave it) in one call. Only while that pid 1 is alive (checked
    through a pidfd), so its group id cannot have been reused."""
    try:
        fd = os.pidfd_open(init)
    except OSError:
        return False
    try:
        signal.pidfd_send_signal(fd, 0)
        os.killpg(init, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def kill_namespaces(namespaces: set[int]) -> int:
    """SIGKILL every process in these pid namespaces at once: each stops at its next
    page of output, without waiting for the namespace's pid 1 to be scheduled first."""
    if not namespaces or pid_namespace("self") in namespaces:
        return 0
    targets = [int(e.name) for e in os.scandir("/proc")
               if e.name.isdigit() and pid_namespace(e.name) in namespaces]
    return sum(_kill_if(pid, lambda p: pid_namespace(p) in namespaces) for pid in targets)


def kill_tagged(nonce: str) -> int:
    """SIGKILL every process carrying the tag. Returns how many were signalled."""
    tag = (TAG + nonce).encode()

    def tagged(pid: int) -> bool:
        try:
            return tag in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False

    return sum(_kill_if(pid, tagged) for pid in tagged_processes(nonce))


class ProcessLiveness:
    """The ``MarkerLiveness`` of one runner (markers it wrote, by ``module_id``), read
    from ``/proc``. Every answer is ``None`` for a foreign, corrupt or other-host marker."""

    def __init__(self, runner_id: str) -> None:
        self.runner_id = runner_id
        self._here = host_identity()

    def host_matches(self, marker: Mapping[str, Any]) -> bool:
        return (not marker.get("corrupt") and marker.get("runner") == self.runner_id
                and marker.get("host") == self._here)

    def owner_alive(self, marker: Mapping[str, Any]) -> bool | None:
        pid = marker.get("owner_pid")
        if not self.host_matches(marker) or not isinstance(pid, int) or pid <= 0:
            return None
        start = proc_start(pid)
        return start is not None and start == marker.get("owner_start")

    def sandbox_alive(self, marker: Mapping[str, Any]) -> bool | None:
        nonce = marker.get("nonce")
        if not self.host_matches(marker) or not isinstance(nonce, str) or not nonce:
            return None
        return bool(tagged_processes(nonce))
