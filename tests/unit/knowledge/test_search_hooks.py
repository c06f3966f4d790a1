"""``knowledge_search`` inside a real engine: its query embedding passes the
``model.embedding.before`` (which may rewrite the texts) and ``model.embedding.after``
hook points of the run's version, through ``ToolContext.services["hooks"]``, with
purpose ``query``; the model gets passages with citation ids; the citations are saved."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from support.engine import build_engine, drive, make_snapshot
from unit.knowledge.test_run_search import _base

from agentloom.capabilities import RunScope
from agentloom.knowledge import KnowledgeCapability
from agentloom_runtime.hooks import Continue, HookDefinition, HookRegistry, PatchInput
from agentloom_runtime.testing import ScriptedModel


def test_the_query_embedding_passes_the_embedding_hooks(tmp_path: Path) -> None:
    service, embedders, base = _base(tmp_path)  # builds with asyncio.run: outside a loop
    seen: list[dict[str, Any]] = []

    async def expand(ctx: Any, payload: dict[str, Any]) -> PatchInput:
        seen.append({"point": ctx.point, "purpose": ctx.scope.purpose, **payload})
        return PatchInput({"texts": [t + " refunds paid" for t in payload["texts"]]})

    async def watch(ctx: Any, payload: dict[str, Any]) -> Continue:
        seen.append({"point": ctx.point, "purpose": ctx.scope.purpose,
                     "vectors": len(payload["vectors"])})
        return Continue()

    registry = HookRegistry([HookDefinition("expand", "1", expand, replay_safe=True),
                             HookDefinition("watch", "1", watch, observation=True)])
    snapshot = make_snapshot(space_id="spc_1", knowledge_bases=[base.base_id], hooks=[
        {"hook_id": "expand", "version": "1", "point": "model.embedding.before"},
        {"hook_id": "watch", "version": "1", "point": "model.embedding.after"}])
    tools = KnowledgeCapability(service).tools(snapshot, RunScope(
        "spc_1", "tester", 1, "ses_1", "run_1"))
    engine = build_engine(snapshot=snapshot, tools=tools,
                          hook_registry=registry, script=[
                              ScriptedModel.call("knowledge_search", {"query": "money back"},
                                                 id="k1"),
                              ScriptedModel.answer("see the passage"),
                              ScriptedModel.verdict("complete")])

    async def run() -> str:
        await engine.start("find it")
        return (await drive(engine)).status

    assert asyncio.run(run()) == "completed", engine.error
    assert [s["point"] for s in seen] == ["model.embedding.before", "model.embedding.after"]
    assert all(s["purpose"] == "query" for s in seen)
    assert seen[0]["texts"] == ["money back"] and seen[1]["vectors"] == 1
    assert ("query", ["money back refunds paid"]) in embedders.embedder.calls
    citations = service.store.citations("run_1")
    assert citations and citations[0].heading == "Refunds"
