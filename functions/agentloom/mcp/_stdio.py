"""A stdio MCP server in the bubblewrap sandbox, for one session.

The command runs under ``BubblewrapRunner.build_argv`` (the sandbox of
``workspace_command``: no network, read-only root, cleared environment) with the
resource's ``limits`` (prlimit: address space, CPU seconds, processes, open files), a
private scratch ``/workspace`` and the resource's ``mounts`` read-only under
``/skills/<name>``. A small shell wrapper inside the sandbox loads an ``env``
credential from a file it deletes (never a command line), runs the server and, when
the server exits, writes its exit status to stderr.

The server's stderr goes to a pipe whose last few KiB are kept (never logged). A
session that fails after the server exited raises ``mcp_server_exited`` with the exit
status (or signal), the end of its stderr (the credential's value scrubbed) and the
limits it ran under — instead of the SDK's bare "Connection closed".
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import select
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from agentloom.mcp.errors import McpSchemaChanged, McpToolFailure
from agentloom.mcp.policy import McpPolicy
from agentloom.mcp.resources import Credential, McpSpec

MODES = {"auto": "auto", "2025-11-25": "legacy", "2026-07-28": "2026-07-28"}
_CREDENTIAL_FILE = ".agentloom-credential"
_EXIT = "[agentloom] the MCP server exited with status"
# stdio: (read the credential file, delete it, export it,) run the server ("$@"), then
# report its exit status on stderr
_LOAD = ('IFS= read -r v < /workspace/{f}; rm -f /workspace/{f}; {name}="$v"; '
         'export {name}; ')
_RUN = '"$@"; s=$?; printf "\\n%s %s\\n" "{exit}" "$s" >&2; exit "$s"'
TAIL_BYTES = 4_096
SHOWN_CHARS = 800


def _mounts(spec: McpSpec, policy: McpPolicy) -> dict[str, str]:
    roots = [Path(os.path.realpath(r)) for r in policy.stdio_roots]
    mounts: dict[str, str] = {}
    for host_path, name in spec.mounts.items():
        real = Path(os.path.realpath(host_path))
        if not any(real == r or real.is_relative_to(r) for r in roots):
            raise McpToolFailure("mcp_sandbox_unavailable", f"mount {name!r} is not under "
                                 "a folder this deployment allows for stdio servers")
        mounts[name] = str(real)
    return mounts


def stdio_argv(spec: McpSpec, credential: Credential | None, policy: McpPolicy,
               workspace: Path) -> list[str]:
    """bwrap's argv for the server (``BubblewrapRunner.build_argv``: the same sandbox as
    ``workspace_command``, the resource's limits), the credential read from a file in
    its private workspace."""
    from agentloom_runtime.workspace import CommandLimits, CommandSpec

    assert spec.command is not None
    script = _RUN.format(exit=_EXIT)
    if credential is not None and credential.kind == "env":
        (workspace / _CREDENTIAL_FILE).write_text(credential.value + "\n")
        script = _LOAD.format(f=_CREDENTIAL_FILE, name=credential.name) + script
    limits = spec.limits
    command = CommandSpec(
        request_id=f"mcp-{secrets.token_hex(6)}",
        argv=("/bin/sh", "-c", script, "sh", spec.command, *spec.args),
        timeout_s=spec.timeout_seconds, skills=_mounts(spec, policy),
        limits=CommandLimits(memory_mb=limits.memory_mb, cpu_seconds=limits.cpu_seconds,
                             pids=limits.pids, nofile=limits.nofile))
    built: list[str] = policy.sandbox.build_argv(command, workspace, secrets.token_hex(8))
    return built


class _StderrTail:
    """The read end of the server's stderr pipe, drained by a thread that keeps the
    last ``TAIL_BYTES``; ``errlog`` is the write end handed to the process. Reads happen
    under a lock, so ``exited_yet`` sees every byte written before it is called (the
    server's exit status line is written before its stdout closes)."""

    def __init__(self) -> None:
        self._fd, write_fd = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self._fd, False)
        self.errlog = os.fdopen(write_fd, "w")
        self._tail = b""
        self._eof = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, name="agentloom-mcp-stderr",
                                        daemon=True)
        self._thread.start()

    def _pull(self) -> None:
        """Read what the pipe holds now (the lock held)."""
        while not self._eof:
            try:
                chunk = os.read(self._fd, 65_536)
            except BlockingIOError:
                return
            if not chunk:
                self._eof = True
                os.close(self._fd)
                return
            self._tail = (self._tail + chunk)[-TAIL_BYTES:]

    def _drain(self) -> None:
        while True:
            with self._lock:
                if self._eof:
                    return
            try:
                select.select([self._fd], [], [], 0.1)
            except (OSError, ValueError):  # closed meanwhile by ``_pull``
                continue
            with self._lock:
                self._pull()

    def close(self) -> None:
        """Our copy of the write end (the process keeps its own)."""
        if not self.errlog.closed:
            self.errlog.close()

    def exited_yet(self) -> bool:
        """Whether the server's exit status line was written by now."""
        with self._lock:
            self._pull()
            return _EXIT.encode() in self._tail

    def text(self, wait: float) -> str:
        """The tail once every writer is gone (or after ``wait`` seconds)."""
        self.close()
        self._thread.join(wait)
        with self._lock:
            self._pull()
            return self._tail.decode("utf-8", "replace")


