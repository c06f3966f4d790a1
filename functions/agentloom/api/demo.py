"""A demo model for ``agentloom serve`` without a provider key, clearly labelled:
``--model-factory agentloom.api.demo:echo`` answers every question with
``[demo model] You asked: <question>`` (reviews say complete). Never a real model."""

from __future__ import annotations

import json

from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.testing import FunctionModel

DEMO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def _reply(request: ModelRequest) -> ModelResponse:
    if request.purpose == "verification":
        return ModelResponse(content=json.dumps({"decision": "complete", "reason": "demo",
                                                 "next_action": ""}), usage=DEMO_USAGE)
    if request.purpose == "compaction":
        return ModelResponse(content="[demo model] summary", usage=DEMO_USAGE)
    asked = next((str(m.get("content")) for m in reversed(list(request.messages))
                  if m.get("role") == "user"), "")
    return ModelResponse(content=f"[demo model] You asked: {asked}", usage=DEMO_USAGE)


def echo(snapshot: AgentSnapshot) -> FunctionModel:
    return FunctionModel(_reply)
