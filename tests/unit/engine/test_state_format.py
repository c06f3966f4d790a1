"""The durable state's format: a run saved in another format is refused (no migration),
by ``attach`` and by ``read_run`` alike, with a message naming both formats; the head
of a run stays small (≤ 2 KB) because it holds references, not content."""

from __future__ import annotations

import re

import pytest
from support.engine import (
    SideEffects,
    build_engine,
    drive,
    make_snapshot,
    representative_script,
    saved_head,
)

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.checkpoint.store import Commit, dumps
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.engine import FORMAT, read_run
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.testing import FunctionModel, KeyedScriptModel, ScriptedModel

HEAD_LIMIT = 2 * 1024


async def saved_in_format(store: InMemoryCheckpointStore, saved_format: int) -> str:
    """A run whose head says it was written in ``saved_format``."""
    run_id = await build_engine(store=store).start("a question")
    loaded = store.load_head(run_id)
    assert loaded is not None
    store.commit(Commit(run_id, loaded.version, {**loaded.body, "format": saved_format}))
    return run_id


def names_both(message: str, saved_format: int) -> bool:
    return (re.search(rf"\bformat {saved_format}\b", message) is not None
            and re.search(rf"\bformat {FORMAT}\b", message) is not None)


@pytest.mark.parametrize("saved_format", [FORMAT - 1, FORMAT + 1])
async def test_a_run_in_another_format_is_refused_naming_both(saved_format: int) -> None:
    store = InMemoryCheckpointStore()
    run_id = await saved_in_format(store, saved_format)
    with pytest.raises(ConfigError) as attach:
        build_engine(store=store, run_id=run_id)
    assert names_both(attach.value.message, saved_format), attach.value.message
    assert run_id in attach.value.message
    with pytest.raises(ConfigError) as listed:
        read_run(store, run_id)
    assert names_both(listed.value.message, saved_format), listed.value.message


async def test_the_current_format_is_read() -> None:
    store = InMemoryCheckpointStore()
    run_id = await saved_in_format(store, FORMAT)
    summary = read_run(store, run_id)
    assert summary is not None and summary.status == "running"
    build_engine(store=store, run_id=run_id)


def head_bytes(store: InMemoryCheckpointStore, run_id: str) -> int:
    """The head as the store writes it (its JSON text, UTF-8)."""
    return len(dumps(saved_head(store, run_id)).encode())


async def test_the_head_of_a_completed_representative_run_is_small() -> None:
    store, effects = InMemoryCheckpointStore(), SideEffects()
    engine = build_engine(store=store, snapshot=make_snapshot(mode="plan"),
                          model=KeyedScriptModel(representative_script()),
                          tools=effects.tools())
    run_id = await engine.start("count the words and mail ops")
    assert (await drive(engine)).status == "completed"
    assert effects.calls == ["ops@example.com"]
    assert head_bytes(store, run_id) <= HEAD_LIMIT


async def test_the_head_does_not_grow_with_the_history() -> None:
    """Forty tool results of 1 KB each: the head refers to them, it does not copy them."""
    rounds = 40

    def mailer(request: ModelRequest) -> ModelResponse:
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        done = sum(1 for m in request.messages if m.get("role") == "tool")
        if done >= rounds:
            return ScriptedModel.answer("all mailed")
        return ScriptedModel.call("send_mail", {"to": f"user{done}-{'x' * 1000}@example.com"},
                                  id=f"m{done}")

    store, effects = InMemoryCheckpointStore(), SideEffects()
    engine = build_engine(store=store, model=FunctionModel(mailer), tools=effects.tools(),
                          snapshot=make_snapshot(limits={"max_model_calls": 96}))
    run_id = await engine.start("mail everyone")
    assert (await drive(engine)).status == "completed"
    assert len(effects.calls) == rounds
    assert head_bytes(store, run_id) <= HEAD_LIMIT
