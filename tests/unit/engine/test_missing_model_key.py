"""A model request that never left is never called unknown: a key that cannot be read
(the variable not set) stops the run with that reason in its status, and once the key is
there a resume sends the call — once."""

from __future__ import annotations

import json

import httpx
from support.engine import build_engine, drive

from agentloom_runtime.checkpoint.memory import InMemoryCheckpointStore
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.model import ChatCompletionsGateway


def _gateway(key: str | None, sent: list[str]) -> ChatCompletionsGateway:
    def api_key() -> str:
        if key is None:
            raise ConfigError("the model key is read from $OPENAI_API_KEY, which is not set")
        return key

    def reply(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content)["messages"][-1]["content"])
        # an answer that is also the completion review's verdict
        verdict = json.dumps({"decision": "complete", "reason": "done"})
        return httpx.Response(200, json={"choices": [{"message": {
            "role": "assistant", "content": verdict}}]})

    return ChatCompletionsGateway(base_url="https://provider.invalid/v1", model="m",
                                  api_key=api_key, transport=httpx.MockTransport(reply))


async def test_a_missing_model_key_blocks_with_its_reason_and_nothing_unknown() -> None:
    store, sent = InMemoryCheckpointStore(), list[str]()
    engine = build_engine(store=store, model=_gateway(None, sent))
    await engine.start("Q", run_id="r")
    result = await drive(engine)
    assert result.status == "blocked" and sent == []  # nothing left this process
    assert engine.error is not None
    assert engine.error["code"] == "model_credentials_missing"
    assert "OPENAI_API_KEY" in engine.error["message"]
    assert engine.unknown() is None and engine.way_out() == "resume"
    await engine.close()

    resumed = build_engine(store=store, model=_gateway("sk-test", sent), run_id="r")
    await resumed.begin_execution()
    assert (await drive(resumed)).status == "completed"
    assert sent == ["Q", sent[1]] and len(sent) == 2  # the action once, then the review
    await resumed.close()
