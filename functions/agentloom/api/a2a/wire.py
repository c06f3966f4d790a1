"""The A2A protocol's objects on the wire (version 1.0, the JSON form of its proto
messages: camelCase fields, enum names such as ``TASK_STATE_COMPLETED``), as pydantic
models. Field names are the protocol's own, so the OpenAPI document shows the wire.

Inputs ignore fields they do not know (a newer client's additions); outputs are dumped
without unset fields (``wire``). JSON-RPC 2.0 envelopes and the A2A error codes are at
the end.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from agentloom_runtime.errors import AgentLoomError

PROTOCOL_VERSION = "1.0"
TaskState = Literal["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING",
                    "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED",
                    "TASK_STATE_FAILED", "TASK_STATE_CANCELED"]
Role = Literal["ROLE_USER", "ROLE_AGENT"]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")


def wire(value: BaseModel) -> dict[str, Any]:
    """``value`` as the protocol's JSON (unset fields left out)."""
    return value.model_dump(mode="json", exclude_none=True)


class Part(_Wire):
    """One part of a message or artifact: text, structured ``data``, or a file (``url`` /
    ``raw`` base64) with its media type."""

    text: str | None = None
    data: Any = None
    url: str | None = None
    raw: str | None = None
    mediaType: str | None = None
    filename: str | None = None
    metadata: dict[str, Any] | None = None


class Message(_Wire):
    messageId: StrictStr = Field(min_length=1, max_length=200)
    contextId: str | None = None
    taskId: str | None = None
    role: Role = "ROLE_USER"
    parts: list[Part] = Field(default_factory=list, max_length=64)
    metadata: dict[str, Any] | None = None
    extensions: list[str] | None = None
    referenceTaskIds: list[str] | None = None


class TaskStatus(_Wire):
    state: TaskState
    message: Message | None = None
    timestamp: str | None = None  # RFC 3339, UTC


class Artifact(_Wire):
    artifactId: str
    name: str | None = None
    description: str | None = None
    parts: list[Part] = Field(default_factory=list)


class Task(_Wire):
    id: str
    contextId: str
    status: TaskStatus
    artifacts: list[Artifact] | None = None
    history: list[Message] | None = None
    metadata: dict[str, Any] | None = None


class TaskStatusUpdateEvent(_Wire):
    taskId: str
    contextId: str
    status: TaskStatus
    metadata: dict[str, Any] | None = None


class TaskArtifactUpdateEvent(_Wire):
    taskId: str
    contextId: str
    artifact: Artifact
    append: bool = False
    lastChunk: bool = True


class StreamResponse(_Wire):
    """One event of a stream: exactly one field is set."""

    task: Task | None = None
    statusUpdate: TaskStatusUpdateEvent | None = None
    artifactUpdate: TaskArtifactUpdateEvent | None = None


# -- requests (the ``params`` of each method) -------------------------------------------


class SendMessageConfiguration(_Wire):
    acceptedOutputModes: list[str] | None = None
    historyLength: int | None = Field(default=None, ge=0)
    returnImmediately: bool = False
    taskPushNotificationConfig: dict[str, Any] | None = None


class SendMessageRequest(_Wire):
    tenant: str | None = None
    message: Message
    configuration: SendMessageConfiguration = Field(default_factory=SendMessageConfiguration)
    metadata: dict[str, Any] | None = None


class TaskIdRequest(_Wire):
    """``GetTask``, ``CancelTask``, ``SubscribeToTask``."""

    tenant: str | None = None
    id: StrictStr = Field(min_length=1, max_length=200)
    historyLength: int | None = Field(default=None, ge=0)
    metadata: dict[str, Any] | None = None


# -- the agent card ------------------------------------------------------------------------


class AgentInterface(_Wire):
    url: str
    protocolBinding: str = "JSONRPC"
    protocolVersion: str = PROTOCOL_VERSION


class AgentCapabilities(_Wire):
    streaming: bool = True
    pushNotifications: bool = False
    extendedAgentCard: bool = False


class AgentSkill(_Wire):
    id: str
    name: str
    description: str
    tags: list[str] = Field(default_factory=list)
    examples: list[str] | None = None
    inputModes: list[str] | None = None
    outputModes: list[str] | None = None


class AgentProvider(_Wire):
    organization: str
    url: str


class AgentCard(_Wire):
    name: str
    description: str
    supportedInterfaces: list[AgentInterface]
    provider: AgentProvider | None = None
    version: str
    capabilities: AgentCapabilities
    securitySchemes: dict[str, dict[str, Any]]
    securityRequirements: list[dict[str, Any]]
    defaultInputModes: list[str]
    defaultOutputModes: list[str]
    skills: list[AgentSkill]


# -- JSON-RPC 2.0 ---------------------------------------------------------------------------


class RpcRequest(BaseModel):
    """A JSON-RPC 2.0 request (batches are not taken)."""

    model_config = ConfigDict(extra="forbid")

    jsonrpc: Literal["2.0"]
    id: StrictStr | int | None = None
    method: StrictStr = Field(min_length=1, max_length=100)
    params: dict[str, Any] = Field(default_factory=dict)


class RpcErrorBody(BaseModel):
    code: int
    message: str
    data: Any = None


class RpcResponse(BaseModel):
    """A JSON-RPC 2.0 response: ``result`` or ``error``."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: str | int | None = None
    result: Any = None
    error: RpcErrorBody | None = None


# The A2A error codes (the SDK's client maps each to its own exception class)
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
PUSH_NOT_SUPPORTED = -32003
UNSUPPORTED_OPERATION = -32004
CONTENT_TYPE_NOT_SUPPORTED = -32005
VERSION_NOT_SUPPORTED = -32009
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class RpcError(AgentLoomError):
    """An A2A error, answered as a JSON-RPC error object (HTTP 200): ``code`` is the
    protocol's, ``reason`` our stable code (in ``data``, as the protocol's ErrorInfo)."""

    def __init__(self, code: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.rpc_code, self.message, self.reason = code, message, reason

    def body(self) -> RpcErrorBody:
        return RpcErrorBody(code=self.rpc_code, message=self.message, data=[{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": self.reason,
            "domain": "agentloom", "metadata": {"code": self.reason}}])
