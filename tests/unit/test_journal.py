"""Journal.commit: an error raised by a commit names its commit point, so a conflict or a
failed save says which commit it was (the store's error type and details kept)."""

from __future__ import annotations

from typing import Any

import pytest

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.checkpoint.journal import Journal
from agentloom_runtime.checkpoint.store import Commit
from agentloom_runtime.errors import CheckpointConflict, PersistenceError

RUN = "run-1"


class BrokenDisk(InMemoryCheckpointStore):
    """Every commit fails below the store's own rules (the disk is full)."""

    def commit(self, commit: Commit) -> int:
        raise OSError(28, "No space left on device")


def journal_at(store: InMemoryCheckpointStore, version: int = 0) -> Journal:
    loaded = store.load_head(RUN)
    head: dict[str, Any] = dict(loaded.body) if loaded is not None else {"status": "running"}
    return Journal(store, RUN, version, head)


def test_a_conflicting_commit_names_its_point_and_keeps_the_stores_details() -> None:
    store = InMemoryCheckpointStore()
    journal_at(store).commit("run.start")
    first, second = journal_at(store, 1), journal_at(store, 1)  # two steps of one version
    first.append("src:main", {"kind": "user"})
    assert first.commit("tool.done") == 2
    second.append("src:main", {"kind": "assistant"})
    with pytest.raises(CheckpointConflict) as conflict:
        second.commit("review.done")
    err = conflict.value
    assert err.details["commit_point"] == "review.done"
    assert "commit point review.done" in str(err) and "commit point review.done" in err.message
    assert (err.details["run_id"], err.details["expected"], err.details["actual"]) == \
        (RUN, 1, 2), "what the store said stays"
    assert err.to_dict()["details"]["commit_point"] == "review.done"  # crosses boundaries
    assert second.stale and store.load_head(RUN).version == 2  # type: ignore[union-attr]


def test_a_stale_journal_names_the_commit_it_refuses() -> None:
    store = InMemoryCheckpointStore()
    journal = journal_at(store)
    journal.commit("run.start")
    other = journal_at(store, 1)
    other.commit("inputs.injected")
    with pytest.raises(CheckpointConflict):
        journal.commit("action.done")
    with pytest.raises(CheckpointConflict) as stale:
        journal.commit("run.stop")
    assert stale.value.details == {"run_id": RUN, "commit_point": "run.stop"}
    assert "stale" in stale.value.message and "run.stop" in stale.value.message


def test_a_failed_write_names_the_commit_point_and_keeps_its_cause() -> None:
    journal = journal_at(BrokenDisk())
    journal.append("ops", {"raw_output": "x"})
    with pytest.raises(PersistenceError) as failed:
        journal.commit("model.raw_saved")
    err = failed.value
    assert type(err) is PersistenceError
    assert err.details == {"run_id": RUN, "commit_point": "model.raw_saved"}
    assert err.message == f"saving run {RUN} at commit point model.raw_saved failed: OSError"
    assert isinstance(err.__cause__, OSError)


def test_a_refused_value_names_the_commit_point() -> None:
    """The store refuses text that is not valid Unicode (ConfigError) before writing."""
    journal = journal_at(InMemoryCheckpointStore())
    journal.append("src:main", {"message": "\ud800"})
    with pytest.raises(PersistenceError) as refused:
        journal.commit("tool.raw_saved")
    assert refused.value.details["commit_point"] == "tool.raw_saved"
    assert "at commit point tool.raw_saved failed" in refused.value.message
    assert journal.store.load_head(RUN) is None, "nothing was written"
