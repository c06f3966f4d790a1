"""Crash sweeps, sampled in the default run and complete in the sweep job.

A sweep derives its points from a reference run (every commit, every write point, every
transcript line), so a new point is swept, not skipped. Each point stays a test of its
own; the default run (``bin/test``, plain ``pytest``) keeps an evenly spread sample that
always includes the first and the last points, and every other point carries the
``sweep`` marker. tests/conftest.py leaves ``sweep`` tests out unless the ``-m``
expression names the marker, so ``pytest -m sweep`` (``bin/test --sweeps``, which CI
runs after the default run) runs exactly the points the default run left out: the two
runs together cover every point once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

MARK = pytest.mark.sweep


def sampled(count: int, keep: int) -> set[int]:
    """Indexes kept by the default run: ``keep`` of ``range(count)``, evenly spread, the
    first and the last among them (all of them when ``count <= keep``)."""
    if count <= keep:
        return set(range(count))
    if keep < 2:
        raise ValueError("a sample keeps at least the first and the last point")
    return {round(i * (count - 1) / (keep - 1)) for i in range(keep)}


def split(points: Sequence[T], keep: int) -> tuple[list[T], list[T]]:
    """``(sample, rest)``: the points the default run keeps, and the others."""
    kept = sampled(len(points), keep)
    return ([p for i, p in enumerate(points) if i in kept],
            [p for i, p in enumerate(points) if i not in kept])


def params(points: Sequence[T], keep: int,
           ids: Callable[[T], str] | None = None) -> list[Any]:
    """``pytest.param`` per point for ``parametrize``; the points outside the sample are
    marked ``sweep``. Tuples are spread over the parameter names."""
    kept = sampled(len(points), keep)
    out = []
    for index, point in enumerate(points):
        values = point if isinstance(point, tuple) else (point,)
        out.append(pytest.param(*values, id=ids(point) if ids else None,
                                marks=() if index in kept else MARK))
    return out
