"""Head bases: a head row as a small delta against a content-addressed base document.

Most of a run's head changes rarely (the plan, labels, bindings, a frame's template and
budget fields) while a few fields change at every commit (counters, cursors, the call in
flight). ``BaseCheckpointStore`` therefore stores a head that is larger than
``BASE_MIN_BYTES`` as a reference to a *base* — an earlier head, stored once as a blob
of the run (content-addressed, sealed like any blob) — plus the delta from it::

    {"$base": "sha256:<hex of the base's JSON text>", "$delta": <patch>}

A patch is a JSON object: ``{key: [value]}`` sets ``key`` to ``value``, ``{key: []}``
removes it, ``{key: {…}}`` patches the object at ``key`` the same way (both sides are
objects). The delta grows as the head drifts from its base; once the row would exceed
``DELTA_BYTES`` the store *rebases* (the new head becomes the base, the row an empty
delta), at most once every ``REBASE_COMMITS`` commits so that a head whose changing part
alone is large does not write a blob per commit (it then keeps the shorter of the delta
row and the full head). The base blob is written before the conditional write, like a
spilled value: a crash or a lost compare-and-set leaves at most an unreferenced blob.

A head whose own top level has a ``"$base"`` key is always stored as a base reference,
so a row with that key is unambiguously one. ``Bases`` remembers the last base of each
run (bounded), so a warm writer diffs against it without reading it back.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

BASE_KEY = "$base"
DELTA_KEY = "$delta"
BASE_MIN_BYTES = 512  # a head this small stays inline (no base)
DELTA_BYTES = 640  # a row larger than this rebases (sealed + base64: < 1 KB item)
REBASE_COMMITS = 4  # at most one rebase per this many commits of a run
CACHED_RUNS = 256  # runs whose last base is remembered


def diff(base: Any, new: Any) -> dict[str, Any]:
    """The patch that turns the object ``base`` into the object ``new``."""
    patch: dict[str, Any] = {}
    for key, value in new.items():
        if key not in base:
            patch[key] = [value]
            continue
        old = base[key]
        if same(old, value):
            continue
        if isinstance(old, dict) and isinstance(value, dict):
            patch[key] = diff(old, value)
        else:
            patch[key] = [value]
    for key in base:
        if key not in new:
            patch[key] = []
    return patch


def same(a: Any, b: Any) -> bool:
    """JSON equality (``True`` is not ``1``, ``1`` is not ``1.0``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def apply(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``patch`` applied (``base`` is modified: pass a fresh copy)."""
    for key, change in patch.items():
        if isinstance(change, list):
            if change:
                base[key] = change[0]
            else:
                base.pop(key, None)
        elif isinstance(change, dict) and isinstance(base.get(key), dict):
            apply(base[key], change)
        else:
            raise ValueError(f"malformed head delta at {key!r}")
    return base


@dataclass(frozen=True)
class Base:
    key: str  # blob key of ``text``
    text: str  # the base's JSON text
    body: Any  # ``json.loads(text)``: read only, never handed out
    made_at: int  # the head version that made it (0: unknown, rebase allowed)


class Bases:
    """The last base of each run, for the next commit's delta (thread-safe, bounded)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: OrderedDict[str, Base] = OrderedDict()

    def get(self, run_id: str) -> Base | None:
        with self._lock:
            found = self._runs.get(run_id)
            if found is not None:
                self._runs.move_to_end(run_id)
            return found

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._runs.pop(run_id, None)

    def put(self, run_id: str, base: Base) -> None:
        with self._lock:
            self._runs[run_id] = base
            self._runs.move_to_end(run_id)
            while len(self._runs) > CACHED_RUNS:
                self._runs.popitem(last=False)


def is_reference(body: Any) -> bool:
    return isinstance(body, dict) and BASE_KEY in body


def parse_reference(body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(base key, patch) of a row, or None if malformed."""
    key, patch = body.get(BASE_KEY), body.get(DELTA_KEY)
    if not isinstance(key, str) or not isinstance(patch, dict) or len(body) != 2:
        return None
    return key, patch


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
