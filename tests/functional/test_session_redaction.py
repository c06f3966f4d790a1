"""Known credentials never reach a later run's history or the host's events; later runs
see what the model was shown, not the raw record."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from functional.test_local_sessions import asker, inherited, snapshot

from agentloom.local.app import LocalApp
from agentloom.platform.redaction import REDACTED, Redactor

KEY = "sk-test-0123456789abcdef"  # behind the connection's api_key_ref
OPENAI = "sk-openai-fedcba9876543210"  # a conventional provider variable


def test_the_redactor_replaces_known_keys_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_PROVIDER_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI)
    monkeypatch.setenv("DEEPSEEK_API_KEY", "short")  # too short to be told apart
    redactor = Redactor.from_environment("MY_PROVIDER_KEY")
    value: dict[str, Any] = {"a": [f"x{KEY}y", ("t", OPENAI)], KEY: 1, "n": 3,
                             "short": "short"}
    assert redactor.scrub(value) == {"a": [f"x{REDACTED}y", ["t", REDACTED]], REDACTED: 1,
                                     "n": 3, "short": "short"}
    assert value["a"][0] == f"x{KEY}y"  # never mutated
    assert not Redactor() and Redactor().scrub(value) is value


async def test_a_key_in_a_tool_result_never_reaches_the_next_history_or_the_events(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_PROVIDER_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI)
    events: list[tuple[str, Mapping[str, Any]]] = []
    app = LocalApp(tmp_path, emit=lambda topic, data: events.append((topic, data)))
    snap = snapshot(tools=["workspace"], model={"api_key_ref": "MY_PROVIDER_KEY"})
    script = {"A": [("workspace_write", {"path": "env.txt",
                                         "content": f"KEY={KEY}\nOPENAI={OPENAI}\n"}),
                    ("workspace_read", {"path": "env.txt"})]}
    try:
        a = await app.run(snap, asker(script), "Question A", session="s")
        assert a.status == "completed"
        raw = json.dumps([e.body for e in app.store.read(a.run_id, "src:main")])
        assert KEY in raw and OPENAI in raw  # the run's own source records keep the truth
        assert any(t == "tool.completed" for t, _ in events)
        emitted = json.dumps(events)
        assert KEY not in emitted and OPENAI not in emitted and REDACTED in emitted

        model = asker()
        b = await app.run(snap, model, "Question B", session="s")
        history = json.dumps(inherited(app, b.run_id))
        assert REDACTED in history
        sent = json.dumps([m for r in model.requests for m in r.messages])
        for text in (history, sent, json.dumps(app.records("s"))):
            assert KEY not in text and OPENAI not in text
    finally:
        app.close()


async def test_the_next_question_inherits_the_capped_tool_result_the_model_was_shown(
        tmp_path: Path) -> None:
    app = LocalApp(tmp_path)
    snap = snapshot(window=1_000_000, tools=["workspace"])  # no compaction here
    big = "\n".join(f"line {i:05d} " + "x" * 40 for i in range(600))  # ~31 000 chars
    script = {"A": [("workspace_write", {"path": "big.txt", "content": big}),
                    ("workspace_read", {"path": "big.txt"})]}
    try:
        a = await app.run(snap, asker(script), "Question A", session="s")
        assert a.status == "completed"
        b = await app.run(snap, asker(), "Question B", session="s")
        results = [t for t in inherited(app, b.run_id) if "line 00000" in t]
        assert len(results) == 1
        assert len(results[0]) <= 24_000  # capped, with a reference, as the model saw it
    finally:
        app.close()
