"""Suite-wide settings. In CI (``CI=true``) property tests draw a fixed sequence of
examples, so a landing run is reproducible; locally they explore new examples each run.

How the run is shaped (bin/test runs it on every core with pytest-xdist):

- Crash sweeps are sampled: the points beyond the sample carry the ``sweep`` marker and
  run only when the ``-m`` expression names it (``pytest -m sweep``, ``bin/test
  --sweeps``); tests/support/sweeps.py.
- The CDK app is synthesized once per run, whichever workers need it
  (tests/infra/conftest.py).
- A line every 30 s without a finished test says what is still running
  (tests/support/progress.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest
from hypothesis import settings
from support import progress

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_configure(config: pytest.Config) -> None:
    progress.register(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "sweep" not in (config.option.markexpr or ""):
        rest = [item for item in items if item.get_closest_marker("sweep") is not None]
        if rest:
            config.hook.pytest_deselected(items=rest)
            items[:] = [item for item in items if item.get_closest_marker("sweep") is None]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Iterator[None]:
    """An xdist worker sends each report to the controller as UTF-8: captured output with
    a lone surrogate (tests of text that is made storable log one) would kill the worker,
    so such characters travel escaped."""
    outcome = yield
    if hasattr(item.config, "workerinput"):
        report = outcome.get_result()  # type: ignore[attr-defined]
        report.sections = [(title, text.encode("utf-8", "backslashreplace").decode())
                           for title, text in report.sections]


@pytest.fixture(autouse=True)
def _lambda_logging_stays_in_its_test() -> Iterator[None]:
    """A Lambda-mode test makes the Powertools Logger own the ``agentloom`` loggers (JSON
    on stdout, the run's ids appended), as it does for the life of a Lambda container;
    here the next test gets the process's logging back as it was."""
    from agentloom.observability import _logs

    loggers = [logging.getLogger(name) for name in ("agentloom", "agentloom_runtime")]
    # Powertools keeps its state on the stdlib logger (handlers, marker attributes)
    saved = [{k: list(v) if isinstance(v, list) else v for k, v in vars(lg).items()}
             for lg in loggers]
    yield
    _logs._powertools = None
    for lg, state in zip(loggers, saved, strict=True):
        lg.__dict__.clear()
        lg.__dict__.update(state)
