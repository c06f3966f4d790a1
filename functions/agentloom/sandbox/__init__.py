"""Command sandboxes: bubblewrap on one machine, ECS Fargate tasks in AWS."""

from .bwrap import BubblewrapRunner
from .fargate import FargateTaskSpec, task_definition

__all__ = ["BubblewrapRunner", "FargateTaskSpec", "task_definition"]
