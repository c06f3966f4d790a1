"""Cancel works whatever the run's configuration became: the API cancels a run whose
tool catalog changed since it started (attaching an engine to it is refused with
``ResumeMismatch``), because cancelling assembles no engine (``RunHost.cancel``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from agentloom.capabilities import Capabilities, CapabilityBase, RunScope
from agentloom.platform.host import scope_of
from agentloom_runtime.errors import ResumeMismatch
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.tool_contracts import ToolDefinition

from .conftest import Api, Model, stopped_view, wait_for


class AddsATool(CapabilityBase):
    """A capability that appeared after the run started: one more tool in the catalog."""

    kind = "extra"

    def pin(self, space_id: str, config: Mapping[str, Any]) -> dict[str, Any]:
        return dict(config)

    def tools(self, snapshot: AgentSnapshot, scope: RunScope) -> list[ToolDefinition]:
        async def echo(context: Any, arguments: Mapping[str, Any]) -> str:
            return "echo"

        return [ToolDefinition(name="echo", description="echo", handler=echo,
                               parameters={"type": "object", "properties": {}},
                               implementation_id="echo/v1", tool_id="echo")]


def test_cancel_through_the_api_after_a_tool_catalog_change(api: Api, model: Model) -> None:
    platform = api.platform
    alice = api.client("alice")
    session = alice.create_session(api.space_id, api.agent_id)
    run = alice.ask(session.session_id, "Q hang until cancelled")
    wait_for(lambda: "Q hang until cancelled" in model.started, what="the model call")
    platform.launcher.stop(run.run_id)  # the server let go: the run is interrupted
    assert stopped_view(alice, session.session_id, run.run_id).status == "interrupted"

    platform.host.capabilities = Capabilities.of([AddsATool()])
    found = platform.store.runs.find(run.run_id)
    assert found is not None
    snapshot = platform.sessions._snapshot(found.value.agent_id, found.value.version)
    with pytest.raises(ResumeMismatch):  # the engine no longer attaches to this run
        platform.host.engine(scope_of(found.value), snapshot, attach=True)

    view = alice.cancel(session.session_id, run.run_id, "not needed any more")
    assert view.status == "cancelled"
    assert view.error is not None and view.error["code"] == "run_cancelled"
    again = alice.ask(session.session_id, "Q after the cancel")  # the session is free
    assert stopped_view(alice, session.session_id, again.run_id).status == "completed"
