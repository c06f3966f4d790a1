"""Lazy package exports (PEP 562): a package names what it exports and where each lives,
and a name's module is imported on its first use, so importing the package (or one of
its light modules) does not import its heavy ones.

    __getattr__ = lazy_exports(__name__, {"Runner": ".bwrap", ...})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``name`` from ``homes[name]`` (a module
    path relative to ``package``), kept in the package once imported."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    return __getattr__
