"""One error tree for the runtime. Classes defined in another module name it; the
platform's errors hang under the same root (``agentloom.platform.errors`` draws them).

    AgentLoomError
    ├── ConfigError                 misuse: a bad snapshot, module or argument; fix the input
    │   ├── SnapshotError           the published snapshot / agent file is invalid
    │   ├── ResumeMismatch          a resume with changed modules, config, tools, hooks or volume
    │   ├── HookConfigError         (hooks.errors) a bad binding, point or definition
    │   │   └── HookPackageError        a hook package artifact cannot be loaded
    │   └── BusClosed               (bus) a request or publication on a closed bus
    ├── RunError                    a run failed; serializable (code, message, details)
    │   ├── ModelError              the model call failed
    │   │   ├── ModelTransportError     no response was received (may be retried)
    │   │   ├── ModelStatusError        the provider answered with an error status
    │   │   │   └── ModelNotFound           HTTP 404: no such model (change the model)
    │   │   ├── ModelResponseError      the response is malformed (validation)
    │   │   ├── ModelCredentialsError   no credential to send it with: never sent
    │   │   └── ModelOutcomeUnknown     the request was sent, no response was saved
    │   ├── ToolError               a tool could not be run (most become failure results)
    │   │   ├── ToolNotFound
    │   │   ├── ToolArgumentsError
    │   │   ├── ToolRejected
    │   │   ├── ToolOutcomeUnknown      a side-effecting call may have run; never re-run blindly
    │   │   ├── WorkspaceError          (workspace.errors) a refused workspace operation
    │   │   │   └── SandboxUnavailable      no usable sandbox, never a host shell
    │   │   └── ResultNotFound          (engine._results) read_result: no such result
    │   ├── BudgetExceeded          call / iteration / context budgets
    │   │   ├── RunBudgetExceeded       (engine._model_call) the run's tokens or cost
    │   │   ├── ReviewTooLarge          (engine._review) a review request over the hard
    │   │   │                           budget, refused unsent: smaller copies are tried
    │   │   └── ContextOverBudget       the view cannot be brought under the input budget:
    │   │                               a resume would stop the same way (way out: a new
    │   │                               question)
    │   ├── PersistenceError        a save failed: the run stops (alias: ToolPersistenceError)
    │   │   ├── CheckpointConflict      the head version moved: a stale or duplicate step
    │   │   └── CompanionConflict       (checkpoint.store) the host's writes of a commit
    │   │                               conflicted; the store retries the commit
    │   ├── RunCancelled
    │   ├── HookError               (hooks.errors) a hook stage stopped the operation
    │   │   ├── HookContractError       a result outside the point's contract
    │   │   └── HookFailure             the handler raised
    │   │       └── HookTimeout             the binding or stage budget ran out
    │   ├── HookReplayRequired      (engine._hooks) an unfinished hook is not replay_safe
    │   ├── HookRejected            (engine._hooks) a run.before hook refused the run
    │   ├── ReplayDiverged          (replay) a replay left the recording: it stops there
    │   ├── RecordingEnded          (replay) a replay asked for a call the recording lacks
    │   └── BusTimeout              (bus) no reply on the in-process bus in time
    └── BlockRun                    (engine._context) the engine's own signal: a step stops
                                    the run with the error it carries; never leaves
                                    ``Engine.step``

The test doubles' failures (``agentloom_runtime.testing``: ``ScriptExhausted``,
``UnexpectedCall``, ``ScriptNotConsumed``) are ``AssertionError``s on purpose, outside
this tree: a test's own mistake must fail the test, never be handled as a run's error.

Errors that cross a durable boundary go through ``to_dict`` / ``error_from_dict``; they
never carry a provider's response body, a key or tool output.
"""

from __future__ import annotations

from typing import Any


class AgentLoomError(Exception):
    """Root of every error raised by agentloom_runtime."""

    code = "agentloom_error"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = dict(details or {})

    def to_dict(self) -> dict[str, Any]:
        return {"type": type(self).__name__, "code": self.code, "message": self.message,
                "details": self.details}


class ConfigError(AgentLoomError):
    code = "config_error"


class SnapshotError(ConfigError):
    code = "invalid_snapshot"


class ResumeMismatch(ConfigError):
    code = "resume_mismatch"


class RunError(AgentLoomError):
    code = "run_error"


class ModelError(RunError):
    code = "model_error"


class ModelTransportError(ModelError):
    code = "model_transport_error"


class ModelStatusError(ModelError):
    code = "model_status_error"

    def __init__(self, message: str, *, status: int, retryable: bool = False,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details={**(details or {}), "status": status,
                                           "retryable": retryable})
        self.status = status
        self.retryable = retryable


class ModelNotFound(ModelStatusError):
    """The provider answered 404: it has no such model (or endpoint) at the base URL. The
    run keeps the model it started with, so a resume asks for it again; the way out is
    to change the model (the agent's ``model``, or its model connection) and ask again."""

    code = "model_not_found"


class ModelCredentialsError(ModelError):
    """The request was never sent: the gateway could not get its credential (a key
    variable not set, a sealed key that would not open). Nothing is unknown: set the
    credential, then resume."""

    code = "model_credentials_missing"


class ModelResponseError(ModelError):
    code = "model_response_invalid"


class ModelOutcomeUnknown(ModelError):
    code = "model_outcome_unknown"


class ToolError(RunError):
    code = "tool_error"


class ToolNotFound(ToolError):
    code = "tool_not_found"


class ToolArgumentsError(ToolError):
    code = "tool_arguments_invalid"


class ToolRejected(ToolError):
    code = "tool_rejected"


class ToolOutcomeUnknown(ToolError):
    code = "tool_outcome_unknown"


class BudgetExceeded(RunError):
    code = "budget_exceeded"


class ContextOverBudget(BudgetExceeded):
    """What the model must be shown does not fit its input budget and compaction cannot
    make it fit; the same run would stop the same way again, so its way out is a new
    question (which inherits the history with oversized values capped)."""


class PersistenceError(RunError):
    code = "persistence_error"


ToolPersistenceError = PersistenceError  # its first name (docs/contract.md#recovery)


class CheckpointConflict(PersistenceError):
    code = "checkpoint_conflict"


class RunCancelled(RunError):
    code = "run_cancelled"


_BY_NAME: dict[str, type[AgentLoomError]] = {}


def _collect(cls: type[AgentLoomError]) -> None:
    _BY_NAME[cls.__name__] = cls
    for sub in cls.__subclasses__():
        _collect(sub)


def error_from_dict(data: dict[str, Any]) -> AgentLoomError:
    """Rebuild an error saved with ``to_dict``; unknown types become ``RunError``."""
    name = str(data.get("type"))
    if name not in _BY_NAME:  # subclasses defined in modules imported since the last scan
        _collect(AgentLoomError)
    cls = _BY_NAME.get(name, RunError)
    err = AgentLoomError.__new__(cls)
    AgentLoomError.__init__(err, str(data.get("message", "")), details=data.get("details"))
    if "code" in err.details:  # errors whose code is per instance (WorkspaceError)
        err.code = str(err.details["code"])
    if isinstance(err, ModelStatusError):
        err.status = int(err.details.get("status", 0))
        err.retryable = bool(err.details.get("retryable", False))
    return err
