"""The default per-run token cap in the agent version (issue 17): a draft gets it written
out and a published version records it; a version stored before the default (its
``max_tokens`` null) still loads and its runs get the default, which an operator raises
like any cap."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentloom.local.embedded import EmbeddedPlatform
from agentloom.platform.agents import freeze, snapshot_of
from agentloom.platform.budgets import budget_raise
from agentloom.platform.domain import AgentVersion, now
from agentloom.platform.errors import Invalid
from agentloom_runtime.snapshot import DEFAULT_RUN_TOKENS

from .conftest import AGENT_CONFIG, ALICE, Setup

Wait = Callable[..., Any]


def test_a_published_version_records_the_default_token_cap(platform: EmbeddedPlatform,
                                                            setup: Setup) -> None:
    draft = platform.admin.draft(ALICE, setup.space_id, setup.agent_id)
    assert draft.config["limits"]["max_tokens"] == DEFAULT_RUN_TOKENS
    version = platform.admin.version(ALICE, setup.space_id, setup.agent_id, 1)
    assert version.snapshot["limits"]["max_tokens"] == DEFAULT_RUN_TOKENS
    # an explicit null (as stored drafts said before) is the default, not "no cap"
    saved = platform.admin.save_draft(ALICE, setup.space_id, setup.agent_id, {
        **AGENT_CONFIG, "limits": {"max_tokens": None}})
    assert saved.config["limits"]["max_tokens"] == DEFAULT_RUN_TOKENS


def test_a_version_stored_before_the_default_cap_runs_under_it(
        platform: EmbeddedPlatform, setup: Setup, wait: Wait) -> None:
    agent, _ = platform.admin.create_agent(ALICE, setup.space_id, "Old", AGENT_CONFIG)
    snapshot, digest = freeze(AGENT_CONFIG, space_id=setup.space_id,
                              agent_id=agent.agent_id, version=1)
    snapshot["limits"]["max_tokens"] = None  # as versions were published before
    store = platform.admin.store
    found = store.agents.get(setup.space_id, agent.agent_id)
    assert found is not None
    store.agents.publish(found, AgentVersion(
        space_id=setup.space_id, agent_id=agent.agent_id, version=1, content_hash=digest,
        snapshot=snapshot, published_by="alice", published_at=now()))

    session = platform.sessions.create_session(ALICE, setup.space_id, agent.agent_id)
    run, _ = platform.sessions.ask(ALICE, session.session_id, "Q still there?")

    def stopped() -> Any:
        view = platform.sessions.run(ALICE, session.session_id, run.run_id)
        return view if view.status not in ("queued", "running") else None

    assert wait(stopped, what="the run").status == "completed"
    stored = platform.sessions.store.runs.get(session.session_id, run.run_id)
    assert stored is not None
    version = store.agents.version(agent.agent_id, 1)
    assert version is not None and version.snapshot["limits"]["max_tokens"] is None
    loaded = snapshot_of(version.snapshot)  # how the platform loads a version
    assert loaded.limits.max_tokens == DEFAULT_RUN_TOKENS
    with pytest.raises(Invalid, match=r"must exceed the current budget \(2,000,000\)"):
        budget_raise(store, platform.checkpoints, ALICE, stored.value, loaded,
                     max_tokens=1_000, max_cost=None)
    raised = budget_raise(store, platform.checkpoints, ALICE, stored.value, loaded,
                          max_tokens=DEFAULT_RUN_TOKENS * 2, max_cost=None)
    assert raised is not None and raised.max_tokens == DEFAULT_RUN_TOKENS * 2
