"""The platform's errors: what a caller did wrong or may not do, each with a stable code
and the HTTP status the API answers with. Every error class of ``agentloom`` sits under
the runtime's single root (``agentloom_runtime.errors`` draws the runtime's part); a
class defined in another module names it::

    AgentLoomError                          (agentloom_runtime.errors)
    ├── PlatformError                       status, code, message, details
    │   ├── BadRequest         400          malformed input (JSON, encoding, header form)
    │   ├── Unauthorized       401          no identity, or a token that is not valid
    │   ├── Forbidden          403          a member whose role does not allow the action
    │   ├── NotFound           404          absent, or not visible to the caller (never
    │   │                                   says which)
    │   ├── MethodNotAllowed   405          a path that exists, with a method it does not take
    │   ├── Conflict           409          the state forbids it now (an active run, a
    │   │   │                               stale revision, an ended run, the last owner)
    │   │   ├── TeardownRefused             (aws.session_files) the step will not remove
    │   │   │                               a session's files for this event
    │   │   └── LeaseRefused                (platform.lease) the session's lease is held
    │   ├── WriteConflict      409          (platform.store.items) a conditional write
    │   │                                   failed; ``index`` names it in its transaction
    │   ├── TooLarge           413          a request or a value over its limit
    │   │   ├── DocumentTooLarge            (knowledge.errors) over the size or chunk cap
    │   │   └── SkillTooLarge               (skills.errors)
    │   ├── UnsupportedMediaType 415        a body that is not declared application/json
    │   ├── Invalid            422          well-formed but invalid (names the field)
    │   │   ├── DocumentInvalid             (knowledge.errors) a document that cannot be read
    │   │   ├── IndexDimensionMismatch      (knowledge.index) vectors of another dimension
    │   │   └── SkillFormatError, SkillFileRefused, SkillArchiveInvalid,
    │   │       SkillSourceFailed           (skills.errors)
    │   ├── EmbeddingFailed    502          (knowledge.errors) the embeddings endpoint failed
    │   ├── McpServerFailed    502          (mcp.service) discovery could not list the tools
    │   └── Unavailable        503          a capability this deployment does not have
    │       └── TeardownIncomplete          (platform.teardown) a session's resources could
    │                                       not all be removed yet: retry the delete
    ├── ModelsError                         (models.errors: its own tree, ``http_status``)
    ├── TriggerError                        (triggers.events) an event that cannot start a
    │                                       run; ``permanent`` when redelivery cannot help
    ├── RpcError                            (api.a2a.wire) an A2A JSON-RPC error object
    │                                       (HTTP 200; the protocol's code, our reason)
    ├── ReadTimeout                         (api._connections) a request that did not
    │                                       arrive in time (the local server: 408)
    ├── StepFailed                          (aws.steps) a step failed unclassified
    ├── OperationInFlight                   (aws.steps) an operation's step is gone
    ├── ApiError                            (api.client) an error response on the client:
    │                                       the server's status, code, message, details
    ├── ConfigError                         (runtime) misuse
    │   └── StepInputError                  (aws.step_input) a state-machine input that is invalid
    └── RunError                            (runtime) a run failed
        ├── McpSchemaChanged                (mcp.errors) the server's schema changed
        └── ToolError                       (runtime) a failure result the model reads
            ├── McpToolFailure              (mcp.errors)
            └── SkillNotBound, SkillFileNotFound,
                SkillFileBinary             (skills.tools)

``details`` carries small, safe facts (the active run's id, the invalid fields); never a
key, a message text or tool output.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agentloom_runtime.errors import AgentLoomError


class PlatformError(AgentLoomError):
    status: ClassVar[int] = 500
    code = "platform_error"

    def __init__(self, message: str, *, code: str | None = None,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)
        if code is not None:
            self.code = code

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return {"error": error}


class BadRequest(PlatformError):
    status = 400
    code = "bad_request"


class Unauthorized(PlatformError):
    status = 401
    code = "unauthorized"


class Forbidden(PlatformError):
    status = 403
    code = "forbidden"


class NotFound(PlatformError):
    status = 404
    code = "not_found"


class MethodNotAllowed(PlatformError):
    status = 405
    code = "method_not_allowed"


class Conflict(PlatformError):
    status = 409
    code = "conflict"


class TooLarge(PlatformError):
    status = 413
    code = "too_large"


class UnsupportedMediaType(PlatformError):
    status = 415
    code = "unsupported_media_type"


class Invalid(PlatformError):
    status = 422
    code = "invalid"


class Unavailable(PlatformError):
    status = 503
    code = "unavailable"


def field_errors(errors: list[dict[str, Any]], *, prefix: str = "") -> Invalid:
    """A 422 naming each invalid field (``[{"field", "message"}]``), from pydantic's
    ``errors()``; the message is the first problem, with its field."""
    fields = []
    for item in errors[:20]:
        loc = ".".join(str(p) for p in (*([prefix] if prefix else []), *item["loc"]))
        fields.append({"field": loc or "(body)",
                       "message": str(item["msg"]).removeprefix("Value error, ")})
    first = fields[0] if fields else {"field": "(body)", "message": "invalid"}
    more = f" (and {len(fields) - 1} more)" if len(fields) > 1 else ""
    return Invalid(f"{first['field']}: {first['message']}{more}", code="invalid_field",
                   details={"fields": fields})
