"""Duplicate and concurrent step invocations against one SQLite file: several workers in
threads (each with its own event loop and engine, as separate Lambda invocations would
be) drive the same run. Every commit is fenced by the head version, an operation in
flight is never judged by a concurrent step, and every side effect happens once."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from support.engine import SideEffects, make_snapshot, saved_head

from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.context import NoCompaction
from agentloom_runtime.engine import create_engine
from agentloom_runtime.errors import CheckpointConflict
from agentloom_runtime.testing import KeyedScriptModel, ScriptedModel

MAILS = [f"user{i}@example.com" for i in range(6)]


class SlowMailer(SideEffects):
    def tools(self):
        defs = super().tools()
        mail = defs[0]
        inner = mail.handler

        async def slow(context, arguments):
            await asyncio.sleep(0.005)  # widen the race window
            return await inner(context, arguments)

        import dataclasses

        return [dataclasses.replace(mail, handler=slow), defs[1]]


def script():
    return KeyedScriptModel([ScriptedModel.call("send_mail", {"to": m}, id=f"c{i}")
                             for i, m in enumerate(MAILS)] + [ScriptedModel.answer("done")])


def worker(path: Path, run_id: str, effects: SideEffects, outcome: dict) -> None:
    async def main() -> None:
        store = SqliteCheckpointStore(path)
        try:
            for _ in range(400):
                engine = create_engine(make_snapshot(), save=store, model_gateway=script(),
                                       tools=effects.tools(), checkpoint=run_id,
                                       compaction_policy=NoCompaction())
                try:
                    result = await engine.step()
                except CheckpointConflict:
                    outcome["conflicts"] = outcome.get("conflicts", 0) + 1
                    await asyncio.sleep(0.001)
                    continue
                if result.next == "done":
                    return
        finally:
            store.close()

    asyncio.run(main())


def test_four_workers_drive_one_run(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    effects = SlowMailer()
    store = SqliteCheckpointStore(path)

    async def start() -> str:
        engine = create_engine(make_snapshot(), save=store, model_gateway=script(),
                               tools=effects.tools(), compaction_policy=NoCompaction())
        return await engine.start("mail everyone")

    run_id = asyncio.run(start())
    outcome: dict = {}
    threads = [threading.Thread(target=worker, args=(path, run_id, effects, outcome))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    head = saved_head(store, run_id)
    store.close()
    assert head["status"] == "completed", head.get("error")
    assert sorted(effects.calls) == sorted(MAILS), "every mail exactly once"
    assert outcome.get("conflicts", 0) > 0, "the workers really raced"
