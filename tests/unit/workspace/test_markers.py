"""``MarkerStore``: describe(), release(), and which markers block the session's other
work — with a scripted liveness, and with the runner's real ``/proc`` liveness on
markers naming this very process (alive) or a finished one (dead)."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from agentloom.sandbox import BubblewrapRunner
from agentloom.sandbox._liveness import TAG, host_identity, proc_start
from agentloom_runtime.workspace import (
    CommandResult,
    MarkerStore,
    PosixWorkspaceStore,
    WorkspaceError,
)
from agentloom_runtime.workspace.commands import MarkerLiveness


class Scripted:
    """A ``MarkerLiveness`` answering from the marker's own ``_facts`` field."""

    def host_matches(self, marker: Mapping[str, Any]) -> bool:
        return bool(marker.get("_facts", {}).get("host", False))

    def owner_alive(self, marker: Mapping[str, Any]) -> bool | None:
        return marker.get("_facts", {}).get("owner")

    def sandbox_alive(self, marker: Mapping[str, Any]) -> bool | None:
        return marker.get("_facts", {}).get("sandbox")


def _marker(store: MarkerStore, request_id: str, *, state: str = "started",
            **facts: bool | None) -> None:
    store.write(request_id, {"runner": "test", "state": state, "started_at": 12.5,
                             "_facts": facts})


@pytest.fixture
def markers(tmp_path: Path) -> MarkerStore:
    return MarkerStore(tmp_path / "locks", liveness=Scripted())


def test_scripted_liveness_is_a_marker_liveness() -> None:
    liveness: MarkerLiveness = Scripted()
    assert liveness.host_matches({}) is False


def test_describe_absent(markers: MarkerStore) -> None:
    assert markers.describe("r-none") == {
        "request_id": "r-none", "marker": "absent", "state": None, "started_at": None,
        "host_matches": False, "owner_alive": None, "sandbox_alive": None,
        "blocking": False, "exit_seen": False, "result": None}


def test_describe_present_started(markers: MarkerStore) -> None:
    _marker(markers, "r-live", host=True, owner=True, sandbox=True)
    facts = markers.describe("r-live")
    assert (facts["marker"], facts["state"], facts["started_at"]) == ("present", "started",
                                                                      12.5)
    assert facts["host_matches"] and facts["owner_alive"] and facts["sandbox_alive"]
    assert facts["blocking"] and not facts["exit_seen"] and facts["result"] is None


def test_describe_exited_with_result(markers: MarkerStore) -> None:
    _marker(markers, "r-exit", state="exited", host=True, owner=True, sandbox=True)
    markers.write_result(CommandResult(request_id="r-exit", exit_code=0, stdout_head="ok"))
    facts = markers.describe("r-exit")
    assert facts["state"] == "exited" and facts["exit_seen"]
    assert facts["result"]["stdout_head"] == "ok" and facts["blocking"]  # still running
    assert markers.lookup("r-exit")[0] == "done"


def test_describe_corrupt_marker_and_result(markers: MarkerStore) -> None:
    markers.markers.mkdir(parents=True, exist_ok=True)
    (markers.markers / "r-bad.json").write_text("{oops")
    markers.results.mkdir(parents=True, exist_ok=True)
    (markers.results / "r-bad.json").write_text("[1]")
    facts = markers.describe("r-bad")
    assert facts["marker"] == "corrupt" and facts["state"] is None and facts["blocking"]
    assert facts["exit_seen"] and facts["result"] is None
    assert facts["owner_alive"] is None and facts["sandbox_alive"] is None


@pytest.mark.parametrize(("state", "facts", "blocks"), [
    ("started", {"host": True, "owner": False, "sandbox": False}, False),  # owner gone
    ("exited", {"host": True, "owner": True, "sandbox": False}, False),  # owner done
    ("started", {"host": True, "owner": True, "sandbox": False}, True),  # may still spawn
    ("started", {"host": True, "owner": False, "sandbox": True}, True),  # still running
    ("started", {"host": True, "owner": False, "sandbox": None}, True),  # cannot tell
    ("started", {"host": True, "owner": None, "sandbox": False}, True),
    ("started", {"host": False, "owner": False, "sandbox": False}, True),  # another host
])
def test_only_provably_harmless_markers_stop_blocking(markers: MarkerStore, state: str,
                                                      facts: dict[str, Any],
                                                      blocks: bool) -> None:
    _marker(markers, "r-1", state=state, **facts)
    assert markers.describe("r-1")["blocking"] is blocks
    assert [m["request_id"] for m in markers.blocking()] == (["r-1"] if blocks else [])
    if blocks:
        with pytest.raises(WorkspaceError) as refused:
            markers.claim("r-2", {"runner": "test"})
        assert refused.value.code == "sandbox_marker_present"
    else:
        markers.claim("r-2", {"runner": "test"})  # a new command may start
    assert markers.lookup("r-1") == ("started", None)  # the fate stays unknown


