"""Command sandboxes: bubblewrap on one machine, ECS Fargate tasks in AWS.

The names load on first use (PEP 562): a Lambda importing ``agentloom.sandbox.fargate``
or ``._liveness`` does not import bubblewrap's runner and the workspace package with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .bwrap import BubblewrapRunner
    from .fargate import FargateTaskSpec, task_definition

__all__ = ["BubblewrapRunner", "FargateTaskSpec", "task_definition"]
_FROM = {"BubblewrapRunner": ".bwrap", "FargateTaskSpec": ".fargate",
         "task_definition": ".fargate"}


def __getattr__(name: str) -> Any:
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_FROM[name], __name__), name)
    globals()[name] = value
    return value
