"""Workspaces, file tools and the command port (docs/contract.md#workspaces).

    WorkspaceProvider.for_instance(...) -> InstanceWorkspace(root, lock_dir).store()
        -> PosixWorkspaceStore: read / write / list / stat / glob / grep / edit / mkdir / delete
    file_tools() -> the workspace_* ToolDefinitions (workspace_command builds a CommandSpec)
    CommandRunner port, CommandSpec / CommandResult, MarkerStore (durable execution markers)
"""

from agentloom_runtime.tool_contracts import WORKSPACE_GROUP

from ._io import storage_call
from ._paths import split_path
from ._scan import Budget as ScanBudget
from .commands import (
    CommandLimits,
    CommandResult,
    CommandRunner,
    CommandSpec,
    MarkerStore,
    OutputCapture,
    write_result,
)
from .errors import SandboxUnavailable, WorkspaceError
from .file_tools import file_tools, granted
from .posix_store import PosixWorkspaceStore, StoreLimits
from .provider import InstanceWorkspace, WorkspaceProvider
from .storage import WorkspaceStorage

__all__ = [
    "WORKSPACE_GROUP",
    "CommandLimits",
    "CommandResult",
    "CommandRunner",
    "CommandSpec",
    "InstanceWorkspace",
    "MarkerStore",
    "OutputCapture",
    "PosixWorkspaceStore",
    "SandboxUnavailable",
    "ScanBudget",
    "StoreLimits",
    "WorkspaceError",
    "WorkspaceProvider",
    "WorkspaceStorage",
    "file_tools",
    "granted",
    "split_path",
    "storage_call",
    "write_result",
]
