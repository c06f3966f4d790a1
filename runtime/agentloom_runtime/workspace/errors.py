"""Workspace errors: one class, a stable ``code`` per refusal.

    ToolError (agentloom_runtime.errors)
    └── WorkspaceError          code: one of CODES; becomes a failure result the model reads
        └── SandboxUnavailable  code "sandbox_unavailable": no usable sandbox, never a host shell

Messages name the workspace-relative path only, never the host root.
"""

from __future__ import annotations

from typing import Any

from agentloom_runtime.errors import ToolError

CODES = frozenset({
    # path shape
    "invalid_path", "absolute_path", "path_traversal", "name_too_long",
    # what is at the path
    "symlink", "hard_link", "special_file", "not_found", "is_directory", "not_a_directory",
    "exists", "binary_file", "too_large", "permission_denied", "no_space", "io_error",
    # preconditions and arguments
    "sha_mismatch", "ambiguous_match", "no_match", "invalid_argument", "locked",
    # execution and volumes
    "sandbox_marker_present", "sandbox_unavailable", "regex_unavailable",
    "workspace_unavailable", "volume_unavailable", "volume_mismatch",
})


class WorkspaceError(ToolError):
    """A refused or failed workspace operation; ``code`` is stable, the text is for people."""

    code = "workspace_error"

    def __init__(self, code: str, message: str, *, details: dict[str, Any] | None = None) -> None:
        if code not in CODES:
            raise ValueError(f"unknown workspace error code {code!r}")
        # the code also goes into details so it survives errors.error_from_dict
        super().__init__(message, details={**(details or {}), "code": code})
        self.code = code


class SandboxUnavailable(WorkspaceError):
    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__("sandbox_unavailable", message, details=details)
