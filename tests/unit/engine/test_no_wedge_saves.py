"""A failed save never leaves a run ``running`` forever (issue 9): whichever commit fails
(disk full, database locked), the stored run is truthful — blocked with
``persistence_error`` and the way out ``resume`` — and resuming completes it, with no
side effect run twice on its own."""

from __future__ import annotations

import asyncio
import re
from typing import Any, get_args

import pytest
from support.engine import (
    CrashingStore,
    SideEffects,
    build_engine,
    drive,
    representative_engine,
)
from unit.engine.test_way_out_tools import RUN as MAIL_RUN
from unit.engine.test_way_out_tools import blocked_on_mail, mailer

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import Verdict
from agentloom_runtime.engine import read_run
from agentloom_runtime.engine._state import CommitPoint
from agentloom_runtime.errors import PersistenceError
from agentloom_runtime.testing import FunctionModel

RUN = "r"


class FailOnce:
    """The ``fail_at``-th commit raises (the store is briefly full); later ones work."""

    def __init__(self, inner: InMemoryCheckpointStore, fail_at: int) -> None:
        self.inner = inner
        self.fail_at = fail_at
        self.commits = 0
        self.failed: str | None = None  # the document whose commit failed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def commit(self, commit: Any) -> int:
        self.commits += 1
        if self.commits == self.fail_at:
            self.failed = commit.run_id
            raise OSError(28, "No space left on device")
        return int(self.inner.commit(commit))


async def reference_commits() -> int:
    store, effects = CrashingStore(InMemoryCheckpointStore()), SideEffects()
    engine = representative_engine(store, effects)
    await engine.start("count the words and mail ops")
    assert (await drive(engine)).status == "completed"
    return store.commits


COMMITS = asyncio.run(reference_commits())


def test_the_sweep_covers_every_commit_of_the_reference_run() -> None:
    assert COMMITS > 10


async def test_a_failed_first_save_creates_no_run() -> None:
    inner, effects = InMemoryCheckpointStore(), SideEffects()
    engine = representative_engine(FailOnce(inner, 1), effects)
    with pytest.raises(PersistenceError):
        await engine.start("count the words and mail ops", run_id=RUN)
    assert read_run(inner, RUN) is None, "nothing half-made is left behind"


@pytest.mark.parametrize("fail_at", range(2, COMMITS + 1))
async def test_a_failed_save_leaves_a_truthful_resumable_status(fail_at: int) -> None:
    inner, effects = InMemoryCheckpointStore(), SideEffects()
    store = FailOnce(inner, fail_at)
    engine = representative_engine(store, effects)
    await engine.start("count the words and mail ops", run_id=RUN)
    result = await drive(engine)
    if store.failed == f"{RUN}/inbox":  # sealing the inbox narrows a race, nothing more:
        assert result.status == "completed"  # a store failing there never stops the run
        return
    assert (result.status, result.error_code) == ("blocked", "persistence_error")
    summary = read_run(inner, RUN)
    assert summary is not None
    assert (summary.status, summary.way_out) == ("blocked", "resume"), summary
    assert summary.error is not None and summary.error["code"] == "persistence_error"
    assert "Resume" in summary.error["message"]
    named = re.search(r"at commit point ([a-z_.]+) failed", summary.error["message"])
    assert named is not None and named[1] in get_args(CommitPoint), \
        "the stored error says which commit failed"
    assert engine.status == "blocked" and engine.way_out() == "resume"

    resumed = representative_engine(inner, effects, RUN)
    await resumed.begin_execution()
    result = await drive(resumed)
    # the step whose save failed may have been a side effect or a sent request: the run
    # then asks for a verdict instead of guessing (the mail was sent: the operator says so)
    if result.error_code == "tool_outcome_unknown":
        await resumed.resolve(Verdict("ran" if effects.calls else "did_not_run", by="ops"))
        result = await drive(resumed)
    elif result.error_code == "model_outcome_unknown":
        await resumed.resolve(Verdict("send_again", by="ops"))
        result = await drive(resumed)
    assert result.status == "completed", resumed.error
    assert effects.calls == ["ops@example.com"], "the side effect ran exactly once"


async def test_a_failed_verdict_save_keeps_the_run_resolvable() -> None:
    inner, effects = InMemoryCheckpointStore(), SideEffects()
    await blocked_on_mail(inner, effects)
    failing = FailOnce(inner, 1)
    engine = build_engine(store=failing, model=FunctionModel(mailer), tools=effects.tools(),
                          run_id=MAIL_RUN)
    with pytest.raises(PersistenceError):
        await engine.resolve(Verdict("did_not_run", by="ops"))
    summary = read_run(inner, MAIL_RUN)
    assert summary is not None and (summary.status, summary.way_out) == ("blocked", "resolve")
    assert inner.read(MAIL_RUN, "verdicts") == [], "no half-recorded verdict"
    again = build_engine(store=inner, model=FunctionModel(mailer), tools=effects.tools(),
                         run_id=MAIL_RUN)
    await again.resolve(Verdict("did_not_run", by="ops"))
    assert (await drive(again)).status == "completed"
    assert effects.calls == []
