"""Process plumbing shared by the bubblewrap runner and the Fargate command entry point."""

from __future__ import annotations

import os
import selectors
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from agentloom_runtime.workspace import OutputCapture

DRAIN_AFTER_KILL_S = 5.0


@dataclass
class PumpOutcome:
    timed_out: bool = False
    cancelled: bool = False
    drained: bool = True  # False: a pipe stayed open after the kill (a process survived)


def pump(proc: subprocess.Popen[bytes], out: OutputCapture, err: OutputCapture, *,
         deadline: float, cancel: threading.Event | None,
         kill: Callable[[], None]) -> PumpOutcome:
    """Read stdout and stderr into their caps until both close; kill the process group at
    the deadline, on cancel, or once the command itself has exited. Output beyond the caps
    is read and counted, never stored."""
    result = PumpOutcome()
    killed_at: float | None = None
    captures = {proc.stdout: out, proc.stderr: err}
    with selectors.DefaultSelector() as sel:
        for stream in captures:
            if stream is not None:
                sel.register(stream, selectors.EVENT_READ)
        while sel.get_map():
            now = time.monotonic()
            exited = proc.poll() is not None
            stop = now >= deadline or (cancel is not None and cancel.is_set())
            if killed_at is None and (exited or stop):
                # processes never outlive the call: background jobs still holding the
                # pipes after the command exited are killed with the group
                if not exited:
                    result.timed_out = now >= deadline
                    result.cancelled = not result.timed_out
                kill()
                killed_at = now
            if killed_at is not None and now - killed_at > DRAIN_AFTER_KILL_S:
                result.drained = False
                break
            wait = 0.1 if killed_at is not None else max(min(deadline - now, 0.1), 0.0)
            for key, _ in sel.select(timeout=wait):
                data = os.read(key.fd, 65536)
                if data:
                    captures[key.fileobj].feed(data)  # type: ignore[index]
                else:
                    sel.unregister(key.fileobj)
    for stream in captures:
        if stream is not None:
            stream.close()
    return result
