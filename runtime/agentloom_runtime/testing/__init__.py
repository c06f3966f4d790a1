"""Test doubles shipped with the runtime: fakes that fail loudly on the unplanned.

``ScriptedModel`` plays a fixed script in place of a ``ModelGateway``; ``FunctionModel``
answers each request with a function of it; ``KeyedScriptModel`` answers by the script's
progress visible in the request (crash tests, the CLI demo); ``OpenAICompatibleServer``
stands in for a provider on 127.0.0.1 so the real gateway can be tested over real
sockets.

Names are imported on first use (PEP 562): importing ``ScriptedModel`` does not load the
HTTP test server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloom_runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from agentloom_runtime.testing.function import FunctionModel
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

_HOMES = {
    "FunctionModel": "function",
    "KeyedScriptModel": "keyed",
    "Disconnect": "openai_server",
    "OpenAICompatibleServer": "openai_server",
    "Raw": "openai_server",
    "Received": "openai_server",
    "completion_body": "openai_server",
    "error_body": "openai_server",
    "Reply": "scripted",
    "ScriptExhausted": "scripted",
    "ScriptNotConsumed": "scripted",
    "ScriptedModel": "scripted",
    "Step": "scripted",
    "UnexpectedCall": "scripted",
}

__all__ = [
    "Disconnect",
    "FunctionModel",
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


__getattr__ = lazy_exports(__name__, {name: f".{home}" for name, home in _HOMES.items()})


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
