"""The in-memory item store: the reference adapter (one process, tests)."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence

from agentloom_runtime.checkpoint.store import CompanionConflict

from .items import ABSENT, ANY, ItemStore, Stored, Write, WriteConflict


class InMemoryItemStore(ItemStore):
    def __init__(self) -> None:
        self._items: dict[str, dict[str, tuple[int, str]]] = {}
        self._keys: dict[str, list[str]] = {}  # pk -> sorted sks
        self._lock = threading.Lock()

    def _get(self, pk: str, sk: str) -> tuple[int, str] | None:
        with self._lock:
            return self._items.get(pk, {}).get(sk)

    def _query(self, pk: str, prefix: str, after: str | None, limit: int | None,
               reverse: bool) -> list[Stored]:
        with self._lock:
            keys = self._keys.get(pk, [])
            items = self._items.get(pk, {})
            low = bisect.bisect_left(keys, prefix)
            high = bisect.bisect_left(keys, prefix + "\U0010ffff")
            if not reverse:
                if after is not None:
                    low = max(low, bisect.bisect_right(keys, after))
                chosen = keys[low:high]
            else:
                if after is not None:
                    high = min(high, bisect.bisect_left(keys, after))
                chosen = keys[low:high][::-1]
            if limit is not None:
                chosen = chosen[:limit]
            return [Stored(sk, *items[sk]) for sk in chosen]

    def join_writes(self, writes: Sequence[Write], transaction: object) -> None:
        """In an ``InMemoryCheckpointStore`` commit (under its lock): transact now."""
        try:
            self.transact(writes)
        except WriteConflict as err:
            raise CompanionConflict(f"session stream: {err.message}") from err

    def _transact(self, writes: Sequence[Write]) -> None:
        with self._lock:
            for index, w in enumerate(writes):
                found = self._items.get(w.pk, {}).get(w.sk)
                version = found[0] if found else ABSENT
                if w.expect != ANY and w.expect != version:
                    raise WriteConflict(f"{w.pk} {w.sk}: version {version}, expected "
                                        f"{w.expect}", index=index, pk=w.pk, sk=w.sk)
            for w in writes:
                if w.check:
                    continue
                items = self._items.setdefault(w.pk, {})
                keys = self._keys.setdefault(w.pk, [])
                found = items.get(w.sk)
                if w.body is None:
                    if found is not None:
                        del items[w.sk]
                        keys.pop(bisect.bisect_left(keys, w.sk))
                    continue
                if found is None:
                    bisect.insort(keys, w.sk)
                items[w.sk] = ((found[0] if found else 0) + 1, w.body)