def exit_report(tail: str, spec: McpSpec, credential: Credential | None) -> str:
    """The message for a server that exited on its own (its status line in ``tail``)."""
    found = list(re.finditer(re.escape(_EXIT) + r" (\d+)", tail))
    status = int(found[-1].group(1)) if found else None
    how = ("exited" if status is None else f"was killed by signal {status - 128}"
           if status > 128 else f"exited with status {status}")
    said = (tail[:found[-1].start()] if found else tail).strip()
    if credential is not None and credential.value:
        said = said.replace(credential.value, "[redacted]")
    said = said[-SHOWN_CHARS:]
    limits = spec.limits
    return (f"the stdio MCP server {how} before it answered; it ran with limits "
            f"memory_mb={limits.memory_mb} (address space), cpu_seconds="
            f"{limits.cpu_seconds}, pids={limits.pids}, nofile={limits.nofile} — raise "
            "the resource's spec.limits if it needs more (Node and other V8 servers "
            "reserve a large address space: try memory_mb 16384). "
            + (f"The end of its stderr: {said}" if said else "It wrote nothing to stderr."))


@contextlib.asynccontextmanager
async def _transport(params: StdioServerParameters, stderr: _StderrTail,
                     exited: list[bool]) -> AsyncIterator[Any]:
    """The SDK's stdio transport; ``exited`` gets whether the server had exited on its
    own when the session began to close (before the SDK closes its stdin)."""
    async with stdio_client(params, errlog=stderr.errlog) as streams:
        stderr.close()  # the server holds its own copy
        try:
            yield streams
        finally:
            exited.append(stderr.exited_yet())


@contextlib.asynccontextmanager
async def stdio_session(spec: McpSpec, credential: Credential | None,
                        policy: McpPolicy) -> AsyncIterator[Client]:
    sandbox = policy.sandbox
    if sandbox is None:
        raise McpToolFailure("mcp_sandbox_unavailable", "stdio MCP servers need the "
                             "command sandbox, which this deployment does not have")
    try:
        sandbox.ensure_available()
    except Exception as exc:  # SandboxUnavailable: never fall back to the host
        raise McpToolFailure("mcp_sandbox_unavailable", str(exc)[:300]) from None
    workspace = Path(tempfile.mkdtemp(prefix="agentloom-mcp-"))
    stderr = _StderrTail()
    exited: list[bool] = []
    try:
        argv = stdio_argv(spec, credential, policy, workspace)
        params = StdioServerParameters(command=argv[0], args=argv[1:], env={})
        async with Client(_transport(params, stderr, exited),
                          mode=MODES[spec.protocol], cache=None) as client:
            yield client
    except (McpToolFailure, McpSchemaChanged):
        raise
    except Exception:
        if not any(exited):
            raise
        raise McpToolFailure("mcp_server_exited", exit_report(
            stderr.text(wait=2.0), spec, credential)) from None
    finally:
        stderr.close()
        shutil.rmtree(workspace, ignore_errors=True)