def test_a_request_with_a_marker_is_never_claimed_again(markers: MarkerStore) -> None:
    _marker(markers, "r-1", host=True, owner=False, sandbox=False)  # harmless ...
    with pytest.raises(WorkspaceError) as again:
        markers.claim("r-1", {"runner": "test"})  # ... but never re-run blindly
    assert again.value.code == "sandbox_marker_present"


def test_without_liveness_every_marker_blocks(tmp_path: Path) -> None:
    blind = MarkerStore(tmp_path / "locks")
    _marker(blind, "r-1", host=True, owner=False, sandbox=False)
    facts = blind.describe("r-1")
    assert facts["blocking"] and facts["host_matches"] is False
    assert facts["owner_alive"] is None and facts["sandbox_alive"] is None
    with pytest.raises(WorkspaceError):
        blind.refuse_if_pending()


def test_release_removes_the_marker_and_keeps_the_result(markers: MarkerStore) -> None:
    _marker(markers, "r-1", host=True, owner=True, sandbox=True)
    markers.write_result(CommandResult(request_id="r-1", exit_code=3))
    markers.release("r-1")
    markers.release("r-1")  # idempotent
    markers.release("never-there")
    assert markers.pending() == [] and markers.describe("r-1")["marker"] == "absent"
    assert markers.lookup("r-1")[0] == "done" and markers.describe("r-1")["exit_seen"]


def test_a_dead_owners_marker_does_not_block_writes(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    store = PosixWorkspaceStore(root, tmp_path / "locks", liveness=Scripted())
    _marker(store.markers, "r-dead", host=True, owner=False, sandbox=False)
    asyncio.run(store.write("a.txt", "fine"))
    _marker(store.markers, "r-live", host=True, owner=True, sandbox=True)

    async def refused() -> None:
        with pytest.raises(WorkspaceError) as info:
            await store.write("b.txt", "no")
        assert info.value.code == "sandbox_marker_present"
        assert info.value.details["request_ids"] == ["r-live"]
        assert (await store.read("a.txt"))["content"] == "fine"  # reads still work

    asyncio.run(refused())


# -- the runner's /proc liveness -------------------------------------------------------


def _real_marker(store: MarkerStore, request_id: str, pid: int, start: str | None,
                 nonce: str) -> None:
    store.write(request_id, {"runner": BubblewrapRunner.module_id, "nonce": nonce,
                             "host": host_identity(), "owner_pid": pid,
                             "owner_start": start, "state": "started",
                             "started_at": 1.0})


def test_process_liveness_marker_of_this_live_process_blocks(tmp_path: Path) -> None:
    runner = BubblewrapRunner()
    store = MarkerStore(tmp_path / "locks", liveness=runner.liveness)
    me = __import__("os").getpid()
    _real_marker(store, "r-me", me, proc_start(me), secrets.token_hex(12))
    facts = store.describe("r-me")
    assert facts["host_matches"] and facts["owner_alive"] is True
    assert facts["sandbox_alive"] is False and facts["blocking"]  # it could still spawn


def test_process_liveness_dead_owner_no_sandbox_does_not_block(tmp_path: Path) -> None:
    runner = BubblewrapRunner()
    store = MarkerStore(tmp_path / "locks", liveness=runner.liveness)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = proc_start(child.pid)
    child.wait()
    _real_marker(store, "r-dead", child.pid, start, secrets.token_hex(12))
    facts = store.describe("r-dead")
    assert facts["host_matches"] and facts["owner_alive"] is False
    assert facts["sandbox_alive"] is False and not facts["blocking"]
    store.refuse_if_pending()  # does not raise


def test_process_liveness_a_process_carrying_the_nonce_blocks(tmp_path: Path) -> None:
    runner = BubblewrapRunner()
    store = MarkerStore(tmp_path / "locks", liveness=runner.liveness)
    nonce = secrets.token_hex(12)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                               TAG + nonce])  # the tag stays on its command line
    try:
        _real_marker(store, "r-orphan", 2**22 + 1, "0", nonce)  # no such owner
        facts = store.describe("r-orphan")
        assert facts["owner_alive"] is False and facts["sandbox_alive"] is True
        assert facts["blocking"]
    finally:
        holder.kill()
        holder.wait()
    assert not store.describe("r-orphan")["blocking"]


def test_process_liveness_cannot_tell_for_another_runner(tmp_path: Path) -> None:
    store = MarkerStore(tmp_path / "locks", liveness=BubblewrapRunner().liveness)
    store.write("r-x", {"runner": "fargate/v1", "host": host_identity(), "owner_pid": 1,
                        "nonce": "abc", "state": "started"})
    facts = store.describe("r-x")
    assert facts["host_matches"] is False and facts["owner_alive"] is None
    assert facts["sandbox_alive"] is None and facts["blocking"]
