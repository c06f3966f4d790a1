"""The durable step-machine engine."""

from .engine import Engine
from .factory import create_engine
from .modules import ExecutionLimits, RuntimeModules

__all__ = ["Engine", "ExecutionLimits", "RuntimeModules", "create_engine"]
