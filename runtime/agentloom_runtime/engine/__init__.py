"""The durable step-machine engine (see ``engine.Engine`` for the lifecycle)."""

from ._factory import create_engine, default_compaction, delegate_tool
from ._model_call import RequestDigests
from ._modules import ExecutionLimits, RuntimeModules
from ._resolve import RaiseBudget
from ._runs import RunSummary, cancel_run, read_run
from ._state import FORMAT, MainView
from .engine import Engine

__all__ = ["FORMAT", "Engine", "ExecutionLimits", "MainView", "RaiseBudget", "RequestDigests",
           "RunSummary",
           "RuntimeModules", "cancel_run", "create_engine", "default_compaction",
           "delegate_tool", "read_run"]
