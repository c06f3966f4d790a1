"""A handler's wiring runs with the cyclic collector paused, and what it built is frozen
out of later collections (``agentloom.cold_start``)."""

from __future__ import annotations

import gc

import pytest

from agentloom.cold_start import cold_start
from agentloom.handlers import api, step, trigger


def test_wiring_runs_with_the_collector_paused_then_freezes_what_it_built():
    seen: list[bool] = []

    @cold_start
    def wire() -> str:
        seen.append(gc.isenabled())
        return "wired"

    before = gc.get_freeze_count()
    try:
        assert wire() == "wired" and seen == [False]
        assert gc.isenabled() and gc.get_freeze_count() > before
    finally:
        gc.unfreeze()


def test_a_failed_wiring_turns_the_collector_back_on():
    @cold_start
    def wire() -> None:
        raise RuntimeError("no table")

    try:
        with pytest.raises(RuntimeError, match="no table"):
            wire()
        assert gc.isenabled()
    finally:
        gc.unfreeze()


def test_each_handler_wires_through_it():
    wrapper = cold_start(lambda: None).__code__
    for handler in (api, step, trigger):
        assert handler._wire.__code__ is wrapper
