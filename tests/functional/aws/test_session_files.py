"""A deleted session's files on the volume (agentloom.aws.session_files): the step
handler's ``{"teardown_session": id}`` event removes exactly that session's workspace and
lock directories, only while its teardown marker exists, refuses a hostile id or a
linked parent, and is idempotent; the API's delete invokes the step through the Lambda
endpoint (moto elsewhere) and a failure there is 503 teardown_incomplete, finished by a
retry."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from functional.aws.harness import ALICE, Bench, event
from support.state_machine import LambdaEndpoint

from agentloom.api.app import build_app
from agentloom.aws.config import AwsConfig
from agentloom.aws.session_files import TeardownRefused, session_directories
from agentloom.aws.workspaces import ensure_volume_marker
from agentloom.handlers import step as step_handler
from agentloom.local.teardown import LocalSessionResources
from agentloom.platform.domain import Session
from agentloom.platform.identity import JwtClaims
from agentloom_runtime.workspace import WorkspaceError, WorkspaceProvider

STEP = "agentloom-test-step"


def _files(bench: Bench, session_id: str) -> list[Path]:
    """A workspace file and a command marker of the session, made by the runtime's
    provider as the step makes them; returns the session's two directories."""
    volume = bench.step_platform.config.volume_id
    ensure_volume_marker(str(bench.root), volume)
    provider = WorkspaceProvider(bench.root, mode="shared_posix", volume_id=volume)
    instance = provider.for_instance(bench.space_id, bench.agent_id, session_id,
                                     "run_1", "main")
    (instance.root / "notes.txt").write_text("hello\n")
    (instance.lock_dir / "marker.json").write_text("{}")
    return [instance.root.parent, instance.lock_dir]


def _session(bench: Bench, session_id: str) -> Session:
    found = bench.api.store.sessions.get(session_id)
    assert found is not None
    return found.value


def _close(bench: Bench, session_id: str) -> None:
    """Step 1 of a delete: the session gone, its teardown marker written."""
    found = bench.api.store.sessions.get(session_id)
    assert found is not None
    bench.api.store.teardown.close(found.value, found.version)


@pytest.fixture
def step(bench: Bench) -> Iterator[Any]:
    step_handler.configure(bench.service)
    try:
        yield lambda body: step_handler.handler(body, None)
    finally:
        step_handler.configure(None)


def test_the_layout_is_the_runtimes_and_the_embedded_teardowns(bench: Bench) -> None:
    made = _files(bench, bench.session_id)
    session = _session(bench, bench.session_id)
    assert session_directories(bench.root, session) == [made[0], made[1]]
    assert session_directories(bench.root, session) == \
        LocalSessionResources(bench.root).directories(session)


def test_the_step_removes_only_that_sessions_files_once_its_teardown_began(
        bench: Bench, step: Any) -> None:
    gone = _files(bench, bench.session_id)
    other = bench.api.sessions.create_session(ALICE, bench.space_id, bench.agent_id)
    kept = _files(bench, other.session_id)

    with pytest.raises(TeardownRefused) as refused:  # a live session: no marker
        step({"teardown_session": bench.session_id})
    assert "no teardown marker" in str(refused.value)
    assert all(d.is_dir() for d in gone)

    _close(bench, bench.session_id)
    reply = step({"teardown_session": bench.session_id})
    assert reply == {"teardown_session": bench.session_id, "removed": True}
    assert not any(d.exists() for d in gone)
    assert all(d.is_dir() for d in kept)
    assert (kept[0] / "main" / "notes.txt").read_text() == "hello\n"
    assert step({"teardown_session": bench.session_id}) == reply  # already gone: done
    with pytest.raises(TeardownRefused):  # the live one, still
        step({"teardown_session": other.session_id})


@pytest.mark.parametrize("body", [
    {"teardown_session": "../../spaces"}, {"teardown_session": "ses_../x"},
    {"teardown_session": "ses_a/b"}, {"teardown_session": ["ses_a"]},
    {"teardown_session": "spc_abc"}, {"teardown_session": ""},
    {"teardown_session": "SESSION", "run_id": "run_1"}])
def test_the_step_refuses_a_hostile_or_malformed_event(bench: Bench, step: Any,
                                                       body: dict[str, Any]) -> None:
    files = _files(bench, bench.session_id)
    _close(bench, bench.session_id)
    body = {k: (bench.session_id if v == "SESSION" else v) for k, v in body.items()}
    with pytest.raises(TeardownRefused):
        step(body)
    assert all(d.is_dir() for d in files)


def test_the_step_never_follows_a_linked_parent_out_of_the_layout(
        bench: Bench, step: Any, tmp_path: Path) -> None:
    files = _files(bench, bench.session_id)
    sessions = files[0].parent
    outside = tmp_path / "elsewhere"
    sessions.rename(outside)
    sessions.symlink_to(outside, target_is_directory=True)
    _close(bench, bench.session_id)
    with pytest.raises(TeardownRefused):
        step({"teardown_session": bench.session_id})
    assert (outside / bench.session_id / "main" / "notes.txt").is_file()


