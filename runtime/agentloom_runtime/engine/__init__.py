"""The durable step-machine engine."""

from .engine import Engine
from .factory import NoCompaction, create_engine
from .modules import ExecutionLimits, RuntimeModules

__all__ = ["Engine", "ExecutionLimits",
    "NoCompaction", "RuntimeModules", "create_engine"]
