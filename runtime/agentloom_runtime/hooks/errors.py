"""Hook errors, placed in the runtime's single error tree (``agentloom_runtime.errors``).

    ConfigError
    └── HookConfigError             a bad binding, point, definition or manager use
        └── HookPackageError            a hook package artifact cannot be loaded
    RunError
    └── HookError                   a hook stage stopped the operation
        ├── HookContractError           a result outside the point's contract
        └── HookFailure                 the handler raised (``__cause__`` keeps the error)
            └── HookTimeout                 the binding or stage budget ran out

``ResumeMismatch`` (from ``agentloom_runtime.errors``) is raised when a resume would run
different hooks. Details carry ids, points and error type names only: never a payload,
a config value or the handler's exception message.
"""

from __future__ import annotations

from agentloom_runtime.errors import ConfigError, RunError


class HookConfigError(ConfigError):
    code = "hook_config_invalid"


class HookPackageError(HookConfigError):
    code = "hook_package_invalid"


class HookError(RunError):
    code = "hook_error"


class HookContractError(HookError):
    code = "hook_contract_violation"


class HookFailure(HookError):
    code = "hook_failed"


class HookTimeout(HookFailure):
    code = "hook_timeout"
