"""Sizes are kept with the records they size: a new engine attaching to a long run (a
new process, every step of a serverless run) takes each view message's size from the
entry it reads, instead of measuring the whole history again (issue 18)."""

from __future__ import annotations

from typing import Any

import pytest
from support.engine import COUNT_SCHEMA, build_engine, make_snapshot

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.checkpoint.journal import Journal
from agentloom_runtime.context import estimators
from agentloom_runtime.context.estimators import Utf8BytesEstimator, clear_text_caches
from agentloom_runtime.context.manager import JournalContextManager
from agentloom_runtime.testing import ScriptedModel
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

HISTORY = 2_000


def history(n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"message {i}: " + "lorem ipsum dolor " * 12} for i in range(n)]


async def count_words(context: ToolContext, arguments: dict[str, Any]) -> Any:
    return {"count": len(arguments["text"].split())}


TOOLS = [ToolDefinition(name="count_words", description="count words",
                        parameters=COUNT_SCHEMA, handler=count_words,
                        implementation_id="count-words/v1", read_only=True)]
SNAPSHOT = make_snapshot(model={"model": "m", "context_window": 10_000_000,
                                "max_output_tokens": 4096},
                         limits={"max_model_calls": 1_000, "max_iterations": 1_000})


def engine(store: Any, *, run_id: str | None = None, steps: int = 0) -> Any:
    script = [ScriptedModel.call("count_words", {"text": f"a b {i}"}, id=f"c{i}")
              for i in range(steps)]
    return build_engine(store=store, script=script, tools=TOOLS, snapshot=SNAPSHOT,
                        run_id=run_id, compaction="default")


class Measured:
    """Counts the messages the bytes estimator measures (its one measuring function)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = estimators.message_json_bytes

        def counted(message: Any) -> int:
            self.count += 1
            return real(message)

        monkeypatch.setattr(estimators, "message_json_bytes", counted)


async def started(store: Any) -> str:
    first = engine(store, steps=2)
    run_id = await first.start("count the words", history=history(HISTORY))
    await first.step()
    await first.step()
    return run_id


async def test_cold_attach_does_not_measure_the_history_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = InMemoryCheckpointStore()
    run_id = await started(store)
    measured = Measured(monkeypatch)
    clear_text_caches()  # as in a new process
    fresh = engine(store, run_id=run_id, steps=1)
    result = await fresh.step()  # the model step: trigger check and hard limit
    assert result.kind == "action"
    assert measured.count < 20, f"{measured.count} messages measured for one step"


async def test_kept_sizes_equal_a_fresh_measure() -> None:
    store = InMemoryCheckpointStore()
    run_id = await started(store)
    head = store.load_head(run_id)
    assert head is not None
    frame = head.body["frames"]["main"]
    sizer = Utf8BytesEstimator()
    journal = Journal(store, run_id, head.version, head.body)
    manager = JournalContextManager(sizer)
    view = manager.restore(journal, frame)
    kept = sizer.message_costs(view)
    assert kept == Utf8BytesEstimator().message_costs([dict(m) for m in view])
    model = manager.model_view(journal, frame)
    assert sizer.message_costs(model) == kept  # the model's copies: the same sizes


class OlderJournal:
    """The run's journal, its view entries as an older checkpoint wrote them (no sizes)."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def read(self, stream: str, after: int = 0, limit: int | None = None) -> list[Any]:
        entries = self.journal.read(stream, after, limit)
        if not stream.startswith("view:"):
            return entries
        return [type(e)(e.stream, e.seq, {k: v for k, v in e.body.items()
                                          if k not in ("c", "costs")}) for e in entries]


async def test_a_view_without_kept_sizes_is_measured(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = InMemoryCheckpointStore()
    run_id = await started(store)
    head = store.load_head(run_id)
    assert head is not None
    entries = store.read(run_id, "view:main")
    assert any("costs" in e.body for e in entries) and any("c" in e.body for e in entries)
    journal = OlderJournal(Journal(store, run_id, head.version, head.body))
    sizer = Utf8BytesEstimator()
    view = JournalContextManager(sizer).restore(journal,  # type: ignore[arg-type]
                                                head.body["frames"]["main"])
    measured = Measured(monkeypatch)
    costs = sizer.message_costs(view)
    assert measured.count >= HISTORY  # nothing was kept: every message is measured
    assert costs == Utf8BytesEstimator().message_costs([dict(m) for m in view])


async def test_a_new_engines_tool_step_does_not_load_the_view(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = InMemoryCheckpointStore()
    first = engine(store, steps=3)
    run_id = await first.start("count the words", history=history(HISTORY))
    assert (await first.step()).kind == "action"  # the tool call is pending
    restored: list[int] = []
    real = JournalContextManager.restore

    def counted(self: JournalContextManager, journal: Any, frame: Any) -> Any:
        restored.append(1)
        return real(self, journal, frame)

    monkeypatch.setattr(JournalContextManager, "restore", counted)
    fresh = engine(store, run_id=run_id, steps=1)
    assert (await fresh.step()).kind == "tool"
    assert restored == []  # the result was appended without reading the history
    later = engine(store, run_id=run_id, steps=1)
    view = later.main_view().messages
    assert restored == [1]
    alone = engine(InMemoryCheckpointStore(), steps=3)  # the same steps by one engine
    await alone.start("count the words", history=history(HISTORY))
    await alone.step()
    await alone.step()
    assert view == alone.main_view().messages
    assert view[-1]["role"] == "tool"
