"""A supplement posted while the run is finishing is delivered (the task goes back to
the model) or refused with a clear error — never accepted and lost (issue 9)."""

from __future__ import annotations

from typing import Any

import pytest
from support.engine import SideEffects, build_engine, drive, make_snapshot

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.engine import Engine
from agentloom_runtime.engine._inbox import post_input
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.hooks import Continue, HookDefinition, HookRegistry
from agentloom_runtime.testing import FunctionModel, ScriptedModel

EXTRA = "also mention the weather"


class User:
    """Posts the supplement to ``engine`` (``post``); what each post returned is kept in
    ``posts``."""

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.posts: list[int | ConfigError] = []

    def post(self) -> None:
        assert self.engine is not None
        try:
            self.posts.append(self.engine.queue_input(EXTRA))
        except ConfigError as err:
            self.posts.append(err)


def answerer(user: User | None = None) -> FunctionModel:
    """Answers (with the weather once the supplement is in view); ``user`` posts the
    supplement during the first completion review."""
    def reply(request: ModelRequest) -> ModelResponse:
        if request.purpose == "verification":
            if user is not None and not user.posts:
                user.post()
            return ScriptedModel.verdict("complete")
        asked = any(m.get("content") == EXTRA for m in request.messages)
        return ScriptedModel.answer("sunny, and the answer" if asked else "the answer")

    return FunctionModel(reply)


def delivered(model: FunctionModel) -> bool:
    return any(m.get("content") == EXTRA for r in model.requests if r.purpose == "action"
               for m in r.messages)


async def test_a_supplement_posted_during_the_final_review_is_delivered() -> None:
    user = User()
    model = answerer(user)
    engine = build_engine(model=model, tools=SideEffects().tools())
    user.engine = engine
    await engine.start("what is the answer?")
    assert (await drive(engine)).status == "completed"
    assert user.posts == [1], "the post was accepted"
    assert delivered(model), "the task went back to the model with the supplement"
    outcome = engine.outcome()
    assert outcome is not None and outcome.answer == "sunny, and the answer"
    assert [r.purpose for r in model.requests] == ["action", "verification", "action",
                                                   "verification"]


async def test_a_supplement_posted_during_the_closing_stage_is_delivered_or_refused() -> None:
    """With a run.after hook the run closes one step after the review; a supplement that
    arrives in between (here: posted from the hook) must not be accepted and dropped."""
    user, model = User(), answerer()  # the model does not post; the hook does

    async def after(ctx: Any, payload: dict[str, Any]) -> Any:
        if not user.posts:
            user.post()
        return Continue()

    registry = HookRegistry([HookDefinition("after", "1", after, replay_safe=True)])
    snapshot = make_snapshot(hooks=[{"hook_id": "after", "version": "1", "point": "run.after"}])
    engine = build_engine(snapshot=snapshot, model=model, tools=SideEffects().tools(),
                          hook_registry=registry)
    user.engine = engine
    await engine.start("what is the answer?")
    assert (await drive(engine)).status == "completed"
    [post] = user.posts
    if isinstance(post, ConfigError):
        assert "new question" in post.message
    else:
        assert delivered(model), "accepted, so it must reach the model"
        outcome = engine.outcome()
        assert outcome is not None and outcome.answer == "sunny, and the answer"


async def test_a_supplement_to_a_finished_run_is_refused() -> None:
    engine = build_engine(model=answerer(), tools=SideEffects().tools())
    await engine.start("what is the answer?")
    assert (await drive(engine)).status == "completed"
    with pytest.raises(ConfigError, match="completed; ask a new question"):
        engine.queue_input(EXTRA)


class PostingStore:
    """Another process posts a supplement at the worst moment: after the engine's last
    look at the inbox, just before its final commit lands."""

    def __init__(self, inner: InMemoryCheckpointStore) -> None:
        self.inner = inner
        self.posts: list[int | ConfigError] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def commit(self, commit: Any) -> int:
        if commit.head.get("status") == "completed" and not self.posts \
                and not commit.run_id.endswith("/inbox"):
            try:
                self.posts.append(post_input(self.inner, commit.run_id, EXTRA))
            except ConfigError as err:
                self.posts.append(err)
        return int(self.inner.commit(commit))


async def test_a_supplement_racing_the_final_commit_is_delivered_or_refused() -> None:
    inner = InMemoryCheckpointStore()
    store: Any = PostingStore(inner)  # the model does not post; the other process does
    engine = build_engine(store=store, model=answerer(), tools=SideEffects().tools())
    run_id = await engine.start("what is the answer?")
    await drive(engine)
    [post] = store.posts
    if isinstance(post, ConfigError):
        return  # refused: the user knows to ask again
    loaded = inner.load_head(run_id)
    assert loaded is not None
    assert engine.status != "completed" or loaded.body["inbox_seen"] >= post, \
        "accepted, so it must be read before the run ends"
