"""The hook points a manager may bind: ``HookPointRegistry``.

``HookPointRegistry.builtin(2)`` is the current built-in contract (``_builtin_points``);
``builtin(1)`` rebuilds the contract of manifests without ``point_contract_version``.
Custom points are registered explicitly by the host. A point itself (schema, writable
fields, results, delta rules) is a ``HookPoint`` (``_point``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ._builtin_points import builtin_points
from ._point import HookPoint, PointRule, RuleCheck, Stage
from .errors import HookConfigError

__all__ = ["HookPoint", "HookPointRegistry", "PointRule", "RuleCheck", "Stage"]


class HookPointRegistry:
    """The points a manager may bind. ``builtin(2)`` is the current contract;
    ``builtin(1)`` rebuilds the contract of manifests without ``point_contract_version``.
    Custom points are registered explicitly by the host."""

    def __init__(self, contract_version: int = 2, points: Iterable[HookPoint] = ()) -> None:
        if contract_version not in (1, 2):
            raise HookConfigError(f"unknown point contract version {contract_version}")
        self.contract_version = contract_version
        self._points: dict[str, HookPoint] = {}
        for point in points:
            self.register(point)

    @classmethod
    def builtin(cls, contract_version: int = 2) -> HookPointRegistry:
        return cls(contract_version, builtin_points(contract_version))

    def register(self, point: HookPoint) -> None:
        if point.name in self._points:
            raise HookConfigError(f"hook point {point.name} is already defined")
        self._points[point.name] = point

    def get(self, name: str) -> HookPoint:
        try:
            return self._points[name]
        except KeyError:
            raise HookConfigError(f"unknown hook point {name}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._points

    def __iter__(self) -> Iterator[HookPoint]:
        return iter(list(self._points.values()))

    def copy(self) -> HookPointRegistry:
        return HookPointRegistry(self.contract_version, self._points.values())
