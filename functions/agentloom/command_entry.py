"""Entry point of the Fargate command task: ``python -m agentloom.command_entry``.

Arguments (container override): ``--spec-json <CommandSpec JSON>`` [``--results-dir``];
environment: ``REQUEST_ID`` and ``WORKSPACE`` only. Runs the command once with cwd inside
/workspace, resource limits (setrlimit in the child: this process is single-threaded),
a scrubbed environment and capped output, kills its whole process group at the timeout,
then writes the ``CommandResult`` atomically to ``<results-dir>/<request_id>.json``.
The workspace disk quota holds as in the local sandbox (``sandbox._quota``): the file-size
limit is cut to what the quota has left and a scan every half second stops the command
once the workspace holds more (``error="disk_quota_exceeded"``); EFS is shared, so its
``statvfs`` says nothing about one workspace and only scans are used.

Exit status: 0 when the result file was written (the command's exit code is inside it),
2 for a bad invocation, 70 when the result could not be written.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from agentloom_runtime.workspace import (
    CommandLimits,
    CommandResult,
    CommandSpec,
    OutputCapture,
    WorkspaceError,
    split_path,
    write_result,
)

from .sandbox._process import pump
from .sandbox._quota import QUOTA_EXCEEDED, QuotaWatch

PATH = "/usr/local/bin:/usr/bin:/bin"
MB = 1024 * 1024


def _limits(limits: CommandLimits, fsize_bytes: int) -> None:
    """Runs in the child between fork and exec."""
    for res, value in ((resource.RLIMIT_CPU, limits.cpu_seconds),
                       (resource.RLIMIT_AS, limits.memory_mb * MB),
                       (resource.RLIMIT_NPROC, limits.pids),
                       (resource.RLIMIT_FSIZE, fsize_bytes),
                       (resource.RLIMIT_NOFILE, limits.nofile),
                       (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(res, (value, value))


def _cwd(workspace: str, relative: str) -> str:
    path = os.path.realpath(os.path.join(workspace, *split_path(relative)))
    root = os.path.realpath(workspace)
    if os.path.commonpath([path, root]) != root or not os.path.isdir(path):
        raise WorkspaceError("invalid_argument", "cwd is not a directory in the workspace")
    return path


def run(spec: CommandSpec, workspace: str) -> CommandResult:
    started = time.monotonic()
    out = OutputCapture(spec.limits.output_cap_bytes)
    err = OutputCapture(spec.limits.output_cap_bytes)
    file_size = spec.limits.file_size_mb * MB
    quota = QuotaWatch(workspace, spec.limits.disk_quota_mb * MB, poll_s=0.1,
                       far_poll_s=0.1, scan_every_s=0.5, use_statvfs=False)
    fsize = quota.file_limit(file_size)
    try:
        proc = subprocess.Popen(
            spec.resolved_argv(), cwd=_cwd(workspace, spec.cwd), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            env={"PATH": PATH, "HOME": workspace, "LANG": "C.UTF-8"},
            # safe: the quota thread starts only after the fork
            preexec_fn=lambda: _limits(spec.limits, fsize))
    except (OSError, WorkspaceError) as exc:
        return CommandResult(request_id=spec.request_id, exit_code=None,
                             error=f"the command could not start: {exc}")

    def kill() -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    quota.start(kill)
    try:
        outcome = pump(proc, out, err, deadline=started + spec.timeout_s, cancel=None,
                       kill=kill)
        code = proc.wait()
        kill()  # anything left in the command's session (background jobs) ends with the task
    finally:
        quota.stop()
    (oh, ot), (eh, et) = out.texts(), err.texts()
    exit_code = None if outcome.timed_out or code < 0 else code
    return CommandResult(
        request_id=spec.request_id, exit_code=exit_code,
        stdout_head=oh, stdout_tail=ot, stderr_head=eh, stderr_tail=et,
        stdout_truncated=out.truncated, stderr_truncated=err.truncated,
        stdout_bytes=out.total, stderr_bytes=err.total,
        duration_s=round(time.monotonic() - started, 3), timed_out=outcome.timed_out,
        signal=-code if code < 0 else None,
        error=QUOTA_EXCEEDED if quota.hit(file_size, exit_code) else None)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentloom.command_entry")
    parser.add_argument("--spec-json", required=True)
    parser.add_argument("--results-dir", default="/agentloom-results")
    args = parser.parse_args(argv)
    try:
        spec = CommandSpec.from_dict(json.loads(args.spec_json))
    except (ValueError, KeyError, TypeError, WorkspaceError) as exc:
        print(f"invalid command spec: {exc}", file=sys.stderr)
        return 2
    if os.environ.get("REQUEST_ID") != spec.request_id:
        print("REQUEST_ID does not match the spec", file=sys.stderr)
        return 2
    result = run(spec, os.environ.get("WORKSPACE", "/workspace"))
    try:
        write_result(args.results_dir, result)  # the session's <lock_dir>/results, alone
    except OSError as exc:
        print(f"cannot write the result: {exc}", file=sys.stderr)
        return 70
    return 0


if __name__ == "__main__":
    sys.exit(main())
