"""Structured run logs: the same calls on both hosts.

- Lambda: Powertools Logger (JSON on stdout) for the service ``agentloom``
  (``POWERTOOLS_SERVICE_NAME``). Its stdlib logger *is* the ``agentloom`` package logger,
  so every ``agentloom.*`` module's lines go through it too, and its configuration is
  copied to ``agentloom_runtime``; the run's ids are appended keys of that one formatter,
  so they are on every line of the invocation — the engine's own warnings included.
- Embedded: the stdlib logger ``agentloom.run``; the ids are in each line's text
  (``run=… session=… space=… step=…``) and in ``extra`` for structured handlers.

Only ids and allow-listed fields are logged (``observer.safe_fields``): never message text, tool
arguments or output, or keys.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import IO, Any, cast

_powertools: Any = None  # one Powertools Logger per process (warm starts reuse it)


class _Stdout:
    """``sys.stdout`` as it is when a line is written (a handler keeps its stream for
    the life of the process; whoever replaces ``sys.stdout`` later still gets the lines)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


def _lambda_logger() -> Any:
    global _powertools
    if _powertools is None:
        from aws_lambda_powertools import Logger
        from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

        _powertools = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", "agentloom"),
                             stream=cast(IO[str], _Stdout()))
        copy_config_to_registered_loggers(source_logger=_powertools,
                                          include={"agentloom_runtime"})
    return _powertools


class RunLog:
    """One run's log lines; ``keys`` are its ids (run, session, space, generation)."""

    def __init__(self, keys: Mapping[str, str | int], *, structured: bool) -> None:
        self.keys = dict(keys)
        self.step: int | None = None
        if structured:
            self._pt: Any = _lambda_logger()
            self._pt.remove_keys(["run_id", "session_id", "space_id", "generation", "step"])
            self._pt.append_keys(**self.keys)
        else:
            self._pt = None
            self._std = logging.getLogger("agentloom.run")

    def set_step(self, step: int | None) -> None:
        self.step = step
        if self._pt is not None:
            if step is None:
                self._pt.remove_keys(["step"])
            else:
                self._pt.append_keys(step=step)

    def write(self, level: int, what: str, fields: Mapping[str, Any]) -> None:
        if self._pt is not None:
            self._pt.log(level, what, extra=dict(fields))
            return
        if not self._std.isEnabledFor(level):
            return
        ids = {**self.keys, **({"step": self.step} if self.step is not None else {})}
        shown = " ".join(f"{k}={v}" for k, v in {**ids, **fields}.items())
        self._std.log(level, "%s %s", what, shown,
                      extra={"agentloom": {**ids, **fields, "event": what}})
