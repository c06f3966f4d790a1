"""A cold start's imports and wiring run with the cyclic garbage collector paused.

Wiring imports ~600–750 modules and builds their classes, pydantic models and
dataclasses: ~140 collections, a full one among them, ≈ 70 ms of the ~300 ms of CPU a
cold start spends there, and nearly everything they scan lives as long as the container.
So ``cold_start`` pauses collection while a handler's ``_wire`` runs (and
``paused_collector`` while the CLI imports its local app) and then freezes what exists
(``gc.freeze``: later collections, warm invocations' too, skip those objects); the
little cyclic garbage the imports leave stays with them, once per container (peak RSS
+0.3–0.5 MB; wiring CPU −60 to −75 ms, measured on the built bundle, 2026-12-02).
"""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


@contextlib.contextmanager
def paused_collector() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def cold_start(wire: Callable[[], T]) -> Callable[[], T]:
    @functools.wraps(wire)
    def wired() -> T:
        with paused_collector():
            return wire()

    return wired
