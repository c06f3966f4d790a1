"""Replay on the AWS deployment (moto): a run with a plan, file tools and a command on
the Fargate path, stored in DynamoDB under KMS, replays through the API function to the
same records without a model request, a Fargate task or a file written; another
version's prompt diverges at step 1."""

from __future__ import annotations

import json

from functional.aws.conftest import AGENT
from functional.aws.harness import ALICE, Bench, drive, event

from agentloom.api.app import build_app
from agentloom.platform.identity import JwtClaims
from agentloom_runtime.replay import Recording
from agentloom_runtime.testing.openai_server import OpenAICompatibleServer


def test_a_run_with_a_command_replays_to_the_same_records(
        bench: Bench, model_server: OpenAICompatibleServer) -> None:
    run, _ = bench.api.sessions.ask(ALICE, bench.session_id, "Copy the notes")
    replies = drive(bench, run.run_id)
    assert replies[-1]["status"] == "completed" and len(bench.ran) == 1
    notes = bench.root / "spaces" / bench.space_id / "agents" / bench.agent_id / \
        "sessions" / bench.session_id / "main"
    for name in ("notes.txt", "copy.txt"):
        (notes / name).unlink()
    app = build_app(bench.api.admin, bench.api.sessions, JwtClaims())
    path = f"/api/v1/sessions/{bench.session_id}/runs/{run.run_id}/replay"

    out = app.resolve(event("POST", path, {}), None)

    assert out["statusCode"] == 200, out
    report = json.loads(out["body"])
    assert report["identical"] is True and report["records"]["equal"] is True, report
    assert report["ended"] == "stopped" and report["status"] == "completed"
    recording = Recording.read(bench.api.checkpoints, run.run_id)  # read from DynamoDB
    assert recording.by_request(next(r["command"]["request_id"] for r in replies
                                     if r["command"])) is not None
    assert report["records"]["recorded"] == sum(len(v) for v in recording.records.values())
    assert len(bench.ran) == 1  # no Fargate task again
    assert not (notes / "notes.txt").exists() and not (notes / "copy.txt").exists()
    model_server.assert_consumed()  # and no model request beyond the script

    bench.api.admin.save_draft(ALICE, bench.space_id, bench.agent_id,
                               {**AGENT, "prompt": "You work elsewhere."})
    other = json.loads(app.resolve(event("POST", path, {"draft": True}), None)["body"])
    assert other["diverged_at"]["step"] == 1 and "system" in other["diverged_at"]["diff"]
    assert other["baseline"]["identical"] is True
    denied = app.resolve(event("POST", path, {}, user="mallory"), None)
    assert denied["statusCode"] == 404
    model_server.assert_consumed()
