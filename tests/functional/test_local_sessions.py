"""Embedded sessions: history across questions, reusable compacted views, one active run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentloom.local.app import LocalApp
from agentloom.local.sessions import LocalSessions
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.snapshot import parse_snapshot
from agentloom_runtime.testing import ScriptedModel


def snapshot(window: int = 128_000):
    return parse_snapshot({
        "agent_id": "notes", "prompt": "Keep notes.",
        "model": {"model": "plain-model", "context_window": window,
                  "max_output_tokens": 256, "safety_margin_tokens": 64},
        "context_policy": {"context_ratio": 0.5, "target_ratio": 0.3}})


class NoteTaker:
    """Keyed on the notes visible in the request, so compaction cannot confuse it."""

    module_id = "note-taker/v1"

    def __init__(self, n: int) -> None:
        self.n = n

    def checkpoint_config(self):
        return {"n": self.n}

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        text = " ".join(str(m.get("content")) for m in request.messages)
        text += " ".join(str(m.get("tool_calls")) for m in request.messages)
        seen = [int(x) for x in re.findall(r"note (\d+)", text)]
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        if request.purpose == "compaction":
            return ModelResponse(content=f"Notes taken up to note {max(seen, default=0)}.")
        k = max(seen) + 1 if seen else 0
        if k >= self.n:
            return ScriptedModel.answer("noted")
        return ScriptedModel.call("update_plan", {"steps": [
            {"id": "1", "title": f"note {k} " + "detail " * 30, "status": "completed"}]},
            id=f"p{k}")


def plan_script(n: int) -> NoteTaker:
    return NoteTaker(n)


async def test_history_and_reusable_views(tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    try:
        first = await app.run(snapshot(window=6_000), plan_script(12), "first question",
                              session="s")
        assert first.status == "completed"
        sessions = LocalSessions(app.store)
        views = sessions.views("s")
        assert len(views) == 1, "the compacted view of the first run was saved"
        history = sessions.history("s")
        assert history.view_run_id == first.run_id
        assert any("Handoff summary" in str(m.get("content")) for m in history.messages)
        assert all(m.get("role") != "system" for m in history.messages)
        second = await app.run(snapshot(window=6_000), plan_script(1), "second question",
                               session="s")
        assert second.status == "completed"
        records = app.store.read(second.run_id, "src:main")
        inherited = [e.body for e in records if e.body["kind"] == "history"]
        assert inherited[0]["message"]["content"] == "first question"  # the pinned task
        assert any("Handoff summary" in str(r["message"]["content"]) for r in inherited)
        # the view replaced the 12 summarised plan calls: far fewer records came along
        assert len(inherited) < 12
    finally:
        app.close()


async def test_new_question_refused_while_a_run_is_active(tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    try:
        sessions = LocalSessions(app.store)
        engine, _ = app.engine(snapshot(), plan_script(1), session="s")
        sessions.add_run("s", "r1")
        await engine.start("still going", run_id="r1")
        with pytest.raises(ConfigError, match="active run r1"):
            await app.run(snapshot(), plan_script(1), "next", session="s")
    finally:
        app.close()
