"""``BubblewrapRunner``: the local CommandRunner (one machine, embedded mode).

The sandbox: every namespace unshared (network: only ``lo``), no further user namespaces,
all capabilities dropped, a new session, killed with its parent. The root is bwrap's own
tmpfs, remounted read-only; ``/usr`` (plus the host's /bin /lib /lib64 /sbin links) and a
small allow-list of ``/etc`` are read-only binds; ``/proc``, a read-only ``/dev`` with a
sized ``/dev/shm``, a sized private ``/tmp``; the instance workspace read-write at
``/workspace`` and bound skills read-only at ``/skills/<id>``. The environment is cleared
and only PATH, HOME=/workspace and LANG are set; bwrap itself also gets a minimal env.

User: uid/gid 65534 inside a user namespace. Limits come from ``prlimit`` *inside* the
sandbox (cpu, as, nproc, fsize, nofile, core): no preexec_fn (unsafe in a threaded host),
and RLIMIT_NPROC then counts only the sandbox's own processes. The kernel never enforces
RLIMIT_NPROC for host uid 0, so a root host must name ``sandbox_user`` (the host uid/gid
bwrap runs as, which must own the workspace); without it the runner is unavailable.

Markers (seed §10): claimed (fsync'd) before the start; removed only after no process
carrying the run's nonce remains (state ``exited`` is recorded when that cannot be
confirmed, so ``reconcile`` may decide later without the owner). A
crashed host leaves the marker; ``reconcile`` removes it only when it can verify, on the
same boot and pid namespace, that the owner and every tagged process are gone.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentloom_runtime.workspace import (
    CommandResult,
    CommandSpec,
    MarkerStore,
    OutputCapture,
    SandboxUnavailable,
    split_path,
    storage_call,
)

from ._process import pump

SANDBOX_UID = 65534
PATH = "/usr/local/bin:/usr/bin:/bin"
ETC_ALLOW = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime",
             "passwd", "group", "nsswitch.conf", "ssl", "ca-certificates", "mime.types")
TAG = "AGENTLOOM_SANDBOX_"
MB = 1024 * 1024


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


def _kill_group(pid: int) -> None:
    """SIGKILL bwrap's process group; --die-with-parent and the pid namespace end the rest."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class BubblewrapRunner:
    module_id = "bwrap-runner/v1"

    def __init__(self, *, bwrap: str = "/usr/bin/bwrap", prlimit: str = "/usr/bin/prlimit",
                 sandbox_user: tuple[int, int] | None = None, tmp_size_mb: int = 64,
                 confirm_timeout_s: float = 5.0) -> None:
        self.bwrap = bwrap
        self.prlimit = prlimit
        self.sandbox_user = sandbox_user
        self.tmp_size_mb = tmp_size_mb
        self.confirm_timeout_s = confirm_timeout_s
        self._probed: str | None = None  # "" = ok, text = why unavailable
        self._probe_lock = threading.Lock()

    def checkpoint_config(self) -> dict[str, Any]:
        return {"tmp_size_mb": self.tmp_size_mb, "etc": list(ETC_ALLOW)}

    # -- availability ---------------------------------------------------------------------

    def ensure_available(self) -> None:
        with self._probe_lock:
            if self._probed is None:
                self._probed = self._probe()
        if self._probed:
            raise SandboxUnavailable(f"no command sandbox: {self._probed}")

    def _probe(self) -> str:
        if not (shutil.which(self.bwrap) and os.access(self.bwrap, os.X_OK)):
            return f"bubblewrap is not installed ({self.bwrap})"
        if not os.access(self.prlimit, os.X_OK) or not self.prlimit.startswith("/usr/"):
            return f"prlimit (util-linux) is missing under /usr ({self.prlimit})"
        if os.geteuid() == 0 and self.sandbox_user is None:
            return ("the host runs as root, where the kernel does not enforce the process "
                    "limit; run as a non-root user or configure sandbox_user")
        argv = [self.bwrap, "--unshare-all", "--unshare-user", "--die-with-parent",
                *self._system_binds(), "--", "/bin/true"]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=10, env=self._host_env(),
                                  **self._user_kwargs())
        except (OSError, subprocess.SubprocessError) as exc:
            return f"bubblewrap cannot start: {exc}"
        if done.returncode != 0:
            text = done.stderr.decode("utf-8", "replace").strip()[:300]
            return f"bubblewrap failed (user namespaces unavailable?): {text}"
        return ""

    # -- argv -----------------------------------------------------------------------------

    @staticmethod
    def _system_binds() -> list[str]:
        args = ["--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/lib", "/lib64", "/sbin"):
            if os.path.islink(top):
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
        return args

    def build_argv(self, spec: CommandSpec, workspace_root: str | Path, nonce: str) -> list[str]:
        limits = spec.limits
        cwd = "/".join(split_path(spec.cwd))
        args = [self.bwrap, "--unshare-all", "--unshare-user", "--disable-userns",
                "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox",
                *self._system_binds()]
        for name in ETC_ALLOW:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        args += ["--proc", "/proc", "--dev", "/dev",
                 "--size", str(self.tmp_size_mb * MB), "--tmpfs", "/dev/shm",
                 "--remount-ro", "/dev",
                 "--size", str(self.tmp_size_mb * MB), "--tmpfs", "/tmp",
                 "--bind", os.fspath(workspace_root), "/workspace"]
        for skill, host_path in sorted(spec.skills.items()):
            args += ["--ro-bind", os.fspath(host_path), f"/skills/{skill}"]
        args += ["--remount-ro", "/", "--clearenv", "--setenv", "PATH", PATH,
                 "--setenv", "HOME", "/workspace", "--setenv", "LANG", "C.UTF-8",
                 "--unsetenv", TAG + nonce,  # a no-op that tags the process command line
                 "--chdir", f"/workspace/{cwd}".rstrip("/"),
                 "--", self.prlimit, f"--cpu={limits.cpu_seconds}",
                 f"--as={limits.memory_mb * MB}", f"--nproc={limits.pids}",
                 f"--fsize={limits.file_size_mb * MB}", f"--nofile={limits.nofile}",
                 "--core=0", "--", *spec.resolved_argv()]
        return args

    @staticmethod
    def _host_env() -> dict[str, str]:
        return {"PATH": PATH, "LANG": "C.UTF-8"}  # no platform credentials reach bwrap

    def _user_kwargs(self) -> dict[str, Any]:
        if self.sandbox_user is None or self.sandbox_user == (os.getuid(), os.getgid()):
            return {}
        uid, gid = self.sandbox_user
        return {"user": uid, "group": gid, "extra_groups": []}

    # -- running --------------------------------------------------------------------------

    async def run(self, spec: CommandSpec, workspace: Any) -> CommandResult:
        """``workspace``: an ``InstanceWorkspace`` (``root``, ``lock_dir``)."""
        return await storage_call(
            lambda cancel: self.run_sync(spec, workspace.root, workspace.lock_dir, cancel))

    def run_sync(self, spec: CommandSpec, workspace_root: str | Path, lock_dir: str | Path,
                 cancel: threading.Event | None = None) -> CommandResult:
        self.ensure_available()
        markers = MarkerStore(lock_dir)
        nonce = secrets.token_hex(12)
        me = os.getpid()
        owner = {"runner": self.module_id, "nonce": nonce, "host": host_identity(),
                 "owner_pid": me, "owner_start": proc_start(me), "started_at": time.time()}
        markers.claim(spec.request_id, {**owner, "state": "started"})
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                self.build_argv(spec, workspace_root, nonce), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self._host_env(),
                start_new_session=True, close_fds=True, **self._user_kwargs())
        except OSError as exc:  # never started: nothing can be running
            markers.remove(spec.request_id)
            raise SandboxUnavailable(f"bubblewrap cannot start: {exc}") from exc
        try:
            result = self._wait(spec, proc, started, cancel)
        except BaseException:
            _kill_group(proc.pid)  # the marker stays: the fate is not confirmed
            raise
        markers.write_result(result)  # before the marker goes: "done" never looks "absent"
        if self._confirm_gone(nonce, self.confirm_timeout_s):
            markers.remove(spec.request_id)  # only now: the sandbox is confirmed gone
        else:  # left for reconcile, which may now decide without the owner
            markers.write(spec.request_id, {**owner, "state": "exited", "pid": proc.pid})
        return result

    def _wait(self, spec: CommandSpec, proc: subprocess.Popen[bytes], started: float,
              cancel: threading.Event | None) -> CommandResult:
        out = OutputCapture(spec.limits.output_cap_bytes)
        err = OutputCapture(spec.limits.output_cap_bytes)

        outcome = pump(proc, out, err, deadline=started + spec.timeout_s, cancel=cancel,
                       kill=lambda: _kill_group(proc.pid))
        code = proc.wait()
        (oh, ot), (eh, et) = out.texts(), err.texts()
        killed = outcome.timed_out or outcome.cancelled
        return CommandResult(
            request_id=spec.request_id, exit_code=None if killed or code < 0 else code,
            stdout_head=oh, stdout_tail=ot, stderr_head=eh, stderr_tail=et,
            stdout_truncated=out.truncated, stderr_truncated=err.truncated,
            stdout_bytes=out.total, stderr_bytes=err.total,
            duration_s=round(time.monotonic() - started, 3), timed_out=outcome.timed_out,
            signal=-code if code < 0 else None,
            error="cancelled" if outcome.cancelled else None)

    @staticmethod
    def _confirm_gone(nonce: str, timeout_s: float, *, settle: bool = False) -> bool:
        """No live process carries the tag. ``settle``: look twice, for a crashed owner
        whose fork might not have exec'd bwrap yet (its own Popen returns after exec)."""
        deadline = time.monotonic() + timeout_s
        while tagged_processes(nonce):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        if settle:
            time.sleep(0.05)
            return not tagged_processes(nonce)
        return True

    # -- recovery -------------------------------------------------------------------------

    def reconcile(self, lock_dir: str | Path) -> list[str]:
        """Remove the markers whose sandboxes are verifiably gone; return their ids.
        Markers from another runner, host, boot or pid namespace are left for an operator
        (or that host): no timeout declares a sandbox dead."""
        markers = MarkerStore(lock_dir)
        here = host_identity()
        resolved = []
        for marker in markers.pending():
            if not self._verifiably_gone(marker, here):
                continue
            markers.remove(str(marker["request_id"]))
            resolved.append(str(marker["request_id"]))
        return resolved

    def _verifiably_gone(self, marker: Mapping[str, Any], here: Mapping[str, Any]) -> bool:
        if marker.get("corrupt") or marker.get("runner") != self.module_id:
            return False
        if marker.get("host") != here or not marker.get("nonce"):
            return False
        start = proc_start(int(marker.get("owner_pid") or 0)) if marker.get("owner_pid") else None
        owner_alive = start is not None and start == marker.get("owner_start")
        if owner_alive and marker.get("state") != "exited":
            return False  # its owner is still in charge of it
        return self._confirm_gone(str(marker["nonce"]), 0.0, settle=True)
