"""``workspace_command``: the spec, the result, the runner port and durable markers.

A step never runs a command. The tool handler builds a ``CommandSpec``; the engine saves it
and returns ``next=command``; a ``CommandRunner`` (bubblewrap locally, an ECS Fargate task
in AWS) executes it and writes a ``CommandResult`` by request id; the next step records it.

Markers (docs/contract.md#markers), in the session lock directory (never mounted into a sandbox)::

    <lock_dir>/markers/<request_id>.json   written (fsync'd) before a sandbox starts;
                                           removed by the runner once the sandbox is
                                           confirmed gone, or by the engine after an
                                           operator's verdict (``release``)
    <lock_dir>/results/<request_id>.json   the CommandResult, written before the marker goes;
                                           removed once the run's commit holds it
                                           (``forget``: it is the command's output)

While a marker may still have a running sandbox, the store refuses writes, edits,
deletes, mkdir and new commands (``sandbox_marker_present``); reads still work. No
timeout ever declares an old sandbox dead. Only proof does, given by the runner's
``MarkerLiveness``: a marker of this host and boot whose sandbox provably holds no
process, and whose owner is dead or has finished with it (state ``exited``), no longer
blocks. It still stays: its request still looks ``started`` (fate unknown) until an
operator resolves it. Without a liveness every marker blocks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from ._locking import remove_file, write_json, write_lock
from .errors import WorkspaceError

FORMAT = 1
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
MAX_COMMAND_CHARS = 16_384

LookupState = Literal["absent", "started", "done"]


def check_request_id(request_id: str) -> str:
    if not isinstance(request_id, str) or not _ID.match(request_id) or ".." in request_id:
        raise WorkspaceError("invalid_argument", "request ids use [A-Za-z0-9._:-] only")
    return request_id


@dataclass(frozen=True)
class CommandLimits:
    cpu_seconds: int = 60
    memory_mb: int = 1024
    pids: int = 128
    file_size_mb: int = 256
    output_cap_bytes: int = 64 * 1024
    nofile: int = 256
    disk_quota_mb: int = 1024  # the instance workspace, as the command sees it

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise WorkspaceError("invalid_argument", f"limit {name} must be a positive int")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> CommandLimits:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in (data or {}).items() if k in known})


@dataclass(frozen=True)
class CommandSpec:
    """One shell invocation; JSON round-trips exactly (it lives in the checkpoint)."""

    request_id: str
    argv: tuple[str, ...] | None = None
    command: str | None = None  # run as ``/bin/sh -c command`` when argv is None
    cwd: str = "."  # relative to the instance workspace
    timeout_s: float = 120.0
    limits: CommandLimits = field(default_factory=CommandLimits)
    skills: Mapping[str, str] = field(default_factory=dict)  # id -> host path, mounted ro

    def __post_init__(self) -> None:
        check_request_id(self.request_id)
        if (self.argv is None) == (self.command is None):
            raise WorkspaceError("invalid_argument", "give exactly one of argv or command")
        if self.argv is not None and (not self.argv or not all(
                isinstance(a, str) and "\x00" not in a for a in self.argv)):
            raise WorkspaceError("invalid_argument", "argv must be non-empty strings")
        text = self.command if self.command is not None else " ".join(self.argv or ())
        if not text.strip() or "\x00" in text or len(text) > MAX_COMMAND_CHARS:
            raise WorkspaceError("invalid_argument",
                                 f"the command must be 1..{MAX_COMMAND_CHARS} chars without NUL")
        if not 0 < self.timeout_s <= 86_400:
            raise WorkspaceError("invalid_argument", "timeout_s must be in (0, 86400]")
        for skill in self.skills:
            if not _ID.match(skill) or ":" in skill:
                raise WorkspaceError("invalid_argument", f"invalid skill id {skill!r}")

    def resolved_argv(self) -> list[str]:
        return list(self.argv) if self.argv is not None else ["/bin/sh", "-c", self.command or ""]

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "request_id": self.request_id,
                "argv": list(self.argv) if self.argv is not None else None,
                "command": self.command, "cwd": self.cwd, "timeout_s": self.timeout_s,
                "limits": asdict(self.limits), "skills": dict(self.skills)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CommandSpec:
        if data.get("format") != FORMAT:
            raise WorkspaceError("invalid_argument", "unknown command spec format")
        argv = data.get("argv")
        return cls(request_id=data["request_id"], argv=tuple(argv) if argv is not None else None,
                   command=data.get("command"), cwd=data.get("cwd", "."),
                   timeout_s=float(data.get("timeout_s", 120.0)),
                   limits=CommandLimits.from_dict(data.get("limits")),
                   skills=dict(data.get("skills") or {}))


@dataclass(frozen=True)
class CommandResult:
    request_id: str
    exit_code: int | None  # None when killed (timeout, cancellation) or never started
    stdout_head: str = ""
    stdout_tail: str = ""
    stderr_head: str = ""
    stderr_tail: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    duration_s: float = 0.0
    timed_out: bool = False
    signal: int | None = None  # the signal that ended the command, when known
    error: str | None = None  # runner-side failure text (not the command's own output)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CommandResult:
        if data.get("format") != FORMAT:
            raise WorkspaceError("invalid_argument", "unknown command result format")
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


class OutputCapture:
    """Keeps the first and last ``cap // 2`` bytes of a stream and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def texts(self) -> tuple[str, str]:
        return (self.head.decode("utf-8", "replace"), self.tail.decode("utf-8", "replace"))