def test_the_step_without_its_volume_is_volume_unavailable(bench: Bench, step: Any) -> None:
    files = _files(bench, bench.session_id)
    _close(bench, bench.session_id)
    away = bench.root.with_name("unmounted")
    bench.root.rename(away)
    try:
        with pytest.raises(WorkspaceError) as err:
            step({"teardown_session": bench.session_id})
        assert err.value.code == "volume_unavailable"
    finally:
        away.rename(bench.root)
    assert all(d.is_dir() for d in files)


def test_directories_a_command_locked_are_made_removable_without_following_links(
        bench: Bench, step: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _files(bench, bench.session_id)
    main = files[0] / "main"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    (main / "build").mkdir()
    (main / "build" / "out.o").write_text("x")
    (main / "link").symlink_to(outside, target_is_directory=True)
    (main / "secret").mkdir()
    for locked, mode in ((main / "build", 0o500), (main / "secret", 0o000), (main, 0o500),
                         (outside, 0o500)):
        locked.chmod(mode)
    # the step runs as the files' owner, not root: the first removal is refused
    real = shutil.rmtree
    refused: list[Any] = []

    def as_owner(path: Any, *args: Any, **kwargs: Any) -> None:
        if not refused:
            refused.append(path)
            raise PermissionError(13, "Permission denied", str(path))
        if path == files[0]:  # its retry: given back to the owner first
            assert {(d.stat().st_mode & 0o777) for d in (main, main / "build",
                                                         main / "secret")} == {0o700}
        real(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", as_owner)
    _close(bench, bench.session_id)
    assert step({"teardown_session": bench.session_id})["removed"] is True
    assert refused == [files[0]] and not any(d.exists() for d in files)
    assert outside.stat().st_mode & 0o777 == 0o500  # the link was not followed
    assert (outside / "keep.txt").read_text() == "mine"


# -- the API's delete, invoking the step ----------------------------------------------------


@pytest.fixture
def api(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, LambdaEndpoint]]:
    """The API function of a stage whose environment names the step function, its
    Lambda client pointed at a local endpoint that runs the step handler in-process."""
    endpoint = LambdaEndpoint(lambda body: step_handler.handler(body, None))
    monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", endpoint.url)
    step_handler.configure(bench.service)
    config = dataclasses.replace(AwsConfig.from_environ(bench.resources.env),
                                 step_function=STEP)
    platform = bench.open_platform(config, bench.step_platform.host.ports.models)
    app = build_app(platform.admin, platform.sessions, JwtClaims())
    try:
        yield (lambda sid: app.resolve(event("DELETE", f"/api/v1/sessions/{sid}"), None),
               endpoint)
    finally:
        step_handler.configure(None)
        endpoint.close()


def test_deleting_a_session_removes_its_files_through_the_step(
        bench: Bench, api: tuple[Any, LambdaEndpoint]) -> None:
    delete, endpoint = api
    gone = _files(bench, bench.session_id)
    other = bench.api.sessions.create_session(ALICE, bench.space_id, bench.agent_id)
    kept = _files(bench, other.session_id)

    out = delete(bench.session_id)
    assert out["statusCode"] == 204, out
    assert endpoint.calls == [(STEP, {"teardown_session": bench.session_id})]
    assert not any(d.exists() for d in gone)
    assert all(d.is_dir() for d in kept)
    assert bench.api.store.teardown.pending() == []


def test_a_step_failure_is_503_and_the_retry_removes_the_files(
        bench: Bench, api: tuple[Any, LambdaEndpoint],
        monkeypatch: pytest.MonkeyPatch) -> None:
    delete, endpoint = api
    gone = _files(bench, bench.session_id)
    real = shutil.rmtree
    calls = {"n": 0}

    def denied_once(path: Any, *args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] <= 2:  # the first directory, before and after making it removable
            raise PermissionError(13, "Permission denied", str(path))
        real(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", denied_once)
    out = delete(bench.session_id)
    assert out["statusCode"] == 503, out
    error = json.loads(out["body"])["error"]
    assert error["code"] == "teardown_incomplete"
    assert error["details"] == {"step_error": "PermissionError"}
    assert [s.session_id for s in bench.api.store.teardown.pending()] == [bench.session_id]
    assert all(d.is_dir() for d in gone)

    assert delete(bench.session_id)["statusCode"] == 204  # the retry finishes
    assert not any(d.exists() for d in gone)
    assert len(endpoint.calls) == 2
    assert bench.api.store.teardown.pending() == []


def test_the_api_asks_the_step_only_when_its_environment_names_it(bench: Bench) -> None:
    from agentloom.aws.platform import sandbox_teardown
    from agentloom.aws.teardown import SandboxTeardown

    env = dict(bench.resources.env)
    without = sandbox_teardown(AwsConfig.from_environ(env), bench.aws, bench.api.store)
    assert isinstance(without, SandboxTeardown) and without.files is None  # files stay
    env["AGENTLOOM_STEP_FUNCTION_NAME"] = f" {STEP} "
    named = sandbox_teardown(AwsConfig.from_environ(env), bench.aws, bench.api.store)
    assert isinstance(named, SandboxTeardown) and named.files is not None
    assert named.files.function_name == STEP
