"""JournalContextManager: source records and the model-visible view, and a restore that
reads only what the view needs."""

from __future__ import annotations

from typing import Any

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.checkpoint.journal import Journal
from agentloom_runtime.checkpoint.store import LogEntry
from agentloom_runtime.context import manager as manager_module
from agentloom_runtime.context.manager import INLINE_CHARS, JournalContextManager
from agentloom_runtime.contracts import CompactionResult, ContextFrame


class CountingStore(InMemoryCheckpointStore):
    """Records every range read (stream, after, limit) and every blob read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[str, int, int | None]] = []
        self.blob_reads = 0

    def _query(self, run_id: str, stream: str, after: int,
               limit: int | None) -> list[tuple[int, str]]:
        self.reads.append((stream, after, limit))
        return super()._query(run_id, stream, after, limit)

    def _get_blob(self, run_id: str, key: str) -> bytes | None:
        self.blob_reads += 1
        return super()._get_blob(run_id, key)


def start(store: InMemoryCheckpointStore | None = None,
          history: list[dict[str, Any]] | None = None,
          pending: list[dict[str, Any]] | None = None
          ) -> tuple[Any, Journal, Any, ContextFrame]:
    """``pending``: the frame's tool group (the engine's; the manager only reads it)."""
    store = store or CountingStore()
    journal = Journal(store, "run-1", 0, {})
    manager = JournalContextManager()
    frame = ContextFrame(instance="main", task="do it", plan=[],
                         pending=[] if pending is None else pending)
    manager.create(journal, frame, system="be careful", history=history or [], task="do it")
    return store, journal, manager, frame


def reopen(store: Any, journal: Journal, frame: ContextFrame) -> tuple[Journal, Any]:
    """A new process: a new journal over the stored head, a new manager."""
    journal.commit("test")
    return Journal(store, "run-1", journal.version, journal.head), JournalContextManager()


def call(n: int) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"raw{n}", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}


def tool_turn(manager: Any, journal: Journal, frame: ContextFrame, n: int, text: str,
              shown: str | None = None) -> int:
    """An assistant call (its call id rewritten in the view) and the tool result (the
    full text in the source record; ``shown`` in the view when it differs)."""
    raw = call(n)
    visible = {**raw, "tool_calls": [{**raw["tool_calls"][0], "id": f"call_{n}"}]}
    manager.append(journal, frame, "assistant", raw, visible=visible)
    message = {"role": "tool", "tool_call_id": f"call_{n}", "content": text}
    seen = None if shown is None else {**message, "content": shown}
    return int(manager.append(journal, frame, "tool_result", message, visible=seen,
                              extra={"request_id": f"r{n}", "name": "read", "status": "ok"}))


def test_a_restored_view_equals_the_live_one_and_records_keep_their_kinds() -> None:
    store, journal, manager, frame = start(
        history=[{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"}])
    tool_turn(manager, journal, frame, 1, "small result")
    tool_turn(manager, journal, frame, 2, "m" * (2 * INLINE_CHARS))  # a source reference
    tool_turn(manager, journal, frame, 3, "L" * 50_000, shown="L" * 100 + " [truncated]")
    manager.append(journal, frame, "assistant", {"role": "assistant", "content": "done"})
    live = [dict(m) for m in manager.view(journal, frame)]
    journal2, fresh = reopen(store, journal, frame)
    assert fresh.view(journal2, frame) == live
    assert [m["_seq"] for m in live] == [1, 2, 2, *range(3, len(live))]  # one history record
    kinds = [e.body["kind"] for e in journal2.read("src:main")]
    assert kinds == ["system", "history", "user", "assistant", "tool_result",
                     "assistant", "tool_result", "assistant", "tool_result", "assistant"]
    assert frame["history_watermark"] == 0 and frame["counters"]["user_turns"] == 1
    assert fresh.model_view(journal2, frame) == [
        {k: v for k, v in m.items() if k != "_seq"} for m in live]


def test_restore_never_reads_a_source_the_view_does_not_need() -> None:
    store, journal, manager, frame = start()
    for n in range(20):
        tool_turn(manager, journal, frame, n, "L" * 60_000, shown="L" * 200)  # capped
    manager.append(journal, frame, "assistant", {"role": "assistant", "content": "done"})
    journal2, fresh = reopen(store, journal, frame)
    store.reads.clear()
    store.blob_reads = 0
    view = fresh.restore(journal2, frame)
    assert len(view) == 43
    # every message is in its view entry: the 60,000-character sources (spilled to
    # blobs by the store) are never read, and neither is any other source record
    assert store.reads == [("view:main", 0, None)] and store.blob_reads == 0
    assert view[3]["content"] == "L" * 200


def test_sources_are_read_by_exact_ranges_that_skip_large_records() -> None:
    store, journal, manager, frame = start()
    medium = "m" * (2 * INLINE_CHARS)  # not inlined: read from its source record
    wanted = [tool_turn(manager, journal, frame, 1, medium),
              tool_turn(manager, journal, frame, 2, medium)]  # one small call in between
    tool_turn(manager, journal, frame, 3, "L" * 60_000, shown="L" * 200)
    wanted.append(tool_turn(manager, journal, frame, 4, medium))
    journal2, fresh = reopen(store, journal, frame)
    store.reads.clear()
    view = fresh.restore(journal2, frame)
    sources = [(after, limit) for stream, after, limit in store.reads if stream == "src:main"]
    # the first two results are read as one range (what lies between is small); the
    # large capped result's source is skipped, so the last is a range of its own
    assert sources == [(wanted[0] - 1, wanted[1] - wanted[0] + 1), (wanted[2] - 1, 1)]
    assert store.blob_reads == 0
    assert [m["content"] for m in view if m["_seq"] in wanted] == [medium] * 3


def test_views_written_before_inlining_still_restore() -> None:
    """Older checkpoints: every unchanged message is a bare ``{"src": seq}`` entry and
    ``of`` entries have no size."""
    store, journal, manager, frame = start()
    tool_turn(manager, journal, frame, 1, "small")
    tool_turn(manager, journal, frame, 2, "L" * 30_000, shown="L" * 10)
    live = [dict(m) for m in manager.view(journal, frame)]
    for entry in journal._entries:
        if entry.stream == "view:main":
            entry.body.pop("n", None)
            if "src" in entry.body:
                entry.body.pop("message", None)
    journal2, fresh = reopen(store, journal, frame)
    assert fresh.restore(journal2, frame) == live


def test_a_compaction_snapshot_is_restored_with_the_entries_after_it() -> None:
    store, journal, manager, frame = start()
    for n in range(3):
        tool_turn(manager, journal, frame, n, f"result {n}")
    view = manager.view(journal, frame)
    summary = {"role": "user", "content": "summary", "_summary": True, "_covers": [[4, 9]]}
    manager.commit_compaction(journal, frame, CompactionResult(
        messages=[view[0], view[3], summary], metrics={}))
    manager.append(journal, frame, "assistant", {"role": "assistant", "content": "next"})
    live = [dict(m) for m in manager.view(journal, frame)]
    journal2, fresh = reopen(store, journal, frame)
    store.reads.clear()
    assert fresh.restore(journal2, frame) == live
    assert [s for s, _, _ in store.reads] == ["snap:main", "view:main"]
    assert frame["counters"]["baseline_user_turns"] == 1


def test_supplements_wait_for_pending_tools_and_are_not_turns() -> None:
    pending: list[dict[str, Any]] = []
    _store, journal, manager, frame = start(pending=pending)
    manager.queue_input(frame, "also this")
    pending.append({"call_id": "c"})
    assert manager.drain_inputs(journal, frame) == 0
    pending.clear()
    assert manager.drain_inputs(journal, frame) == 1
    assert manager.view(journal, frame)[-1]["content"] == "also this"
    assert frame["counters"]["user_turns"] == 1 and frame["inputs"] == []


def test_source_ranges_merge_only_across_known_small_records() -> None:
    def entry(body: dict[str, Any]) -> Any:
        return LogEntry("view:main", 0, body)

    small = {"role": "user", "content": "x"}
    entries = [entry({"src": 1}), entry({"src": 2, "message": small}), entry({"src": 3}),
               entry({"of": 4, "message": small, "n": 10**6}), entry({"src": 5}),
               entry({"of": 6, "message": small}), entry({"src": 7}), entry({"src": 8})]
    assert manager_module._source_ranges(entries) == [[1, 3], [5, 5], [7, 8]]
