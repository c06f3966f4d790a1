"""A run blocked by its token budget names the way out, and the embedded app resumes it
with a raised budget (the CLI's `resume --raise-tokens N`)."""

from __future__ import annotations

from pathlib import Path

from agentloom.local.app import LocalApp
from agentloom.local.operator import next_commands
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.engine import RaiseBudget
from agentloom_runtime.snapshot import parse_snapshot
from agentloom_runtime.testing import FunctionModel, ScriptedModel


def priced_model() -> FunctionModel:
    """Two plan updates, then an answer; every call reports 100 tokens."""

    def reply(request: ModelRequest) -> ModelResponse:
        usage = {"prompt_tokens": 80, "completion_tokens": 20, "total_tokens": 100}
        if request.purpose == "verification":
            response = ScriptedModel.verdict("complete")
        else:
            step = sum(1 for m in request.messages if m.get("role") == "assistant")
            plan = {"steps": [{"id": "1", "title": "t", "status": "completed"}]}
            response = (ScriptedModel.call("update_plan", plan, id=f"p{step}") if step < 2
                        else ScriptedModel.answer("done"))
        return ModelResponse(content=response.content, tool_calls=response.tool_calls,
                             usage=usage)

    return FunctionModel(reply)


async def test_a_token_budget_block_is_moved_on_by_a_raised_budget(tmp_path: Path) -> None:
    snap = parse_snapshot({"agent_id": "budgeted", "prompt": "p", "model": {"model": "m"},
                           "limits": {"max_tokens": 150}})
    app = LocalApp(tmp_path)
    try:
        result = await app.run(snap, priced_model(), "do it", session="s")
        assert (result.status, result.error_code) == ("blocked", "budget_exceeded")
        summary = app.summary(result.run_id)
        assert summary.way_out == "raise_budget"
        commands = next_commands("agentloom", result.run_id, summary.way_out)
        assert commands and "--raise-tokens" in commands[0]
        again = await app.resume(result.run_id, snap, priced_model())
        assert again.error_code == "budget_exceeded", "no raise: still blocked"
        done = await app.resume(result.run_id, snap, priced_model(),
                                raise_budget=RaiseBudget(by="ops", max_tokens=10_000))
        assert done.status == "completed"
    finally:
        app.close()
