"""AG-UI with the protocol's own client: ``@ag-ui/client``'s HttpAgent (Node, installed by
bin/test into tests/interop/node with ``npm ci``) against a live server over the
embedded platform with a scripted model — a run followed to completion across a stream
the server cuts mid-call (no event lost or repeated, the client's own verifier checking
every event), a stopped run surfaced as the protocol's interrupts and answered through
``resume`` (resume → blocked → a verdict → completed), and a cancel from a second client.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import Api, Model
from .test_api_agui import Wait, ask, post

NODE_DIR = Path(__file__).parents[1] / "interop" / "node"
SCRIPT = NODE_DIR / "agui_client.mjs"

if shutil.which("node") is None or not (NODE_DIR / "node_modules" / "@ag-ui").is_dir():
    pytest.skip("node or @ag-ui/client is missing (bin/test installs it: npm ci in "
                "tests/interop/node)", allow_module_level=True)


def client(api: Api, scenario: str, thread: str, question: str,
           between: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """The scenario's steps as the client printed them; ``between`` runs after the
    first step, before the test lets the client go on (a line on its stdin)."""
    url = f"{api.url}/api/v1/spaces/{api.space_id}/agents/{api.agent_id}/ag-ui"
    with subprocess.Popen(["node", str(SCRIPT), scenario, url, api.tokens["alice"], thread,
                           question], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as node:
        assert node.stdout is not None and node.stdin is not None
        try:
            steps = [json.loads(node.stdout.readline())]
            if between is not None:
                between()
            node.stdin.write("go\n")
            node.stdin.flush()
            out, err = node.communicate(timeout=60)
        finally:
            node.kill()
    assert node.returncode == 0, err
    return steps + [json.loads(line) for line in out.splitlines()]


def seqs(events: list[dict[str, Any]]) -> list[int]:
    return [e["rawEvent"]["agentloom_seq"] for e in events if e.get("rawEvent")]


def test_the_client_follows_a_run_across_a_cut_stream(api: Api, model: Model,
                                                      wait: Wait) -> None:
    api.server.stream_limit = 0.5  # the first stream is cut while the model waits
    post(api, ask("t-follow", "r-follow", "Q slow notes"))  # the run the client follows
    wait(lambda: "Q slow notes" in model.started, what="the model call")
    first, resumed = client(api, "follow", "t-follow", "Q slow notes", between=model.open)
    # the stream ended mid-call, before RUN_FINISHED (the client takes that quietly)
    assert [e["type"] for e in first["events"]][-1] == "STEP_STARTED", first
    assert resumed["error"] is None, resumed
    kinds = [e["type"] for e in resumed["events"]]
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    assert resumed["events"][-1]["outcome"] == {"type": "success"}
    assert seqs(resumed["events"])[0] == seqs(first["events"])[-1] + 1
    api.server.stream_limit = 30
    whole = client(api, "follow", "t-follow", "Q slow notes")[0]["events"]  # the same run
    cut = [e for e in first["events"] + resumed["events"] if e.get("rawEvent")]
    assert cut == [e for e in whole if e.get("rawEvent")]  # none lost, none repeated
    answers = [m for m in resumed["messages"] if m["role"] == "assistant"]
    assert answers[-1]["content"] == "Answer to: Q slow notes"


def test_a_stopped_run_is_answered_through_the_clients_interrupts(
        api: Api, model: Model, wait: Wait) -> None:
    alice = api.client("alice")
    api.server.stream_limit = 0.3
    post(api, ask("t-stop", "r-stop", "Q hang please"))
    [session] = alice.sessions(api.space_id)
    [run] = alice.runs(session.session_id)
    wait(lambda: "Q hang please" in model.started, what="the model call")
    api.platform.launcher.stop(run.run_id)  # the worker dies mid-call
    wait(lambda: alice.run(session.session_id, run.run_id).status == "interrupted",
         what="interrupted")
    model.open()
    api.server.stream_limit = 30
    interrupted, blocked, resolved = client(api, "interrupts", "t-stop", "Q hang please")
    [stop] = interrupted["pending"]
    assert (stop["id"], stop["reason"]) == (run.run_id, "interrupted"), stop
    [unknown] = blocked["pending"]
    assert unknown["reason"] == "model_outcome_unknown"
    assert unknown["responseSchema"]["properties"]["verdict"]["enum"] == [
        "send_again", "treat_as_failed"]
    assert resolved["error"] is None and not resolved["pending"], resolved
    assert resolved["events"][-1]["result"] == "Answer to: Q hang please"
    assert alice.run(session.session_id, run.run_id).status == "completed"


def test_a_second_client_cancels_the_running_run(api: Api, model: Model, wait: Wait) -> None:
    [cancelled] = client(api, "cancel", "t-cancel", "Q slow cancel me")
    assert cancelled["error"] is None, cancelled
    assert cancelled["events"][-1]["outcome"] == {"type": "cancelled"}
    assert cancelled["other"]["events"][-1]["outcome"] == {"type": "cancelled"}
    alice = api.client("alice")
    [session] = alice.sessions(api.space_id)
    assert alice.runs(session.session_id)[0].status == "cancelled"
