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

Never outliving the owner (the process that runs ``run_sync``; it may have many threads,
and a parent-death signal follows the *thread* that forked, while files close with the
last thread). The chain, each link armed before the next one starts:

1. The launcher, ``setpriv --pdeathsig KILL`` + ``sh``: single-threaded, it checks that
   ``$PPID`` is still the owner once the signal is armed (an owner that died earlier is
   caught here), then runs bwrap as its child and waits. It alone holds the read end of
   the gate pipe (its stdin); bwrap gets the write end as stdin.
2. bwrap's monitor arms ``--die-with-parent`` (tied to the launcher) before it releases
   its child; the child arms its own (tied to the monitor) just before it execs.
3. The gate (``--as-pid-1``: the command is the namespace's pid 1, tied directly to the
   monitor) writes one byte to its stdin before it execs the command. The write fails
   once the launcher is gone, so a child whose monitor or launcher died during its setup
   never starts the command. The owner keeps no end of that pipe.
4. Killing a sandbox (timeout, cancel, quota) SIGKILLs every process of its pid
   namespace directly, then the launcher's group (the gate closes with the launcher),
   then whatever still carries the nonce (through pidfds: no pid reuse race).

A ``setpriv`` that exec'd bwrap directly would kill the monitor in the middle of its
``clone`` (slow: network namespace) and leave the child blocked forever on bwrap's
start-up eventfd; with the launcher as the monitor's parent, the monitor is orphaned
instead, and its child stops at the gate.

Until the gate is passed every sandbox process carries ``AGENTLOOM_SANDBOX_<nonce>`` in
its command line (bwrap's argv, the gate's ``$0``); past it the command dies with the
monitor. So "no process carries the nonce" means the sandbox is gone.

Disk: ``CommandLimits.disk_quota_mb`` per workspace (see ``_quota``); a command stopped
by it reports ``error="disk_quota_exceeded"``.

Markers (docs/contract.md#markers): claimed (fsync'd) before start; removed only after no process
carrying the nonce remains (state ``exited`` is recorded when that cannot be confirmed).
A marker left by a dead owner stays until an operator's verdict (``MarkerStore.release``);
``liveness`` lets the marker store see when such a marker provably holds nothing.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentloom_runtime.workspace import (
    CommandResult,
    CommandSpec,
    MarkerStore,
    OutputCapture,
    SandboxUnavailable,
    WorkspaceError,
    split_path,
    storage_call,
)

from ._liveness import (
    TAG,
    ProcessLiveness,
    host_identity,
    kill_namespaces,
    kill_sandbox_group,
    kill_tagged,
    pid_namespace,
    proc_start,
    sandbox_inits,
)
from ._liveness import tagged_processes as tagged_processes
from ._process import pump
from ._quota import QUOTA_EXCEEDED, QuotaWatch

SANDBOX_UID = 65534
PATH = "/usr/local/bin:/usr/bin:/bin"
ETC_ALLOW = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime",
             "passwd", "group", "nsswitch.conf", "ssl", "ca-certificates", "mime.types")
MB = 1024 * 1024
# $0: the owner's pid; {fd}: the gate pipe's write end (stdin is its read end). Not
# ``exec``: the launcher stays bwrap's parent (and the pipe's only reader).
LAUNCH = '[ "$PPID" = "$0" ] || exit 125; "$@" 0>/proc/self/fd/{fd}; exit $?'
GATE = 'printf . >&0 || exit 125; exec "$@" </dev/null'  # $0: the nonce tag


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@dataclass
class _Sandbox:
    """One started sandbox: its launcher process (the leader of its process group)."""

    proc: subprocess.Popen[bytes]
    nonce: str

    def kill(self) -> None:
        """SIGKILL the sandbox's own processes directly, first its session's group (one
        call), then whatever else is in its pid namespace — under load the chain
        monitor → pid 1 → namespace takes tens of milliseconds while a writer keeps
        writing — then the launcher's group (which closes the gate) and anything still
        carrying the nonce."""
        if self.proc.returncode is None:  # once reaped, its pid may be reused
            inits = sandbox_inits(self.proc.pid)
            for init in inits:
                kill_sandbox_group(init)
            kill_namespaces({ns for ns in map(pid_namespace, inits) if ns is not None})
            _kill_group(self.proc.pid)
        kill_tagged(self.nonce)


