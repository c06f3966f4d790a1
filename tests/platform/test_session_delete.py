"""DELETE /api/v1/sessions/{session} over a real HTTP server (issue 19): the owner or a
space admin deletes a session and everything of it — records, runs, events, index
entries, its workspace and lock directories — and nothing of another session; a run
that holds it is 409 run_active; another space's user and a member who does not own it
get 404; a delete that crashed midway is finished by a retry (or a sweep)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agentloom.api.client import ApiError, Client
from agentloom.local.teardown import LocalSessionResources
from agentloom.platform.store import WriteConflict

from .conftest import Api, stopped_view

Wait = Callable[..., Any]


def _session_with_a_run(api: Api, client: Client, wait: Wait) -> tuple[str, str]:
    session = client.create_session(api.space_id, api.agent_id)
    asked = client.ask_full(session.session_id, "Q what is up?")
    stopped_view(client, session.session_id, asked.run.run_id, wait)
    return session.session_id, asked.run.run_id


def _workspace_files(api: Api, session_id: str) -> list[Any]:
    """Files in the session's workspace and lock directories (made here: the test
    agent has no workspace tool)."""
    session = api.platform.store.sessions.get(session_id)
    assert session is not None
    resources = api.platform.sessions.teardown.resources
    assert isinstance(resources, LocalSessionResources)
    made = []
    for directory in resources.directories(session.value):
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "notes.txt").write_text("x")
        made.append(directory)
    return made


def _records_of(api: Api, session_id: str, run_id: str) -> dict[str, int]:
    items = api.platform.store.items
    return {"session": len(items.query_raw(f"session#{session_id}", "")),
            "run": len(items.query_raw(f"run#{run_id}", "")),
            "index": len(items.query_raw(f"space#{api.space_id}", f"runs#completed#{run_id}")),
            "marker": len(items.query_raw("teardown", f"session#{session_id}"))}


def test_the_owner_deletes_a_session_and_everything_of_it(api: Api, wait: Wait) -> None:
    alice = api.client("alice")
    kept, kept_run = _session_with_a_run(api, alice, wait)
    gone, gone_run = _session_with_a_run(api, alice, wait)
    directories = _workspace_files(api, gone)
    kept_directories = _workspace_files(api, kept)
    assert _records_of(api, gone, gone_run)["run"] > 1  # the lookup and its events
    checkpoints = api.platform.sessions.checkpoints
    assert checkpoints.load_head(gone_run) is not None

    alice.delete_session(gone)

    assert _records_of(api, gone, gone_run) == {"session": 0, "run": 0, "index": 0,
                                                "marker": 0}
    assert checkpoints.load_head(gone_run) is None  # its checkpoint too
    assert checkpoints.read(gone_run, "src:main") == []
    assert checkpoints.load_head(kept_run) is not None
    assert not any(d.exists() for d in directories)
    with pytest.raises(ApiError) as err:
        alice.session(gone)
    assert (err.value.status, err.value.code) == (404, "session_not_found")
    with pytest.raises(ApiError) as err:
        alice.ask_full(gone, "Q again?")
    assert err.value.status == 404
    assert [s.session_id for s in alice.sessions(api.space_id)] == [kept]
    # the other session is untouched
    assert all((d / "notes.txt").exists() for d in kept_directories)
    assert alice.run(kept, kept_run).status == "completed"
    assert alice.messages(kept).items
    assert _records_of(api, kept, kept_run)["index"] == 1
    with pytest.raises(ApiError) as err:  # deleted and finished: 404 from now on
        alice.delete_session(gone)
    assert err.value.status == 404


def test_a_run_that_holds_the_session_is_409_run_active(api: Api, wait: Wait) -> None:
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    asked = alice.ask_full(session.session_id, "Q slow one")
    with pytest.raises(ApiError) as err:
        alice.delete_session(session.session_id)
    assert (err.value.status, err.value.code) == (409, "run_active")
    assert err.value.details == {"run_id": asked.run.run_id, "way_out": "cancel"}
    assert alice.session(session.session_id).session_id == session.session_id
    alice.cancel(session.session_id, asked.run.run_id)
    stopped_view(alice, session.session_id, asked.run.run_id, wait)
    alice.delete_session(session.session_id)
    assert api.platform.store.sessions.get(session.session_id) is None


def test_who_may_delete_a_session(api: Api, wait: Wait) -> None:
    alice = api.client("alice")
    session_id, _ = _session_with_a_run(api, alice, wait)
    for user in ("eve", "bob"):  # another space's user; a member who does not own it
        with pytest.raises(ApiError) as err:
            api.client(user).delete_session(session_id)
        assert (err.value.status, err.value.code) == (404, "session_not_found")
    assert alice.session(session_id).session_id == session_id
    api.client("carol").delete_session(session_id)  # an admin of the space may
    with pytest.raises(ApiError) as err:
        alice.session(session_id)
    assert err.value.status == 404


class Crash(OSError):
    pass


@pytest.mark.parametrize("crash_at", [1, 2, 3])
def test_a_delete_that_crashed_is_finished_by_a_retry(api: Api, wait: Wait,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      crash_at: int) -> None:
    """The crash comes at the n-th transaction of the delete (1: closing it, so nothing
    changed; later ones: midway through the purge, with the marker left)."""
    alice = api.client("alice")
    session_id, run_id = _session_with_a_run(api, alice, wait)
    directories = _workspace_files(api, session_id)
    items = api.platform.store.items
    real = items.transact
    calls = {"n": 0}

    def failing(writes: Any) -> None:
        calls["n"] += 1
        if calls["n"] == crash_at:
            raise Crash("the process died here")
        real(writes)

    monkeypatch.setattr(items, "transact", failing)
    with pytest.raises(ApiError) as err:
        alice.delete_session(session_id)
    assert err.value.status == 500
    monkeypatch.setattr(items, "transact", real)
    if crash_at == 1:
        assert alice.session(session_id).session_id == session_id
    else:
        with pytest.raises(ApiError):  # gone for every route already
            alice.session(session_id)
        assert _records_of(api, session_id, run_id)["marker"] == 1
        with pytest.raises(ApiError) as err:  # the marker is not anyone's to finish
            api.client("eve").delete_session(session_id)
        assert err.value.status == 404

    alice.delete_session(session_id)  # the retry finishes the job

    assert _records_of(api, session_id, run_id) == {"session": 0, "run": 0, "index": 0,
                                                    "marker": 0}
    assert not any(d.exists() for d in directories)


def test_a_sweep_finishes_deletes_that_crashed(api: Api, wait: Wait,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    alice = api.client("alice")
    session_id, run_id = _session_with_a_run(api, alice, wait)
    teardown = api.platform.sessions.teardown

    def crash(session: Any) -> None:
        raise WriteConflict("crash", index=0, pk="x", sk="y")

    monkeypatch.setattr(teardown.store.teardown, "purge", crash)
    with pytest.raises(ApiError):
        alice.delete_session(session_id)
    assert teardown.sweep() == 0  # still failing: left for the next sweep
    monkeypatch.undo()
    assert teardown.sweep() == 1
    assert _records_of(api, session_id, run_id) == {"session": 0, "run": 0, "index": 0,
                                                    "marker": 0}


def test_the_cli_deletes_a_session(api: Api, wait: Wait,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    from agentloom.cli import main

    session_id, _ = _session_with_a_run(api, api.client("alice"), wait)
    base = ["--api", api.url, "--token"]
    assert main([*base, api.tokens["eve"], "session", "delete", session_id]) == 2
    assert capsys.readouterr().err.startswith("error (session_not_found): ")
    assert main([*base, api.tokens["alice"], "session", "delete", session_id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"session_id": session_id, "deleted": True}
    assert api.platform.store.sessions.get(session_id) is None


def test_an_ask_racing_a_delete_either_wins_whole(api: Api, wait: Wait) -> None:
    """Ask and delete compare-and-set the same session item: either the run holds the
    session (the delete is 409 run_active), or the session is gone (the ask is 404, or
    the run had ended and been let go of) — never a run or its items in a deleted
    session."""
    import threading

    alice = api.client("alice")
    for _ in range(5):
        session_id = alice.create_session(api.space_id, api.agent_id).session_id
        outcomes: dict[str, Any] = {}
        barrier = threading.Barrier(2)

        def ask(sid: str = session_id, out: dict[str, Any] = outcomes,
                start: threading.Barrier = barrier) -> None:
            start.wait()
            try:
                out["ask"] = api.client("alice").ask_full(sid, "Q race").run.run_id
            except ApiError as err:
                out["ask"] = err.status

        def remove(sid: str = session_id, out: dict[str, Any] = outcomes,
                   start: threading.Barrier = barrier) -> None:
            start.wait()
            try:
                api.client("alice").delete_session(sid)
                out["delete"] = 204
            except ApiError as err:
                out["delete"] = (err.status, err.code)

        threads = [threading.Thread(target=ask), threading.Thread(target=remove)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if outcomes["delete"] == 204:  # first, or after the run ended and let go
            assert api.platform.store.sessions.get(session_id) is None
            assert api.platform.store.items.query_raw(f"session#{session_id}", "") == []
            if outcomes["ask"] != 404:
                assert api.platform.store.items.query_raw(f"run#{outcomes['ask']}", "") == []
        else:
            assert outcomes["delete"] == (409, "run_active"), outcomes
            run_id = outcomes["ask"]
            stopped_view(alice, session_id, run_id, wait)
            alice.delete_session(session_id)


def test_a_run_still_let_go_of_by_its_driver_is_409(api: Api, wait: Wait,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The run gave the session back, but its driver still writes its last status event:
    the delete waits for it (409 run_active, way_out wait) so nothing lands after it."""
    alice = api.client("alice")
    session_id, run_id = _session_with_a_run(api, alice, wait)
    teardown = api.platform.sessions.teardown
    monkeypatch.setattr(teardown, "driving", lambda rid: rid == run_id)
    with pytest.raises(ApiError) as err:
        alice.delete_session(session_id)
    assert (err.value.status, err.value.code) == (409, "run_active")
    assert err.value.details == {"run_id": run_id, "way_out": "wait"}
    assert alice.session(session_id).session_id == session_id
    monkeypatch.undo()
    alice.delete_session(session_id)
