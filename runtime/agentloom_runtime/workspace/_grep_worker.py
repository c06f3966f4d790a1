"""Regex grep in a killable child process.

CPython's ``re`` cannot be interrupted inside one ``search`` (catastrophic backtracking on
a single line can run for hours and holds the thread), so a user-supplied regex runs here:
the parent kills this process at the deadline and keeps the matches already streamed.
Protocol: one JSON request on stdin; JSON lines out: ``{"m": match}``..., then
``{"stats": {...}}`` or ``{"error": {"code", "message"}}``.
The parent side is ``run_regex_grep``.
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import subprocess
import sys
import threading
import time
from dataclasses import fields
from typing import Any

from ._paths import open_root
from ._scan import Budget, Stats, grep_tree, regex_matcher
from .errors import WorkspaceError

_NOT_SENT = ("cancel", "started")


def run_regex_grep(root: str, parts: tuple[str, ...], pattern: str,
                   include: tuple[str, ...] | None, ignore_case: bool,
                   budget: Budget) -> dict[str, Any]:
    """Parent side: start the worker, kill it at the deadline (or on cancel) and keep the
    matches that were streamed before the kill."""
    request = {"root": root, "start": list(parts), "pattern": pattern,
               "ignore_case": ignore_case, "include": list(include) if include else None,
               "budget": {f.name: getattr(budget, f.name) for f in fields(budget)
                          if f.name not in _NOT_SENT}}
    lines, killed = _run(json.dumps(request).encode(), budget.seconds + 1.0, budget.cancel)
    matches: list[Any] = []
    stats: dict[str, Any] = {"truncated": True, "timed_out": killed}
    for line in lines:
        if "m" in line:
            matches.append(line["m"])
        elif "stats" in line:
            stats = line["stats"]
        elif "error" in line:
            raise WorkspaceError(line["error"]["code"], line["error"]["message"])
    return {"matches": matches, **stats}


def _run(request: bytes, seconds: float, cancel: threading.Event | None
         ) -> tuple[list[dict[str, Any]], bool]:
    env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "LANG": "C.UTF-8",
           "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-s", "-m", __name__], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    except OSError as exc:
        raise WorkspaceError("regex_unavailable", f"cannot start the regex worker: {exc}") from exc
    killed = False
    pending: bytes | None = request
    deadline = time.monotonic() + seconds
    while True:
        try:
            out, _ = proc.communicate(pending, timeout=0.05)
            break
        except subprocess.TimeoutExpired:
            pending = None  # already sent; communicate keeps what was read so far
            if not killed and (time.monotonic() >= deadline
                               or (cancel is not None and cancel.is_set())):
                proc.kill()
                killed = True
    lines = []
    for raw in out.splitlines():
        try:
            lines.append(json.loads(raw))
        except ValueError:
            break  # a line cut by the kill
    return lines, killed


def _emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    sys.stdout.flush()  # the parent keeps whatever arrived before a kill


def main() -> int:
    request = json.loads(sys.stdin.read())
    budget = Budget(**request["budget"])
    # second fence: the kernel stops this process even if the parent's kill never comes
    cpu = math.ceil(budget.seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    flags = re.IGNORECASE if request.get("ignore_case") else 0
    try:
        compiled = re.compile(request["pattern"], flags)
    except re.error as exc:
        _emit({"error": {"code": "invalid_argument", "message": f"invalid regex: {exc}"}})
        return 0
    include = tuple(request["include"]) if request.get("include") is not None else None
    stats = Stats()
    try:
        root_fd = open_root(request["root"])
        try:
            grep_tree(root_fd, tuple(request["start"]), regex_matcher(compiled, budget),
                      budget, stats, lambda m: _emit({"m": m}), include=include)
        finally:
            os.close(root_fd)
    except WorkspaceError as exc:
        _emit({"error": {"code": exc.code, "message": exc.message}})
        return 0
    _emit({"stats": stats.to_dict()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
