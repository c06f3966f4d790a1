"""Suite-wide settings. In CI (``CI=true``) property tests draw a fixed sequence of
examples, so a landing run is reproducible; locally they explore new examples each run."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


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
