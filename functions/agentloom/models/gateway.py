"""``ConnectionModels``: the model factory of a platform. A published snapshot whose
``api_key_ref`` names a platform model connection (``mdl_…``) gets a chat-completions
gateway holding that connection's stored key, opened here, at the gateway's
construction, and kept only in the gateway (never logged, never in an event, snapshot or
checkpoint: those hold the reference); ``redact`` is told each key it opens, so a model
that echoes it never puts it in a session's records, an answer or an event. Every other
snapshot (an agent file's environment-variable reference, a test model) goes to
``fallback``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from agentloom_runtime.contracts import ModelGateway
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.snapshot import AgentSnapshot, ModelConnection

if TYPE_CHECKING:
    from agentloom_runtime.model import ChatCompletionsGateway

PREFIX = "mdl_"


class ConnectionKeys(Protocol):
    def run_key(self, space_id: str, connection_id: str, model: ModelConnection) -> str:
        """The connection's key ("" when keyless); ``ConfigError`` when it cannot be
        used for ``model`` any more."""
        ...


class ConnectionModels:
    def __init__(self, keys: ConnectionKeys,
                 fallback: Callable[[AgentSnapshot], ModelGateway], *,
                 redact: Callable[[str], None] | None = None) -> None:
        self.keys = keys
        self.fallback = fallback
        self.redact = redact

    def __call__(self, snapshot: AgentSnapshot) -> ModelGateway:
        m = snapshot.model
        ref = m.api_key_ref
        if ref is None or not ref.startswith(PREFIX):
            return self.fallback(snapshot)
        from agentloom_runtime.model import ChatCompletionsGateway

        key = self.keys.run_key(snapshot.space_id, ref, m)
        if key and self.redact is not None:
            self.redact(key)
        return ChatCompletionsGateway(base_url=m.base_url, model=m.model, api_key=key,
                                      dialect=m.dialect,
                                      max_output_tokens=m.max_output_tokens,
                                      timeout=m.timeout_seconds)


def env_key(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise ConfigError(f"the model key is read from ${name}, which is not set")
    return value


def gateway_for(snapshot: AgentSnapshot) -> ChatCompletionsGateway:
    """The provider the snapshot names, its key read from the environment variable of
    ``api_key_ref`` (one the server allows: ``DraftRules.key_refs``). The HTTP gateway is
    imported here only."""
    from agentloom_runtime.model import ChatCompletionsGateway

    m = snapshot.model
    ref = m.api_key_ref or ""
    return ChatCompletionsGateway(base_url=m.base_url, model=m.model,
                                  api_key=lambda: env_key(ref), dialect=m.dialect,
                                  max_output_tokens=m.max_output_tokens,
                                  timeout=m.timeout_seconds)


def default_model_factory(snapshot: AgentSnapshot) -> ModelGateway:
    return gateway_for(snapshot)
