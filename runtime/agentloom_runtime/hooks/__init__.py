"""Hooks: trusted, versioned processing chains at the runtime's boundaries (docs/contract.md#hooks).

``HookRegistry`` holds trusted async handlers (``HookDefinition``) with versions and
code identities; ``HookPointRegistry`` defines each point's payload schema, writable
fields, allowed results and delta rules; ``HookManager`` (``hooks/v1``, the
``hook_contracts.HookManager`` port) matches
published ``HookBinding``s and runs each stage (``run``: one loop, one stage budget, with
``before`` / ``after`` callbacks for the host's persistence); ``HookExecutor`` keeps the
cooperative time budgets. Handlers see read-only fields as ``FrozenDict`` /
``FrozenList`` views (``thaw`` makes a plain copy). ``load_hook_package`` loads hooks
from a published artifact. Pure logic: the engine wires stages into its durable operations.
"""

from agentloom_runtime.hook_contracts import AfterBinding, BeforeBinding

from ._manifest import verify as verify_manifest
from ._readonly import FrozenDict, FrozenList, thaw
from .bindings import HookBinding, HookMatch, ResolvedBinding, match_purpose
from .context import HookContext, HookScope
from .errors import (
    HookConfigError,
    HookContractError,
    HookError,
    HookFailure,
    HookPackageError,
    HookTimeout,
)
from .executor import HookExecutor
from .fingerprint import code_fingerprint
from .manager import BindingOutcome, HookDiagnostic, HookManager, StageOutcome
from .package import HookPackage, load_hook_package, package_hash
from .points import HookPoint, HookPointRegistry, PointRule
from .registry import HookDefinition, HookHandler, HookRegistry
from .results import Continue, HookResult, PatchInput, PatchOutput, Reject

__all__ = [
    "AfterBinding",
    "BeforeBinding",
    "BindingOutcome",
    "Continue",
    "FrozenDict",
    "FrozenList",
    "HookBinding",
    "HookConfigError",
    "HookContext",
    "HookContractError",
    "HookDefinition",
    "HookDiagnostic",
    "HookError",
    "HookExecutor",
    "HookFailure",
    "HookHandler",
    "HookManager",
    "HookMatch",
    "HookPackage",
    "HookPackageError",
    "HookPoint",
    "HookPointRegistry",
    "HookRegistry",
    "HookResult",
    "HookScope",
    "HookTimeout",
    "PatchInput",
    "PatchOutput",
    "PointRule",
    "Reject",
    "ResolvedBinding",
    "StageOutcome",
    "code_fingerprint",
    "load_hook_package",
    "match_purpose",
    "package_hash",
    "thaw",
    "verify_manifest",
]
