"""Command sandboxes: bubblewrap on one machine, ECS Fargate tasks in AWS.

The names load on first use (PEP 562): a Lambda importing ``agentloom.sandbox.fargate``
or ``._liveness`` does not import bubblewrap's runner and the workspace package with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloom_runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from .bwrap import BubblewrapRunner
    from .fargate import FargateTaskSpec, task_definition

__all__ = ["BubblewrapRunner", "FargateTaskSpec", "task_definition"]
_FROM = {"BubblewrapRunner": ".bwrap", "FargateTaskSpec": ".fargate",
         "task_definition": ".fargate"}


__getattr__ = lazy_exports(__name__, _FROM)
