"""Read-only views of payload data, built lazily and never copied.

A handler receives the read-only fields of a payload (the message history, tool
schemas, counters…) as ``FrozenDict`` / ``FrozenList`` views over the host's own data:
creating one costs O(1), reading an item wraps it on the way out, and nothing can be
assigned, deleted or appended at any depth. So a chain of hooks over a long history costs
what the hooks read, not a copy of the history per hook. ``thaw`` makes a plain,
independent ``dict`` / ``list`` copy (for ``json.dumps``, or to build a patch from).

A view is not a sandbox: hooks are trusted code and ``_data`` is reachable. It keeps an
honest handler from changing host state by accident.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

_SCALARS = (str, int, float, bool, type(None))


def readonly(value: Any) -> Any:
    """A read-only view of ``value`` (scalars are returned as they are)."""
    cls = value.__class__
    if cls is str or value is None or cls is int or cls is float or cls is bool:
        return value
    if isinstance(value, FrozenDict | FrozenList):
        return value
    if isinstance(value, Mapping):
        return FrozenDict(value)
    if isinstance(value, list | tuple):
        return FrozenList(value)
    return value


def thaw(value: Any) -> Any:
    """A plain, independent copy: views and other mappings become ``dict``s, sequences
    (tuples included) ``list``s; any other value is deep-copied."""
    if isinstance(value, FrozenDict | FrozenList):
        value = value._data
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return copy.deepcopy(value)


def _data(value: Any) -> Any:
    return value._data if isinstance(value, FrozenDict | FrozenList) else value


class FrozenDict(Mapping[str, Any]):
    """A read-only view of a mapping; values come out as read-only views too."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return readonly(self._data[key])

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return readonly(self._data[key])
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return bool(self._data == _data(other)) if isinstance(other, dict | FrozenDict) \
                else dict(self._data) == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like the dict it shows

    def __repr__(self) -> str:
        return f"FrozenDict({self._data!r})"

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return thaw(self)  # type: ignore[no-any-return]


class FrozenList(Sequence[Any]):
    """A read-only view of a list or tuple; items come out as read-only views too."""

    __slots__ = ("_data",)

    def __init__(self, data: list[Any] | tuple[Any, ...]) -> None:
        self._data = data

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> FrozenList: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return FrozenList(self._data[index])
        return readonly(self._data[index])

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[Any]:
        return map(readonly, self._data)

    def __reversed__(self) -> Iterator[Any]:
        return map(readonly, reversed(self._data))

    def __contains__(self, value: object) -> bool:
        return _data(value) in self._data

    def __eq__(self, other: object) -> bool:
        other = _data(other)
        if isinstance(other, list | tuple):
            return len(self._data) == len(other) and all(
                a == b for a, b in zip(self._data, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[Any]) -> list[Any]:
        """A new plain list of the items (still views) followed by ``other``'s."""
        return [*self, *other]

    def __radd__(self, other: Sequence[Any]) -> list[Any]:
        return [*other, *self]

    def __repr__(self) -> str:
        return f"FrozenList({self._data!r})"

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return thaw(self)  # type: ignore[no-any-return]
