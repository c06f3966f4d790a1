"""Embed the engine in your own program: a custom tool, a hook, a durable store, a loop.

Run: .venv/bin/python docs/examples/sdk/embed.py   (uses a scripted model; no key needed)
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.engine import create_engine
from agentloom_runtime.hooks import Continue, HookDefinition, HookRegistry, Reject
from agentloom_runtime.snapshot import parse_snapshot
from agentloom_runtime.testing import KeyedScriptModel, ScriptedModel
from agentloom_runtime.tool_contracts import ToolDefinition


async def count_words(context: Any, arguments: dict[str, Any]) -> dict[str, int]:
    return {"count": len(arguments["text"].split())}


def configure_tools(registry: Any) -> None:
    registry.register(ToolDefinition(
        name="count_words", description="Count the words in a text",
        parameters={"type": "object", "properties": {"text": {"type": "string"}},
                    "required": ["text"], "additionalProperties": False},
        handler=count_words, implementation_id="count-words/v1", resume_inflight=True))


async def no_empty_text(ctx: Any, payload: dict[str, Any]) -> Any:
    if not payload["arguments"].get("text", "").strip():
        return Reject("empty text")
    return Continue()


SNAPSHOT = parse_snapshot({
    "agent_id": "counter", "prompt": "You count words.",
    "model": {"model": "gpt-4o-mini", "context_window": 128_000},
    "context_policy": {},
    "hooks": [{"hook_id": "no-empty-text", "version": "1", "point": "tool.before"}],
})


async def main(path: Path) -> str:
    store = SqliteCheckpointStore(path)
    model = KeyedScriptModel([  # a real deployment passes no model_gateway: the snapshot's
        ScriptedModel.call("count_words", {"text": "one two three"}, id="c1"),  # connection
        ScriptedModel.answer("There are 3 words."),                             # is used
    ])
    hooks = HookRegistry([HookDefinition("no-empty-text", "1", no_empty_text,
                                         replay_safe=True)])
    engine = create_engine(SNAPSHOT, save=store, model_gateway=model,
                           configure_tools=configure_tools, hook_registry=hooks)
    try:
        run_id = await engine.start("How many words are in 'one two three'?")
        while (result := await engine.step()).next != "done":
            pass  # in AWS, Step Functions invokes one step per Lambda call instead
        outcome = engine.outcome()  # the read API: status, answer, reason, annotations
        assert outcome is not None and result.run_id == run_id
        return f"{outcome.status}: {outcome.answer}"
    finally:
        await engine.close()
        store.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        print(asyncio.run(main(Path(tmp) / "runs.sqlite3")))
