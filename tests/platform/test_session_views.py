"""Reusable views on the embedded platform (docs/contract.md#observed-prefix): a run whose main view
was compacted saves a view in its completing commit (the same SQLite transaction as the
head and its records), its messages a blob of the run in the encrypted checkpoint
store; the next question starts from it, and the view is never saved when the run did
not observe a contiguous prefix of the session."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentloom.local.embedded import EmbeddedPlatform

from .conftest import ALICE, Model, wait_for

COMPACTING = {"prompt": "You answer questions.",
              "model": {"model": "test-model", "context_window": 20_000,
                        "max_output_tokens": 256, "safety_margin_tokens": 64},
              "context_policy": {"context_ratio": 0.5, "target_ratio": 0.3}}
PAD = " " + "words " * 2000  # a long question: a few of them fill the context budget


def _session(platform: EmbeddedPlatform) -> str:
    space = platform.admin.create_space(ALICE, "Team")
    agent, _ = platform.admin.create_agent(ALICE, space.space_id, "Helper", COMPACTING)
    platform.admin.publish(ALICE, space.space_id, agent.agent_id)
    return platform.sessions.create_session(ALICE, space.space_id, agent.agent_id).session_id


def _ask(platform: EmbeddedPlatform, session_id: str, question: str) -> str:
    run, _ = platform.sessions.ask(ALICE, session_id, question + PAD)

    def done() -> Any:
        found = platform.store.runs.get(session_id, run.run_id)
        return found if found and found.value.status not in ("queued", "running") \
            and not platform.launcher.driving(run.run_id) else None

    stopped = wait_for(done, what=f"{question} to stop")
    assert stopped.value.status == "completed", stopped.value.error
    return run.run_id


def test_a_compacted_run_saves_a_view_the_next_question_starts_from(
        platform: EmbeddedPlatform, model: Model) -> None:
    sid = _session(platform)
    runs = [_ask(platform, sid, f"Q {n}") for n in ("one", "two", "three", "four")]
    assert "compaction" in [r.purpose for r in model.requests]
    views = platform.store.streams.views(sid)
    assert views, "no reusable view was saved"
    assert {v.run_id for v in views} <= set(runs)
    latest = max(views, key=lambda v: v.watermark)
    records = platform.store.streams.records(sid, instance="main", limit=1000)
    assert latest.watermark <= records[-1].seq
    blob = platform.checkpoints.get_blob(latest.run_id, latest.blob)
    assert b"Summary." in blob and b"Summary." not in _raw_file(platform)  # encrypted
    history = platform.tracker.history(sid)
    assert history.view_run_id == latest.run_id
    assert history.view_watermark == latest.watermark
    assert any("Summary." in str(m.get("content")) for m in history.messages)
    _ask(platform, sid, "Q five")  # and it goes on from there


def _raw_file(platform: EmbeddedPlatform) -> bytes:
    path = platform.home / "agentloom.sqlite3"
    data = path.read_bytes()
    wal = path.with_name(path.name + "-wal")
    return data + (wal.read_bytes() if wal.exists() else b"")


def test_views_need_a_watch(platform: EmbeddedPlatform,
                            open_platform: Callable[[], EmbeddedPlatform]) -> None:
    sid = _session(platform)
    platform.tracker.commits.watch = lambda *a, **k: None  # type: ignore[union-attr,method-assign]
    for n in ("one", "two", "three", "four"):
        _ask(platform, sid, f"Q {n}")
    assert platform.store.streams.views(sid) == []