class BubblewrapRunner:
    module_id = "bwrap-runner/v1"

    def __init__(self, *, bwrap: str = "/usr/bin/bwrap", prlimit: str = "/usr/bin/prlimit",
                 setpriv: str = "/usr/bin/setpriv",
                 sandbox_user: tuple[int, int] | None = None, tmp_size_mb: int = 64,
                 confirm_timeout_s: float = 5.0, quota_poll_s: float = 0.001) -> None:
        self.bwrap = bwrap
        self.prlimit = prlimit
        self.setpriv = setpriv
        self.sandbox_user = sandbox_user
        self.tmp_size_mb = tmp_size_mb
        self.confirm_timeout_s = confirm_timeout_s
        self.quota_poll_s = quota_poll_s
        self.liveness = ProcessLiveness(self.module_id)
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
        for tool in (self.prlimit, self.setpriv):
            if not os.access(tool, os.X_OK) or not tool.startswith("/usr/"):
                return f"{os.path.basename(tool)} (util-linux) is missing under /usr ({tool})"
        if os.geteuid() == 0 and self.sandbox_user is None:
            return ("the host runs as root, where the kernel does not enforce the process "
                    "limit; run as a non-root user or configure sandbox_user")
        # the production chain (launcher, gate, pid 1) around ``true``: a gate that cannot
        # work here must make the sandbox unavailable, not fail every command with 125
        argv = [self.bwrap, "--unshare-all", "--unshare-user", "--die-with-parent",
                "--as-pid-1", *self._system_binds(), "--proc", "/proc", "--dev", "/dev",
                "--", "/bin/sh", "-c", GATE, TAG + "probe", "/bin/true"]
        try:
            sandbox = self._spawn(argv, os.getpid(), "probe")
            _, err = sandbox.proc.communicate(timeout=10)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"bubblewrap cannot start: {exc}"
        if sandbox.proc.returncode != 0:
            text = err.decode("utf-8", "replace").strip()[:300]
            return (f"bubblewrap failed (user namespaces unavailable?), exit "
                    f"{sandbox.proc.returncode}: {text}")
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

    def build_argv(self, spec: CommandSpec, workspace_root: str | Path, nonce: str, *,
                   fsize_bytes: int | None = None, gate: bool = False) -> list[str]:
        """bwrap's argv. ``fsize_bytes`` overrides the file-size limit (the quota's share);
        ``gate``: start the command through the owner gate (stdin must be its pipe)."""
        limits = spec.limits
        cwd = "/".join(split_path(spec.cwd))
        fsize = limits.file_size_mb * MB if fsize_bytes is None else fsize_bytes
        args = [self.bwrap, "--unshare-all", "--unshare-user", "--disable-userns",
                "--die-with-parent", "--as-pid-1", "--new-session", "--cap-drop", "ALL",
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
                 "--chdir", f"/workspace/{cwd}".rstrip("/"), "--"]
        if gate:
            args += ["/bin/sh", "-c", GATE, TAG + nonce]
        args += [self.prlimit, f"--cpu={limits.cpu_seconds}",
                 f"--as={limits.memory_mb * MB}", f"--nproc={limits.pids}",
                 f"--fsize={fsize}", f"--nofile={limits.nofile}",
                 "--core=0", "--", *spec.resolved_argv()]
        return args

    def launch_argv(self, bwrap_argv: list[str], owner_pid: int, gate_fd: int) -> list[str]:
        """The launcher (see the module docstring): its stdin must be the gate pipe's
        read end and ``gate_fd`` its write end."""
        return [self.setpriv, "--pdeathsig", "KILL", "--", "/bin/sh", "-c",
                LAUNCH.format(fd=int(gate_fd)), str(owner_pid), *bwrap_argv]

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
        missing = self._missing_skill(spec)
        if missing is not None:  # never started: no marker, a plain failure result
            return CommandResult(request_id=spec.request_id, exit_code=None,
                                 stderr_head=f"skill {missing!r} is not materialized on "
                                 "this host", error="skill_unavailable")
        markers = MarkerStore(lock_dir, liveness=self.liveness)
        nonce = secrets.token_hex(12)
        me = os.getpid()
        owner = {"runner": self.module_id, "nonce": nonce, "host": host_identity(),
                 "owner_pid": me, "owner_start": proc_start(me), "started_at": time.time()}
        markers.claim(spec.request_id, {**owner, "state": "started"})
        try:  # measured under the marker: file tools cannot write meanwhile
            quota = QuotaWatch(workspace_root, spec.limits.disk_quota_mb * MB,
                               poll_s=self.quota_poll_s)
            argv = self.build_argv(spec, workspace_root, nonce, gate=True,
                                   fsize_bytes=quota.file_limit(spec.limits.file_size_mb * MB))
            sandbox = self._spawn(argv, me, nonce)
        except OSError as exc:  # never started: nothing can be running
            markers.remove(spec.request_id)
            raise SandboxUnavailable(f"bubblewrap cannot start: {exc}") from exc
        try:
            result = self._supervise(spec, sandbox, quota, cancel)
        except BaseException:
            sandbox.kill()  # the marker stays (no result: the fate is unknown) ...
            self._mark_exited(markers, spec.request_id, owner, sandbox)  # ... owner done
            raise
        try:
            markers.write_result(result)  # before the marker goes: "done" never looks "absent"
        except WorkspaceError as err:  # a full disk: the marker stays (the outcome unknown)
            self._mark_exited(markers, spec.request_id, owner, sandbox)
            raise WorkspaceError(err.code, f"command {spec.request_id} ran (exit "
                                 f"{result.exit_code}), but its result could not be saved: "
                                 f"{err.message}", details={**err.details,
                                                            "request_id": spec.request_id}
                                 ) from err
        if self._confirm_gone(nonce, self.confirm_timeout_s):
            markers.remove(spec.request_id)  # only now: the sandbox is confirmed gone
        else:  # the liveness check decides later whether it still blocks
            self._mark_exited(markers, spec.request_id, owner, sandbox)
        return result

    @staticmethod
    def _missing_skill(spec: CommandSpec) -> str | None:
        """The first skill whose mount is not an absolute path to a real folder (not a
        link), checked before the marker is claimed."""
        for skill, host_path in sorted(spec.skills.items()):
            path = os.fspath(host_path)
            if not os.path.isabs(path) or os.path.islink(path) or not os.path.isdir(path):
                return skill
        return None

    def _spawn(self, bwrap_argv: list[str], owner_pid: int, nonce: str) -> _Sandbox:
        reader, writer = os.pipe2(os.O_CLOEXEC)  # the gate pipe: the launcher reads
        try:
            if self.sandbox_user is not None and os.geteuid() == 0:
                os.fchown(writer, *self.sandbox_user)  # it reopens /proc/self/fd/<writer>
            proc = subprocess.Popen(
                self.launch_argv(bwrap_argv, owner_pid, writer), stdin=reader,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(writer,),
                env=self._host_env(), start_new_session=True, close_fds=True,
                umask=0o077, **self._user_kwargs())  # what a command creates: its own
        finally:  # the owner keeps no end: the gate tells of the launcher alone
            os.close(reader)
            os.close(writer)
        return _Sandbox(proc, nonce)

    def _supervise(self, spec: CommandSpec, sandbox: _Sandbox, quota: QuotaWatch,
                   cancel: threading.Event | None) -> CommandResult:
        started = time.monotonic()
        quota.start(sandbox.kill)
        try:
            result = self._wait(spec, sandbox, started, cancel)
        finally:
            quota.stop()
        if result.error is None and quota.hit(spec.limits.file_size_mb * MB, result.exit_code):
            result = replace(result, error=QUOTA_EXCEEDED)
        return result

    @staticmethod
    def _mark_exited(markers: MarkerStore, request_id: str, owner: dict[str, Any],
                     sandbox: _Sandbox) -> None:
        """The owner is done with this sandbox (past its start, killed or exited)."""
        try:
            markers.write(request_id, {**owner, "state": "exited", "pid": sandbox.proc.pid})
        except Exception:  # best effort: a "started" marker only blocks longer
            pass

    def _wait(self, spec: CommandSpec, sandbox: _Sandbox, started: float,
              cancel: threading.Event | None) -> CommandResult:
        out = OutputCapture(spec.limits.output_cap_bytes)
        err = OutputCapture(spec.limits.output_cap_bytes)
        proc = sandbox.proc
        outcome = pump(proc, out, err, deadline=started + spec.timeout_s, cancel=cancel,
                       kill=sandbox.kill)
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
    def _confirm_gone(nonce: str, timeout_s: float) -> bool:
        """No live process carries the tag (see the module docstring)."""
        deadline = time.monotonic() + timeout_s
        while tagged_processes(nonce):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True
