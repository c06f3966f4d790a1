"""The estimators' caches: costs by message identity (``_CostCache``) and by text, per
process and estimator kind (``_TextCache``), so re-estimating a growing view costs little
more than the new messages (``agentloom_runtime.context.estimators``)."""

from __future__ import annotations

from collections.abc import Callable

_IDENTITY_ENTRIES = 50_000  # a view of 10,000 messages and its stripped copies, twice
_TEXT_CHARS = 32_000_000  # per text cache, then it starts over
_TEXT_ENTRIES = 250_000  # per text cache, likewise


class _CostCache:
    """id(obj) → cost. ``alive`` holds every obj, so no other object can take its id while
    the entry exists: a hit is the same object. (No (obj, cost) tuple per entry: a view
    rebuilt from a checkpoint adds thousands, each one more object for the collector.)"""

    __slots__ = ("alive", "costs")

    def __init__(self) -> None:
        self.costs: dict[int, int] = {}
        self.alive: list[object] = []

    def get(self, obj: object) -> int | None:
        return self.costs.get(id(obj))

    def put(self, obj: object, cost: int) -> int:
        if len(self.costs) >= _IDENTITY_ENTRIES:
            self.clear()
        self.costs[id(obj)] = cost
        self.alive.append(obj)
        return cost

    def clear(self) -> None:
        # costs last: an id is in costs only while its object is in alive (entries are
        # added to costs first), even if another thread adds one meanwhile
        self.alive.clear()
        self.costs.clear()


class _TextCache:
    """text → cost, shared by the estimators of one kind in a process, so a view rebuilt
    from a checkpoint (new objects, same texts) is not measured again."""

    __slots__ = ("chars", "data")

    def __init__(self) -> None:
        self.data: dict[str, int] = {}
        self.chars = 0

    def cost(self, text: str, measure: Callable[[str], int]) -> int:
        hit = self.data.get(text)
        if hit is not None:
            return hit
        value = measure(text)
        if self.chars + len(text) > _TEXT_CHARS or len(self.data) >= _TEXT_ENTRIES:
            self.data.clear()
            self.chars = 0
        self.data[text] = value
        self.chars += len(text)
        return value


_TEXT_CACHES: dict[str, _TextCache] = {}


def _text_cache(key: str) -> _TextCache:
    return _TEXT_CACHES.setdefault(key, _TextCache())


def clear_text_caches() -> None:
    """Forget every text measured by value in this process (as in a new process)."""
    for cache in _TEXT_CACHES.values():
        cache.data.clear()
        cache.chars = 0
