"""A heartbeat for long silent stretches of a test run (registered by tests/conftest.py).

``pytest -q`` prints a dot per finished test, so a test that runs for minutes (the CLI
crash matrix, a moto-backed state machine) looks like a hang. When no test has finished
for ``AGENTLOOM_PROGRESS_SECONDS`` (default 30), this prints one line saying how many
tests are done and which are still running, and for how long::

    … 1204/3151 done, 3:05 in; running: tests/e2e/test_cli_crash_matrix.py::test_… (2:10)

It runs where the terminal is: in the controller under pytest-xdist (which forwards each
worker's test start and finish), in the only process otherwise. ``0`` turns it off.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

SECONDS = float(os.environ.get("AGENTLOOM_PROGRESS_SECONDS", "30"))


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}:{rest:02d}"


class Heartbeat:
    def __init__(self, config: pytest.Config, every: float = SECONDS) -> None:
        self._config = config
        self._every = every
        self._lock = threading.Lock()
        self._running: dict[str, float] = {}  # nodeid -> when it started
        self._done = 0
        self._total: int | None = None
        self._started = time.monotonic()
        self._last = self._started  # a test finished, or a heartbeat was printed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="agentloom-heartbeat",
                                        daemon=True)

    # -- what pytest (or xdist, for its workers) reports

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._total = len(session.items)

    @pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._total = len(ids)  # every worker collects the same tests

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        with self._lock:
            self._running[nodeid] = time.monotonic()

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        with self._lock:
            self._running.pop(nodeid, None)
            self._done += 1
            self._last = time.monotonic()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self) -> None:
        self._started = self._last = time.monotonic()
        self._thread.start()

    def pytest_sessionfinish(self) -> None:
        self._stop.set()

    # -- the line

    def _beat(self) -> None:
        while not self._stop.wait(min(self._every, 5.0)):
            now = time.monotonic()
            with self._lock:
                if now - self._last < self._every:
                    continue
                self._last = now
                line = self.line(now)
            self._write(line)

    def line(self, now: float) -> str:
        total = f"/{self._total}" if self._total is not None else ""
        running = sorted(self._running.items(), key=lambda item: item[1])
        what = ", ".join(f"{nodeid} ({_clock(now - since)})" for nodeid, since in running)
        return (f"… {self._done}{total} done, {_clock(now - self._started)} in; "
                f"running: {what or 'nothing yet (workers starting, collecting)'}")

    def _write(self, line: str) -> None:
        reporter = self._config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        if reporter._tw.width_of_current_line:
            reporter._tw.line()
        reporter._tw.line(line)
        reporter._tw.flush()


def register(config: pytest.Config) -> None:
    """Install the heartbeat in the process that owns the terminal (not in xdist
    workers, whose output the controller never shows)."""
    if SECONDS <= 0 or hasattr(config, "workerinput"):
        return
    config.pluginmanager.register(Heartbeat(config), "agentloom-heartbeat")
