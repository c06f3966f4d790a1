"""Tool catalog and execution (docs/contract.md#tools)."""

from .registry import NAME_PATTERN, ToolRegistry
from .runtime import (
    TOOL_EXECUTE,
    Authorize,
    PreparedCall,
    RawResult,
    ToolRuntime,
    cap_with_reference,
    failure_outcome,
    parse_arguments,
    reference_marker,
)

__all__ = [
    "NAME_PATTERN",
    "TOOL_EXECUTE",
    "Authorize",
    "PreparedCall",
    "RawResult",
    "ToolRegistry",
    "ToolRuntime",
    "cap_with_reference",
    "failure_outcome",
    "parse_arguments",
    "reference_marker",
]
