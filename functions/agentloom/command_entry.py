"""Entry point of the Fargate command task: ``python -m agentloom.command_entry``.

Arguments (container override): ``--spec-json <CommandSpec JSON>`` [``--results-dir``];
environment: ``REQUEST_ID`` and ``WORKSPACE`` only. Runs the command once with cwd inside
/workspace, resource limits (setrlimit in the child: this process is single-threaded),
a scrubbed environment and capped output, kills its whole process group at the timeout,
then writes the ``CommandResult`` atomically to ``<results-dir>/<request_id>.json``.

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

PATH = "/usr/local/bin:/usr/bin:/bin"
MB = 1024 * 1024


def _limits(limits: CommandLimits) -> None:
    """Runs in the child between fork and exec."""
    for res, value in ((resource.RLIMIT_CPU, limits.cpu_seconds),
                       (resource.RLIMIT_AS, limits.memory_mb * MB),
                       (resource.RLIMIT_NPROC, limits.pids),
                       (resource.RLIMIT_FSIZE, limits.file_size_mb * MB),
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
    try:
        proc = subprocess.Popen(
            spec.resolved_argv(), cwd=_cwd(workspace, spec.cwd), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            env={"PATH": PATH, "HOME": workspace, "LANG": "C.UTF-8"},
            preexec_fn=lambda: _limits(spec.limits))  # safe: this process is single-threaded
    except (OSError, WorkspaceError) as exc:
        return CommandResult(request_id=spec.request_id, exit_code=None,
                             error=f"the command could not start: {exc}")

    def kill() -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    outcome = pump(proc, out, err, deadline=started + spec.timeout_s, cancel=None, kill=kill)
    code = proc.wait()
    kill()  # anything left in the command's session (background jobs) ends with the task
    (oh, ot), (eh, et) = out.texts(), err.texts()
    return CommandResult(
        request_id=spec.request_id, exit_code=None if outcome.timed_out or code < 0 else code,
        stdout_head=oh, stdout_tail=ot, stderr_head=eh, stderr_tail=et,
        stdout_truncated=out.truncated, stderr_truncated=err.truncated,
        stdout_bytes=out.total, stderr_bytes=err.total,
        duration_s=round(time.monotonic() - started, 3), timed_out=outcome.timed_out,
        signal=-code if code < 0 else None)


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
