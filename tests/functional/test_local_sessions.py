"""Embedded sessions: history across questions, reusable compacted views, one active run.

Also the builders of the ``test_session_*`` modules: ``snapshot``, ``asker`` (a model
that answers each run's "Question X" by its own script) and ``inherited``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from agentloom.local.app import LocalApp
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.snapshot import AgentSnapshot, parse_snapshot
from agentloom_runtime.testing import FunctionModel, ScriptedModel


def snapshot(window: int = 128_000, *, agent: str = "notes", version: int = 1,
             max_iterations: int = 64, **extra: Any) -> AgentSnapshot:
    return parse_snapshot({
        "agent_id": agent, "version": version, "prompt": "Keep notes.",
        "model": {"model": "plain-model", "context_window": window,
                  "max_output_tokens": 256, "safety_margin_tokens": 64,
                  **extra.pop("model", {})},
        "context_policy": {"context_ratio": 0.5, "target_ratio": 0.3},
        "limits": {"max_iterations": max_iterations}, **extra})


def task_of(request: ModelRequest) -> str:
    """The run's own question: the last "Question ..." user message (history first)."""
    questions = [str(m["content"]) for m in request.messages
                 if m.get("role") == "user" and str(m.get("content")).startswith("Question")]
    return questions[-1]


def own_calls(request: ModelRequest) -> int:
    """Tool calls the run made so far: assistant calls after its question."""
    task = task_of(request)
    start = max(i for i, m in enumerate(request.messages) if m.get("content") == task)
    return sum(1 for m in request.messages[start:]
               if m.get("role") == "assistant" and m.get("tool_calls"))


def asker(calls: Mapping[str, list[tuple[str, dict[str, Any]]] | int] | None = None, *,
          delay: float = 0.0) -> FunctionModel:
    """Answers "Question X" with X's calls (a list of (tool, arguments), or a number of
    plan updates), then "Answer X". Keyed on the request only, so a resumed run goes on
    where it stopped; ``delay`` seconds per call (to keep a run active)."""
    script = dict(calls or {})

    async def reply(request: ModelRequest) -> ModelResponse | str:
        if delay:
            import asyncio

            await asyncio.sleep(delay)
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        if request.purpose == "compaction":
            return ModelResponse(content="Summary of the earlier questions.")
        letter = task_of(request).split()[1]
        n = own_calls(request)
        planned = script.get(letter, 0)
        steps = planned if isinstance(planned, list) else [
            ("update_plan", {"steps": [{"id": "1", "title": f"{letter} plan",
                                        "status": "completed"}]})] * planned
        if n < len(steps):
            name, arguments = steps[n]
            return ScriptedModel.call(name, arguments, id=f"{letter}{n}")
        return f"Answer {letter}"

    return FunctionModel(reply)


def inherited_messages(app: LocalApp, run_id: str) -> list[dict[str, Any]]:
    """The history a run inherited: its ``history`` source record's messages."""
    out: list[dict[str, Any]] = []
    for entry in app.store.read(run_id, "src:main"):
        if entry.body["kind"] == "history":
            out += entry.body.get("messages", [entry.body["message"]])
    return out


def inherited(app: LocalApp, run_id: str) -> list[str]:
    """The texts of the history a run inherited."""
    return [str(m.get("content")) for m in inherited_messages(app, run_id)]


class NoteTaker:
    """Keyed on the notes visible in the request, so compaction cannot confuse it."""

    module_id = "note-taker/v1"

    def __init__(self, n: int) -> None:
        self.n = n

    def checkpoint_config(self) -> dict[str, Any]:
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


async def test_history_and_reusable_views(tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    try:
        first = await app.run(snapshot(window=6_000), NoteTaker(12), "first question",
                              session="s")
        assert first.status == "completed"
        views = app.tracker.store.streams.views("s")
        assert len(views) == 1, "the compacted view of the first run was saved"
        assert views[0].run_id == first.run_id
        history = app.history("s")
        assert history.view_run_id == first.run_id
        assert any("Handoff summary" in str(m.get("content")) for m in history.messages)
        assert all(m.get("role") != "system" for m in history.messages)
        second = await app.run(snapshot(window=6_000), NoteTaker(1), "second question",
                               session="s")
        assert second.status == "completed"
        inherited_records = inherited_messages(app, second.run_id)
        assert inherited_records[0]["content"] == "first question"  # the pinned task
        assert any("Handoff summary" in str(m["content"]) for m in inherited_records)
        # the view replaced the 12 summarised plan calls: far fewer records came along
        assert len(inherited_records) < 12
    finally:
        app.close()


async def test_a_new_question_is_refused_while_the_lease_names_a_running_run(
        tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    try:
        app.open_run("s", "r1", snapshot())  # this process drives r1 (and has not let go)
        engine, _ = app.engine(snapshot(), asker(), session="s")
        await engine.start("Question A", run_id="r1", labels={"session": "s"})
        with pytest.raises(ConfigError, match=r"run r1 is being driven by process \d+ "
                           r"\(this process\) on this host; wait for it or cancel it"):
            await app.run(snapshot(), asker(), "Question B", session="s")
        await engine.close()
    finally:
        app.close()