def write_result(results_dir: str | Path, result: CommandResult) -> None:
    """Atomically write ``<results_dir>/<request_id>.json`` (fsync'd file and directory)."""
    check_request_id(result.request_id)
    write_json(Path(results_dir), f"{result.request_id}.json", result.to_dict())


class CommandRunner(Protocol):
    """Executes a saved spec; raises ``SandboxUnavailable`` rather than use a host shell."""

    module_id: str

    def checkpoint_config(self) -> dict[str, Any]: ...

    def ensure_available(self) -> None: ...

    async def run(self, spec: CommandSpec, workspace: Any) -> CommandResult:
        """``workspace`` is the ``InstanceWorkspace`` (root, lock_dir) of the spec's call."""
        ...


MarkerState = Literal["present", "absent", "corrupt"]


class MarkerLiveness(Protocol):
    """What a runner can prove about a marker it wrote (``None``: cannot tell)."""

    def host_matches(self, marker: Mapping[str, Any]) -> bool:
        """Written by this runner on this host, boot and pid namespace."""
        ...

    def owner_alive(self, marker: Mapping[str, Any]) -> bool | None: ...

    def sandbox_alive(self, marker: Mapping[str, Any]) -> bool | None: ...


class MarkerStore:
    """Durable execution markers and results of one session lock directory.

    ``liveness`` (given by the runner) lets markers that provably hold nothing stop
    blocking; ``None``: nothing can be proven, every marker blocks."""

    def __init__(self, lock_dir: str | Path, *, liveness: MarkerLiveness | None = None) -> None:
        self.lock_dir = Path(lock_dir)
        self.markers = self.lock_dir / "markers"
        self.results = self.lock_dir / "results"
        self.liveness = liveness

    def claim(self, request_id: str, info: Mapping[str, Any]) -> None:
        """Write the marker for a new start; refused while a blocking marker exists, and
        always when this request has one (an earlier attempt of unknown fate is never
        re-run blindly)."""
        check_request_id(request_id)
        with write_lock(self.lock_dir):
            own = self._read(request_id)
            if own is not None:
                raise WorkspaceError(
                    "sandbox_marker_present", f"request {request_id} already has a marker: "
                    "an earlier attempt of unknown fate is never re-run",
                    details={"request_ids": [request_id]})
            self.refuse_if_pending()
            write_json(self.markers, f"{request_id}.json",
                       {"format": FORMAT, "request_id": request_id, **info})

    def write(self, request_id: str, info: Mapping[str, Any]) -> None:
        """Write or update a marker (fsync'd) under the write lock."""
        check_request_id(request_id)
        with write_lock(self.lock_dir):
            write_json(self.markers, f"{request_id}.json",
                       {"format": FORMAT, "request_id": request_id, **info})

    def remove(self, request_id: str) -> None:
        """The runner's: only after the sandbox is confirmed gone."""
        check_request_id(request_id)
        remove_file(self.markers, f"{request_id}.json")

    def release(self, request_id: str) -> None:
        """The engine's, and only once an operator's verdict on the request is committed:
        remove the marker (idempotent). Results stay."""
        check_request_id(request_id)
        with write_lock(self.lock_dir):
            remove_file(self.markers, f"{request_id}.json")

    def _read(self, request_id: str) -> dict[str, Any] | None:
        """The marker, ``{"corrupt": True, ...}`` when unreadable, None when absent."""
        try:
            raw = (self.markers / f"{request_id}.json").read_text("utf-8")
        except FileNotFoundError:
            return None
        except OSError:
            return {"request_id": request_id, "corrupt": True}
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            return {"request_id": request_id, "corrupt": True}
        return data

    def pending(self) -> list[dict[str, Any]]:
        """Every marker (blocking or not); an unreadable one is reported, never ignored."""
        if not self.markers.is_dir():
            return []
        found = (self._read(entry.name[:-5]) for entry in sorted(self.markers.iterdir())
                 if entry.name.endswith(".json"))
        return [marker for marker in found if marker is not None]  # None: removed meanwhile

    def _facts(self, marker: Mapping[str, Any]) -> tuple[bool, bool | None, bool | None]:
        """(host_matches, owner_alive, sandbox_alive) as the liveness can prove them."""
        if self.liveness is None or marker.get("corrupt"):
            return False, None, None
        return (self.liveness.host_matches(marker), self.liveness.owner_alive(marker),
                self.liveness.sandbox_alive(marker))

    def _blocks(self, marker: Mapping[str, Any],
                facts: tuple[bool, bool | None, bool | None]) -> bool:
        """Blocks unless proven harmless: same host and boot, no process of its sandbox,
        and an owner that is dead or done with it (past the start, so none can follow)."""
        host, owner, sandbox = facts
        done = owner is False or (owner is True and marker.get("state") == "exited")
        return not (host and sandbox is False and done)

    def blocking(self) -> list[dict[str, Any]]:
        """The markers that may still have a running sandbox."""
        return [m for m in self.pending() if self._blocks(m, self._facts(m))]

    def refuse_if_pending(self) -> None:
        blocking = self.blocking()
        if blocking:
            ids = [str(m.get("request_id", "?")) for m in blocking]
            raise WorkspaceError(
                "sandbox_marker_present",
                "a command sandbox of unknown fate may still be running ("
                + ", ".join(ids) + "); writes and new commands are refused until it is "
                "resolved; read-only tools still work", details={"request_ids": ids})

    def describe(self, request_id: str) -> dict[str, Any]:
        """What the host knows about one request, for an operator (nothing is changed)."""
        check_request_id(request_id)
        marker = self._read(request_id)
        exit_seen = (self.results / f"{request_id}.json").exists()
        try:
            result = self.read_result(request_id)
        except (ValueError, TypeError, KeyError, AttributeError, WorkspaceError):
            result = None  # an unreadable result: exit_seen says a file is there
        facts = self._facts(marker) if marker is not None else (False, None, None)
        started_at = (marker or {}).get("started_at")
        state: MarkerState = ("absent" if marker is None
                              else "corrupt" if marker.get("corrupt") else "present")
        return {"request_id": request_id, "marker": state,
                "state": (marker or {}).get("state") if state == "present" else None,
                "started_at": float(started_at) if isinstance(started_at, int | float)
                and not isinstance(started_at, bool) else None,
                "host_matches": facts[0], "owner_alive": facts[1], "sandbox_alive": facts[2],
                "blocking": marker is not None and self._blocks(marker, facts),
                "exit_seen": exit_seen,
                "result": result.to_dict() if result is not None else None}

    def write_result(self, result: CommandResult) -> None:
        write_result(self.results, result)

    def forget(self, request_id: str) -> None:
        """The engine's, once the commit recording the command holds its result: the
        result file goes (it holds the command's output in clear). While the marker is
        there the result stays: it tells the marker's cleaner (the runner, or the AWS
        step) that the command finished, and that cleaner forgets it then."""
        check_request_id(request_id)
        if not (self.markers / f"{request_id}.json").exists():
            remove_file(self.results, f"{request_id}.json")

    def read_result(self, request_id: str) -> CommandResult | None:
        check_request_id(request_id)
        try:
            raw = (self.results / f"{request_id}.json").read_text("utf-8")
        except FileNotFoundError:
            return None
        return CommandResult.from_dict(json.loads(raw))

    def lookup(self, request_id: str) -> tuple[LookupState, dict[str, Any] | None]:
        """The engine's view: ``done`` with the result, ``started`` (marker, no result:
        fate unknown, blocking or not), or ``absent`` (never started: safe to run)."""
        result = self.read_result(request_id)
        if result is not None:
            return "done", result.to_dict()
        if (self.markers / f"{check_request_id(request_id)}.json").exists():
            return "started", None
        return "absent", None
