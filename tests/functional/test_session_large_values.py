"""A large value in a session's history wedges neither its run nor the session's next
question (issue 17), through the embedded platform: a 5 MB ``workspace_write``
argument is written whole, the run goes on with a capped copy in its view, and the next
question inherits the capped copy, while the session's records keep the value whole."""

from __future__ import annotations

import json
from pathlib import Path

from functional.test_local_sessions import asker, inherited_messages, snapshot

from agentloom.local.app import LocalApp

MB = 1_000_000
CONTENT = ("a line of a large generated file, written in one call\n" * (5 * MB // 55 + 1))
BUDGET = 128_000 - 256 - 64  # snapshot(): window - output - margin, in UTF-8 bytes


def written(home: Path) -> str:
    return next(home.rglob("big.txt")).read_text(encoding="utf-8")


def arguments_shown(messages: list[dict[str, object]]) -> list[str]:
    return [str(c["function"]["arguments"]) for m in messages
            for c in m.get("tool_calls") or ()]  # type: ignore[attr-defined]


async def test_a_5mb_workspace_write_wedges_neither_the_run_nor_the_next_question(
        tmp_path: Path) -> None:
    """Before: the run blocked ``budget_exceeded`` (its view carried the 5 MB call), a
    resume blocked the same way, and so did every later question in the session."""
    app = LocalApp(tmp_path)
    snap = snapshot(tools=["workspace"])
    write = ("workspace_write", {"path": "big.txt", "content": CONTENT})
    model = asker({"A": [write]})
    try:
        a = await app.run(snap, model, "Question A", session="s")
        assert (a.status, a.error_code) == ("completed", None), app.summary(a.run_id)
        assert written(tmp_path) == CONTENT, "the tool got the whole argument"
        later = [r for r in model.requests if r.purpose == "action"][1:]
        assert later and all(len(json.dumps(list(r.messages)).encode()) <= BUDGET
                             for r in later)
        [shown] = arguments_shown(list(later[0].messages))
        assert len(shown) <= 24_000 and json.loads(shown)["path"] == "big.txt"

        b = await app.run(snap, asker(), "Question B", session="s")
        assert (b.status, b.error_code) == ("completed", None), app.summary(b.run_id)
        [history] = arguments_shown(inherited_messages(app, b.run_id))
        assert len(history) <= 24_000 and "…[cut:" in json.loads(history)["content"]
        [record] = [r for r in app.records("s") if r["kind"] == "assistant"
                    and r["message"].get("tool_calls")]
        kept = record["message"]["tool_calls"][0]["function"]["arguments"]
        assert json.loads(kept)["content"] == CONTENT, "the session keeps it whole"
    finally:
        app.close()


async def test_a_question_too_large_for_the_window_blocks_and_the_next_question_moves_on(
        tmp_path: Path) -> None:
    """The question alone fills the budget: the run blocks with a new question as its
    way out (a resume would stop the same way), and the session's next question does
    move on — its history holds the large question, which compaction summarises from a
    capped copy (before: ``the oldest compressible history does not fit the allowed
    summary calls``, the session wedged until cancelled)."""
    app = LocalApp(tmp_path)
    snap = snapshot(window=8_000)
    try:
        a = await app.run(snap, asker(), "Question A " + "very long words " * 900,
                          session="s")
        assert (a.status, a.error_code) == ("blocked", "budget_exceeded")
        summary = app.summary(a.run_id)
        assert summary.way_out == "new_question"
        assert summary.error is not None and "ask a new question" in summary.error["message"]
        model = asker()
        b = await app.run(snap, model, "Question B", session="s")
        assert (b.status, b.error_code) == ("completed", None), app.summary(b.run_id)
        summaries = [r for r in model.requests if r.purpose == "compaction"]
        assert summaries and "is left out" in str(summaries[-1].messages)
    finally:
        app.close()
