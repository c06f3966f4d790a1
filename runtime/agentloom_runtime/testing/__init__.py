"""Test doubles shipped with the runtime: fakes that fail loudly on the unplanned.

``ScriptedModel`` stands in for a ``ModelGateway``; ``OpenAICompatibleServer`` stands in
for a provider on 127.0.0.1 so the real gateway can be tested over real sockets.
"""

from agentloom_runtime.testing.keyed import KeyedScriptModel
from agentloom_runtime.testing.openai_server import (
    Disconnect,
    OpenAICompatibleServer,
    Raw,
    Received,
    completion_body,
    error_body,
)
from agentloom_runtime.testing.scripted import (
    Reply,
    ScriptedModel,
    ScriptExhausted,
    ScriptNotConsumed,
    Step,
    UnexpectedCall,
)

__all__ = [
    "Disconnect",
    "KeyedScriptModel",
    "OpenAICompatibleServer",
    "Raw",
    "Received",
    "Reply",
    "ScriptExhausted",
    "ScriptNotConsumed",
    "ScriptedModel",
    "Step",
    "UnexpectedCall",
    "completion_body",
    "error_body",
]
