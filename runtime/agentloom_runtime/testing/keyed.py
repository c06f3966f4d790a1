"""``KeyedScriptModel``: a model double whose answer depends only on the request.

Action step *k* is answered with the *k*-th scripted reply, where *k* counts the
script's own tool calls already in the request (inherited session history has other,
rewritten call ids, so it does not shift the script); every completion review is
answered with a verdict. Answers therefore belong after the script's calls. Because
nothing depends on process state, a run driven by it can be killed at any point and
resumed in another process — which makes it the demo model of the CLI and the
model of crash tests.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from agentloom_runtime.contracts import JSON, ModelRequest, ModelResponse

from .scripted import ScriptedModel, to_response


class KeyedScriptModel:
    module_id = "keyed-script/v1"

    def __init__(self, replies: Sequence[ModelResponse | Mapping[str, Any]], *,
                 verdict: str = "complete", label: str = "script") -> None:
        self.replies = [to_response(r) for r in replies]
        self._ids = {c.id for r in self.replies for c in r.tool_calls}
        self.verdict = verdict
        self.label = label
        self.calls: list[str] = []

    def checkpoint_config(self) -> JSON:
        digest = hashlib.sha256(json.dumps([r.to_dict() for r in self.replies],
                                           sort_keys=True).encode()).hexdigest()
        return {"label": self.label, "script_sha256": digest, "verdict": self.verdict}

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        self.calls.append(request.purpose)
        if request.purpose == "verification":
            return ScriptedModel.verdict(self.verdict, "scripted review")  # type: ignore[arg-type]
        if request.purpose == "compaction":
            return ModelResponse(content="Summary of earlier work (scripted).")
        step = sum(1 for m in request.messages if m.get("role") == "assistant"
                   and any(c["id"] in self._ids for c in m.get("tool_calls") or ()))
        if step >= len(self.replies):
            return ModelResponse(content="(the demo script has no further steps)")
        return self.replies[step]

    async def aclose(self) -> None:
        return None
