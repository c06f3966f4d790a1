"""The embedded worker (``agentloom serve``'s LocalRunLauncher) observes its runs: a
whole run's log output carries the run's ids on every observer line and none of its
texts, nor a provider key that reached the run."""

from __future__ import annotations

import logging
import time

from agentloom.local.embedded import EmbeddedPlatform
from agentloom.platform.identity import Principal
from agentloom_runtime.contracts import ModelResponse
from agentloom_runtime.testing import FunctionModel

from .conftest import PROVIDER_KEY

ALICE = Principal("alice", "token")
QUESTION = f"Q what does the Zanzibar memo say? (my key is {PROVIDER_KEY})"
ANSWER = "The Zanzibar memo says to ship on Friday."


def test_a_whole_worker_run_logs_ids_and_no_content(tmp_path, caplog) -> None:
    def reply(request):
        if request.purpose == "verification":
            return ModelResponse(content='{"decision": "complete", "reason": "ok"}',
                                 usage={"prompt_tokens": 3, "completion_tokens": 1})
        return ModelResponse(content=ANSWER, usage={"prompt_tokens": 11,
                                                    "completion_tokens": 7})

    platform = EmbeddedPlatform.open(tmp_path / "home",
                                     model_factory=lambda snapshot: FunctionModel(reply))
    try:
        with caplog.at_level(logging.DEBUG):
            space = platform.admin.create_space(ALICE, "Team")
            agent, _ = platform.admin.create_agent(ALICE, space.space_id, "Helper", {
                "prompt": "You answer.", "model": {"model": "test-model"}})
            platform.admin.publish(ALICE, space.space_id, agent.agent_id)
            session = platform.sessions.create_session(ALICE, space.space_id,
                                                       agent.agent_id)
            run, _ = platform.sessions.ask(ALICE, session.session_id, QUESTION)
            deadline = time.monotonic() + 20
            while platform.sessions.run(ALICE, session.session_id, run.run_id).status \
                    in ("queued", "running"):
                assert time.monotonic() < deadline, "the run did not end"
                time.sleep(0.02)
            platform.launcher.close()
    finally:
        platform.close()
    lines = [r for r in caplog.records if r.name == "agentloom.run"]
    steps = [r for r in lines if r.getMessage().startswith("step ")]
    assert steps and any("input_tokens=11" in r.getMessage() for r in steps)
    for record in lines:
        text = record.getMessage()
        assert f"run_id={run.run_id}" in text and f"session_id={session.session_id}" in text
        assert f"space_id={space.space_id}" in text
    assert "observability failed" not in caplog.text
    everything = caplog.text + "".join(str(r.__dict__) for r in caplog.records)
    for secret in (QUESTION, ANSWER, PROVIDER_KEY, "Zanzibar"):
        assert secret not in everything
