"""A scripted model for a real ``agentloom serve`` process
(``--model-factory support.mcp_model:factory``, ``tests`` on ``PYTHONPATH``), steered
through files because the test is another process: a question with ``hang`` writes
``$AGENTLOOM_TEST_GATE.started`` and waits until the file ``$AGENTLOOM_TEST_GATE``
exists; one with ``never`` waits until it is cancelled; every other question is
answered ``Answer to: <question>``. Reviews say complete."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.testing import FunctionModel, ScriptedModel


async def _reply(request: ModelRequest) -> ModelResponse:
    if request.purpose == "verification":
        return ScriptedModel.verdict("complete")
    if request.purpose == "compaction":
        return ModelResponse(content="Summary.")
    question = next((str(m.get("content")) for m in reversed(list(request.messages))
                     if m.get("role") == "user"), "")
    gate = Path(os.environ["AGENTLOOM_TEST_GATE"])
    if "hang" in question:
        await asyncio.to_thread(gate.with_suffix(".started").write_text, question)
        while not await asyncio.to_thread(gate.exists):  # noqa: ASYNC110 (another process)
            await asyncio.sleep(0.02)
    while "never" in question:  # noqa: ASYNC110 (until the run is cancelled)
        await asyncio.sleep(0.05)
    return ModelResponse(content=f"Answer to: {question}")


def factory(snapshot: AgentSnapshot) -> FunctionModel:
    return FunctionModel(_reply)
