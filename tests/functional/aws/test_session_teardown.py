"""Deleting a session on AWS (moto EFS/ECS, the API function's app): its access points
(those its sandbox items name and an orphan tagged with it) are deleted, its
task-definition revision deregistered and deleted, its sandbox items removed; another
session's access points and revision and the shared skill access point stay; a failure
midway answers 503 teardown_incomplete and the retried delete finishes; another space's
user gets 404."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from functional.aws.harness import ALICE, Bench, efs, event

from agentloom.api.app import build_app
from agentloom.platform.identity import JwtClaims
from agentloom_runtime.workspace import CommandSpec


def _sandbox_of_a_session(bench: Bench, session_id: str) -> dict[str, Any]:
    """The session's sandbox made as its first command makes it, its run then cancelled
    (a session is deleted once no run holds it)."""
    run, _ = bench.api.sessions.ask(ALICE, session_id, "Copy the notes")
    snapshot = bench.service._snapshot(run)
    workspaces = efs(bench.service.host.ports.workspaces(snapshot, session_id))
    spec = CommandSpec(request_id=f"{run.run_id}.main.1", command="true")
    instance = workspaces.session_dir() / "main"
    instance.mkdir(parents=True, exist_ok=True)
    bench.service.sandbox.command(workspaces, spec, str(instance))
    bench.api.sessions.cancel(ALICE, session_id, run.run_id)
    record = bench.service.sandbox.record(workspaces)
    return {"revision": record.task_definition,
            "access_points": {record.workspace_access_point, record.results_access_point}}


def _access_points(bench: Bench) -> set[str]:
    fs = bench.resources.env["AGENTLOOM_EFS_FILE_SYSTEM_ID"]
    return {p["AccessPointId"] for p in
            bench.aws.efs.describe_access_points(FileSystemId=fs)["AccessPoints"]}


def _access_point(bench: Bench, tags: dict[str, str]) -> str:
    fs = bench.resources.env["AGENTLOOM_EFS_FILE_SYSTEM_ID"]
    return str(bench.aws.efs.create_access_point(
        ClientToken=json.dumps(tags, sort_keys=True)[:64], FileSystemId=fs,
        Tags=[{"Key": k, "Value": v} for k, v in tags.items()])["AccessPointId"])


def _status(bench: Bench, revision: str) -> str:
    """ACTIVE, INACTIVE, or gone (deleted: ECS no longer describes it)."""
    try:
        return str(bench.aws.ecs.describe_task_definition(taskDefinition=revision)
                   ["taskDefinition"]["status"])
    except bench.aws.ecs.exceptions.ClientException:
        return "gone"


def _delete(bench: Bench, session_id: str, user: str = "alice") -> dict[str, Any]:
    app = build_app(bench.api.admin, bench.api.sessions, JwtClaims())
    return app.resolve(event("DELETE", f"/api/v1/sessions/{session_id}", user=user), None)


def test_a_deleted_sessions_sandbox_resources_are_removed(bench: Bench) -> None:
    gone = _sandbox_of_a_session(bench, bench.session_id)
    other = bench.api.sessions.create_session(ALICE, bench.space_id, bench.agent_id)
    kept = _sandbox_of_a_session(bench, other.session_id)
    orphan = _access_point(bench, {"agentloom:session": bench.session_id,
                                   "agentloom:mount": "workspace"})
    skill = _access_point(bench, {"agentloom:session": bench.session_id,
                                  "agentloom:mount": "skill"})  # shared: never removed
    assert _status(bench, gone["revision"]) == "ACTIVE"

    assert _delete(bench, bench.session_id, user="eve")["statusCode"] == 404
    assert gone["access_points"] <= _access_points(bench)
    out = _delete(bench, bench.session_id)

    assert out["statusCode"] == 204, out
    left = _access_points(bench)
    assert not (gone["access_points"] | {orphan}) & left
    assert kept["access_points"] | {skill} <= left
    assert _status(bench, gone["revision"]) == "gone"  # deregistered, then deleted
    assert _status(bench, kept["revision"]) == "ACTIVE"
    assert bench.api.store.items.query_raw(f"sandbox#{bench.session_id}", "") == []
    assert bench.api.store.items.query_raw(f"sandbox#{other.session_id}", "")
    assert bench.api.store.sessions.get(bench.session_id) is None
    assert bench.api.store.teardown.pending() == []


def test_a_failure_midway_is_503_and_the_retry_finishes(
        bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = _sandbox_of_a_session(bench, bench.session_id)
    real = bench.aws.efs.delete_access_point
    calls = {"n": 0}

    def throttled_once(**kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:  # one access point deleted, the next one throttled
            raise ClientError({"Error": {"Code": "ThrottlingException",
                                         "Message": "slow down"}}, "DeleteAccessPoint")
        return real(**kwargs)

    monkeypatch.setattr(bench.aws.efs, "delete_access_point", throttled_once)
    out = _delete(bench, bench.session_id)
    assert out["statusCode"] == 503, out
    error = json.loads(out["body"])["error"]
    assert error["code"] == "teardown_incomplete"
    assert error["details"] == {"aws_error": "ThrottlingException"}
    assert bench.api.store.sessions.get(bench.session_id) is None  # gone already
    assert [s.session_id for s in bench.api.store.teardown.pending()] == [bench.session_id]
    assert bench.api.store.items.query_raw(f"sandbox#{bench.session_id}", "")

    assert _delete(bench, bench.session_id)["statusCode"] == 204  # the retry finishes
    assert not gone["access_points"] & _access_points(bench)
    assert _status(bench, gone["revision"]) == "gone"
    assert bench.api.store.teardown.pending() == []
    assert _delete(bench, bench.session_id)["statusCode"] == 404
